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
import { collectKernelState, runProbes, writeSnapshotFile } from "../artifacts.ts";
import { LAB_STATE_DIR, type Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { VPN } from "./vpn.ts";
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

const onOff = z.enum(["on", "off"]);
export const WireguardOptions = z
  .object({
    "ip-forward": z.enum(["0", "1"]).default("0"),
    "masquerade-pool": onOff.default("on"),
    policy: z.union([z.literal(true), z.enum(["true", "false"])]).optional(),
    manifest: z.enum(["none", "init-container", "pod-sysctls"]).default("none"),
    "allowed-ips": z.enum(["cluster", "services"]).default("cluster"),
  })
  .strict()
  .transform((o) => ({
    ipForward: o["ip-forward"] === "1",
    masqueradePool: o["masquerade-pool"] === "on",
    policy: o.policy === true || o.policy === "true",
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

async function sh(ns: Namespace, argv: readonly string[], input?: string): Promise<string> {
  const r = await ns.exec(argv, input === undefined ? {} : { input });
  if (r.code !== 0)
    throw new Error(`${argv.join(" ")} in ${ns.name} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

async function up(ns: Namespace, iface: string, cidr: string): Promise<void> {
  await sh(ns, ["ip", "addr", "add", cidr, "dev", iface]);
  await sh(ns, ["ip", "link", "set", iface, "up"]);
}

/** Polls until `check` holds (the tunnel's first handshake), failing after `ms`. */
async function until(check: () => Promise<boolean>, what: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
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
    const laptop = await lab.addNamespace("laptop");
    const node = await lab.addNamespace("node");
    const vpn = await lab.addNamespace("vpn");
    const web = await lab.addNamespace("web");
    await lab.link(node, "lan0", laptop, "eth0");
    await lab.link(node, "vpnveth", vpn, "eth0");
    await lab.link(node, "webveth", web, "eth0");
    for (const ns of [laptop, node, vpn, web]) await sh(ns, ["ip", "link", "set", "lo", "up"]);
    await up(node, "lan0", "192.0.2.1/24");
    await up(laptop, "eth0", "192.0.2.10/24");
    await up(node, "vpnveth", "10.244.1.1/24");
    await up(vpn, "eth0", `${VPN.vpnPodIp}/24`);
    await up(node, "webveth", "10.244.2.1/24");
    await up(web, "eth0", `${VPN.targetPodIp}/24`);
    await sh(laptop, ["ip", "route", "add", `${VPN.lbIp}/32`, "via", "192.0.2.1"]);
    await sh(vpn, ["ip", "route", "add", "default", "via", "10.244.1.1"]);
    await sh(web, ["ip", "route", "add", "default", "via", "10.244.2.1"]);
    await sh(node, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    const rules = [
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      ":KUBE-SERVICES - [0:0]",
      "-A PREROUTING -j KUBE-SERVICES",
      `-A KUBE-SERVICES -d ${VPN.lbIp}/32 -p udp -m udp --dport ${WG.port} -j DNAT --to-destination ${VPN.vpnPodIp}:${WG.port}`,
      `-A KUBE-SERVICES -d ${VPN.webServiceIp}/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination ${VPN.targetPodIp}:8080`,
      "COMMIT",
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ...(o.policy
        ? [
            // NetworkPolicy demo/allow-vpn-clients as a CNI enforces it: only the pool reaches web-0
            `-A FORWARD -d ${VPN.targetPodIp}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
            `-A FORWARD -s ${WG.pool} -d ${VPN.targetPodIp}/32 -j ACCEPT`,
            `-A FORWARD -d ${VPN.targetPodIp}/32 -j DROP`,
          ]
        : []),
      "COMMIT",
      "",
    ];
    await sh(node, ["iptables-restore"], rules.join("\n"));
    await sh(vpn, ["sysctl", "-qw", `net.ipv4.ip_forward=${o.ipForward ? 1 : 0}`]);

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
      await sh(vpn, [wireguardGoPath(), serverDev]);
      await sh(laptop, [wireguardGoPath(), clientDev]);
      await sh(vpn, [
        "wg",
        "set",
        serverDev,
        "private-key",
        server.file,
        "listen-port",
        String(WG.port),
      ]);
      await sh(vpn, ["wg", "set", serverDev, "peer", client.pub, "allowed-ips", `${WG.client}/32`]);
      await up(vpn, serverDev, `${WG.peer}/24`);
      // the PostUp hooks, as wg-quick runs them (%i is the interface)
      const postUp = /^PostUp = (.*)$/m.exec(conf)?.[1] ?? "";
      for (const cmd of postUp.split(";")) {
        const argv = cmd.trim().replaceAll("%i", serverDev).split(/\s+/);
        await sh(vpn, argv);
      }
      const allowed = o.allowedIps.replaceAll(" ", "");
      await sh(laptop, [
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
        `${VPN.lbIp}:${WG.port}`,
      ]);
      await up(laptop, clientDev, `${WG.client}/24`);
      // wg-quick adds a route for every AllowedIPs prefix
      for (const p of allowed.split(",")) {
        if (p !== WG.pool) await sh(laptop, ["ip", "route", "add", p, "dev", clientDev]);
      }
      await laptop.exec(["ping", "-c", "1", "-W", "2", WG.peer]);
      await until(
        async () => /latest handshake/.test((await vpn.exec(["wg", "show", serverDev])).stdout),
        "the first WireGuard handshake",
        15_000,
      );
      web.spawn([
        "node",
        "-e",
        `require("http").createServer((q,r)=>r.end("web-0 ok\\n")).listen(8080,"${VPN.targetPodIp}")`,
      ]);
      await until(
        async () => (await web.exec(["ss", "-ltn"])).stdout.includes(`${VPN.targetPodIp}:8080`),
        "the web pod's server",
        15_000,
      );
      log("wireguard lab: tunnel up; probing from the laptop");
      const summary = [
        `ip_forward=${o.ipForward ? 1 : 0} in the vpn pod, masquerade ${o.masqueradePool ? "on" : "off"} (PostUp), policy ${o.policy ? "on" : "off"}, manifest ${o.manifest}, client AllowedIPs ${o.allowedIps}`,
      ];
      const steps = [
        { shown: `ping -c 2 -W 1 ${WG.peer}`, argv: ["ping", "-c", "2", "-W", "1", WG.peer] },
        {
          shown: `ping -c 2 -W 1 ${VPN.targetPodIp}`,
          argv: ["ping", "-c", "2", "-W", "1", VPN.targetPodIp],
        },
        {
          shown: `curl -sS -m 3 -o /dev/null -w "%{http_code}\\n" http://${VPN.webServiceIp}/`,
          argv: [
            "curl",
            "-sS",
            "-m",
            "3",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}\n",
            `http://${VPN.webServiceIp}/`,
          ],
        },
        { shown: "ip route", argv: ["ip", "route"] },
      ];
      const { transcript, results } = await runProbes(laptop, steps);
      for (const r of results) summary.push(`$ ${r.shown} → exit ${r.code}`);
      const files: string[] = [];
      const out = ctx.outDir;
      if (out) {
        const podDir = `pods/${WG_NS}/${WG_POD}`;
        const header = `# client: laptop vpn-address: ${WG.client}`;
        files.push(writeSnapshotFile(out, "probes/laptop.txt", `${header}\n${transcript}`));
        files.push(
          ...(await collectKernelState(vpn, out, podDir, [
            "sysctl",
            "iptables-save",
            "ip-addr",
            "ip-route",
          ])),
        );
        files.push(
          writeSnapshotFile(
            out,
            `${podDir}/wg0.conf`,
            conf.replace(server.key, "(replaced: the lab's key is not kept)"),
          ),
        );
        files.push(
          writeSnapshotFile(out, `${podDir}/wg-show.txt`, await sh(vpn, ["wg", "show", serverDev])),
        );
        files.push(
          ...(await collectKernelState(node, out, "nodes/lab-node-1", [
            "iptables-save",
            "ip-route",
            "sysctl",
          ])),
        );
        const cluster = wireguardClusterFiles({
          pool: WG.pool,
          allowedIps: o.allowedIps,
          vpnPodIp: VPN.vpnPodIp,
          targetPodIp: VPN.targetPodIp,
          dnsPodIp: VPN.dnsPodIp,
          webServiceIp: VPN.webServiceIp,
          dnsServiceIp: VPN.dnsServiceIp,
          podCidr: VPN.podCidr,
          manifest: o.manifest,
          policy: o.policy,
        });
        for (const [rel, text] of Object.entries(cluster))
          files.push(writeSnapshotFile(out, rel, text));
        files.push(
          writeSnapshotFile(
            out,
            "README.md",
            `# WireGuard lab snapshot\n\nMade by \`podpath lab run wireguard --ip-forward ${o.ipForward ? 1 : 0} --masquerade-pool ${o.masqueradePool ? "on" : "off"}${o.policy ? " --policy" : ""} --manifest ${o.manifest}\`: real wireguard-go and wg (wireguard-tools) in network namespaces; probes, wg show, sysctl, iptables-save and routes are real outputs.\n`,
          ),
        );
      }
      return { files, summary };
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
