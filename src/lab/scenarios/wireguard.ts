/**
 * @module lab/scenarios/wireguard — case B with a real WireGuard tunnel: wireguard-go (built by
 * scripts/build-components.sh into .components/; the kernel module is not needed) and `wg` from
 * wireguard-tools, a server in a "vpn pod" namespace (pool 10.13.13.0/24, server 10.13.13.1) and
 * a client in a "laptop" namespace reaching it through the node's LoadBalancer DNAT. The server's
 * wg0.conf PostUp hooks run as wg-quick would run them (masquerade of the pool when on); forwarding
 * is set as the variant says; `--policy` adds the node's FORWARD filter admitting only the pool.
 * The snapshot holds the pod's real sysctl, iptables-save, ip addr/route, its wg0.conf (private
 * key replaced) and `wg show` output, the node's state, the client's probes and cluster/*.yaml.
 *
 * The replica is the shared tunnel lab (tunnel-lab.ts, without DNS pod or public host); this kind
 * supplies the keys, the wireguard-go devices and their `wg set`, the PostUp hooks and the
 * client's AllowedIPs routes, UDP 51820, wg0.conf and `wg show`, its cluster objects and its words.
 *
 *   laptop (eth0 192.0.2.10, wg 10.13.13.2) ─ node (lan0 192.0.2.1 · vpnveth 10.244.1.1 · webveth
 *   10.244.2.1) ─ vpn pod (eth0 10.244.1.10, wg 10.13.13.1/24) · web pod (10.244.2.20:8080)
 *
 * Keys and configs live in /run/podpath-lab/<lab id>-wg/ (mode 0700): removed when the run ends,
 * and at the next run's start when their lab is gone (with wireguard-go's UAPI sockets, which
 * are global: /var/run/wireguard/<device>.sock; devices are named after the lab id so runs never
 * collide). wireguard-go runs inside the lab's namespaces, so the lab's teardown ends it.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { LAB_STATE_DIR, mustExec } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import {
  addressUp,
  buildTunnelLab,
  TUNNEL_LAB as L,
  probeTunnelLab,
  startWebPod,
  TUNNEL_OPTION_FIELDS,
  tunnelOptionValues,
  tunnelProbeSteps,
  until,
} from "./tunnel-lab.ts";
import { WG_NS, WG_POD, type WgManifestFix, wireguardClusterFiles } from "./wireguard-cluster.ts";

export const WG = {
  pool: "10.13.13.0/24",
  peer: "10.13.13.1",
  client: "10.13.13.2",
  port: 51820,
  /** What the clients route into the tunnel: the pool, the pods and the Services. */
  allowedIps: "10.13.13.0/24, 10.244.0.0/16, 10.96.0.0/12",
  /** Services only: the pod address is outside. */
  narrowAllowedIps: "10.13.13.0/24, 10.96.0.0/12",
} as const;

export const WireguardOptions = z
  .object({
    ...TUNNEL_OPTION_FIELDS,
    manifest: z.enum(["none", "init-container", "pod-sysctls"]).default("none"),
    "allowed-ips": z.enum(["cluster", "services"]).default("cluster"),
  })
  .strict()
  .transform((o) => ({
    ...tunnelOptionValues(o),
    manifest: o.manifest as WgManifestFix,
    allowedIps: o["allowed-ips"] === "services" ? WG.narrowAllowedIps : WG.allowedIps,
  }));
export type WireguardLabOptions = z.output<typeof WireguardOptions>;

const UAPI_DIR = "/var/run/wireguard";

/** The wireguard-go binary the build script makes, or why there is none. */
export function wireguardGoPath(): string {
  const dir =
    process.env["COMPONENTS_DIR"] ||
    fileURLToPath(new URL("../../../.components", import.meta.url));
  return join(dir, "wireguard-go");
}

/** Why the WireGuard lab cannot run here (no wireguard-go, no wg), or undefined. */
export function wireguardUnavailableReason(): string | undefined {
  if (!existsSync(wireguardGoPath())) {
    return `${wireguardGoPath()} is not built: run scripts/build-components.sh`;
  }
  try {
    execFileSync("wg", ["--version"], { stdio: "ignore" });
  } catch {
    return "needs wg from wireguard-tools (apt-get install wireguard-tools)";
  }
  return undefined;
}

/** Key folders and UAPI sockets of labs whose pid file is gone (their run ended or died). */
function removeStaleWireguard(): void {
  const alive = (id: string) => existsSync(join(LAB_STATE_DIR, `${id}.pid`));
  for (const f of existsSync(LAB_STATE_DIR) ? readdirSync(LAB_STATE_DIR) : []) {
    const m = /^([a-z0-9]+)-wg$/.exec(f);
    if (m && !alive(m[1]!)) rmSync(join(LAB_STATE_DIR, f), { recursive: true, force: true });
  }
  for (const f of existsSync(UAPI_DIR) ? readdirSync(UAPI_DIR) : []) {
    const m = /^w[sc]([a-z0-9]+)\.sock$/.exec(f);
    if (m && !alive(m[1]!)) rmSync(join(UAPI_DIR, f), { force: true });
  }
}

/** The server's wg0.conf as the pod holds it (the key is written to a file beside it). */
function serverConfig(o: WireguardLabOptions, clientPub: string, privateKey: string): string {
  const postUp = ["iptables -A FORWARD -i %i -j ACCEPT"];
  const postDown = ["iptables -D FORWARD -i %i -j ACCEPT"];
  if (o.masqueradePool) {
    postUp.push(`iptables -t nat -A POSTROUTING -s ${WG.pool} -o eth0 -j MASQUERADE`);
    postDown.push(`iptables -t nat -D POSTROUTING -s ${WG.pool} -o eth0 -j MASQUERADE`);
  }
  return [
    "# wg0.conf of the podpath WireGuard lab (as in the pod: /etc/wireguard/wg0.conf)",
    "[Interface]",
    `Address = ${WG.peer}/24`,
    `ListenPort = ${WG.port}`,
    `PrivateKey = ${privateKey}`,
    `PostUp = ${postUp.join("; ")}`,
    `PostDown = ${postDown.join("; ")}`,
    "",
    "[Peer]",
    "# laptop",
    `PublicKey = ${clientPub}`,
    `AllowedIPs = ${WG.client}/32`,
    "",
  ].join("\n");
}

export const scenario: Scenario<WireguardLabOptions> = {
  name: "wireguard",
  description:
    "WireGuard (wireguard-go + wg) server in a pod namespace and a client laptop: --ip-forward 0|1 --masquerade-pool on|off --policy --manifest none|init-container|pod-sysctls --allowed-ips cluster|services",
  options: WireguardOptions,
  async run(ctx: ScenarioContext, o: WireguardLabOptions): Promise<ScenarioOutcome> {
    const reason = wireguardUnavailableReason();
    if (reason) throw new Error(`lab wireguard ${reason}`);
    removeStaleWireguard();
    const { lab, log } = ctx;
    const ns = await buildTunnelLab(lab, {
      pool: WG.pool,
      lbUdpPorts: [WG.port],
      dnsPod: false,
      publicHost: false,
      policy: o.policy,
      ipForward: o.ipForward,
    });
    const { laptop, vpn } = ns;

    const dir = join(LAB_STATE_DIR, `${lab.id}-wg`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const serverDev = `ws${lab.id}`;
    const clientDev = `wc${lab.id}`;
    try {
      log("wireguard lab: keys, wireguard-go in the pod and on the laptop");
      const key = (name: string) => {
        const k = execFileSync("wg", ["genkey"]).toString().trim();
        writeFileSync(join(dir, name), `${k}\n`, { mode: 0o600 });
        return {
          file: join(dir, name),
          pub: execFileSync("wg", ["pubkey"], { input: k }).toString().trim(),
          key: k,
        };
      };
      const server = key("server.key");
      const client = key("client.key");
      const conf = serverConfig(o, client.pub, server.key);
      // wireguard-go forks into the background inside the namespace; the lab's teardown ends it
      await mustExec(vpn, [wireguardGoPath(), serverDev]);
      await mustExec(laptop, [wireguardGoPath(), clientDev]);
      await mustExec(vpn, [
        "wg",
        "set",
        serverDev,
        "private-key",
        server.file,
        "listen-port",
        String(WG.port),
      ]);
      await mustExec(vpn, [
        "wg",
        "set",
        serverDev,
        "peer",
        client.pub,
        "allowed-ips",
        `${WG.client}/32`,
      ]);
      await addressUp(vpn, serverDev, `${WG.peer}/24`);
      // the PostUp hooks, as wg-quick runs them (%i is the interface)
      const postUp = /^PostUp = (.*)$/m.exec(conf)?.[1] ?? "";
      for (const cmd of postUp.split(";")) {
        const argv = cmd.trim().replaceAll("%i", serverDev).split(/\s+/);
        await mustExec(vpn, argv);
      }
      const allowed = o.allowedIps.replaceAll(" ", "");
      await mustExec(laptop, [
        "wg",
        "set",
        clientDev,
        "private-key",
        client.file,
        "peer",
        server.pub,
        "allowed-ips",
        allowed,
        "endpoint",
        `${L.lbIp}:${WG.port}`,
      ]);
      await addressUp(laptop, clientDev, `${WG.client}/24`);
      // wg-quick adds a route for every AllowedIPs prefix
      for (const p of allowed.split(",")) {
        if (p !== WG.pool) await mustExec(laptop, ["ip", "route", "add", p, "dev", clientDev]);
      }
      await laptop.exec(["ping", "-c", "1", "-W", "2", WG.peer]);
      await until(
        async () => /latest handshake/.test((await vpn.exec(["wg", "show", serverDev])).stdout),
        15_000,
        () => "timed out waiting for the first WireGuard handshake",
      );
      await startWebPod(ns.web);
      log("wireguard lab: tunnel up; probing from the laptop");
      return await probeTunnelLab(ctx, ns, {
        steps: tunnelProbeSteps({ peer: WG.peer, publicHost: false, dns: false, ipRoute: true }),
        variant: `ip_forward=${o.ipForward ? 1 : 0} in the vpn pod, masquerade ${o.masqueradePool ? "on" : "off"} (PostUp), policy ${o.policy ? "on" : "off"}, manifest ${o.manifest}, client AllowedIPs ${o.allowedIps}`,
        clientAddress: WG.client,
        podDir: `pods/${WG_NS}/${WG_POD}`,
        podFiles: async () => ({
          "wg0.conf": conf.replace(server.key, "(replaced: the lab's key is not kept)"),
          "wg-show.txt": await mustExec(vpn, ["wg", "show", serverDev]),
        }),
        clusterFiles: () =>
          wireguardClusterFiles({
            pool: WG.pool,
            allowedIps: o.allowedIps,
            vpnPodIp: L.vpnPodIp,
            targetPodIp: L.targetPodIp,
            dnsPodIp: L.dnsPodIp,
            webServiceIp: L.webServiceIp,
            dnsServiceIp: L.dnsServiceIp,
            podCidr: L.podCidr,
            manifest: o.manifest,
            policy: o.policy,
          }),
        readme: () =>
          `# WireGuard lab snapshot\n\nMade by \`podpath lab run wireguard --ip-forward ${o.ipForward ? 1 : 0} --masquerade-pool ${o.masqueradePool ? "on" : "off"}${o.policy ? " --policy" : ""} --manifest ${o.manifest}\`: real wireguard-go and wg (wireguard-tools) in network namespaces; probes, wg show, sysctl, iptables-save and routes are real outputs.\n`,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
      // a lab that is not kept running (lab run) leaves no UAPI sockets behind
      if (ctx.outDir !== undefined) {
        for (const dev of [serverDev, clientDev])
          rmSync(join(UAPI_DIR, `${dev}.sock`), { force: true });
      }
    }
  },
};
