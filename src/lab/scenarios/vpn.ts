/**
 * @module lab/scenarios/vpn — the replica of case B ("only the VPN server's tunnel IP answers"): a
 * real OpenVPN server in a "vpn pod" namespace (tun0, server 10.8.0.0/24, PKI made on the fly with
 * openssl) and a real OpenVPN client in a "laptop" namespace; a "node" namespace routing between
 * pods, with kube-proxy-like DNAT for two Service VIPs, a LoadBalancer DNAT for the VPN port and,
 * with `--policy`, a FORWARD filter enforcing a NetworkPolicy that admits only the client pool; a
 * target pod with an HTTP server, a DNS pod (lab/dns-responder.ts) and a public host. Probes run
 * from the laptop through the tunnel; the snapshot holds the vpn pod's real sysctl, iptables-save,
 * ip addr/route and openvpn.conf, the node's state, a capture and cluster/*.yaml.
 *
 * The replica is the shared tunnel lab (tunnel-lab.ts, with its DNS pod and public host); this
 * kind supplies the PKI, the OpenVPN server and client and how they come up, UDP 1194, the
 * chart's masquerade rule, openvpn.conf and a capture, its cluster objects and its words.
 *
 *   laptop (eth0 192.0.2.10) ─ node (lan0 192.0.2.1 · vpnveth 10.244.1.1 · webveth 10.244.2.1 ·
 *   dnsveth 10.244.3.1 · pubveth 198.51.100.1) ─ vpn pod (eth0 10.244.1.10, tun0 10.8.0.1/24) ·
 *   web pod (10.244.2.20:8080) · dns pod (10.244.3.53:53) · public host (198.51.100.7)
 */
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { labTempDir, mustExec } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import {
  buildTunnelLab,
  probeTunnelLab,
  startDnsPod,
  startWebPod,
  TUNNEL_LAB,
  TUNNEL_OPTION_FIELDS,
  tunnelOptionValues,
  tunnelProbeSteps,
  waitForOutput,
} from "./tunnel-lab.ts";
import { type ManifestFix, VPN_NS, VPN_POD, vpnClusterFiles } from "./vpn-cluster.ts";

export const VPN = {
  ...TUNNEL_LAB,
  pool: "10.8.0.0/24",
  peer: "10.8.0.1",
} as const;

export const VpnOptions = z
  .object({
    ...TUNNEL_OPTION_FIELDS,
    dns: z.enum(["ok", "broken"]).default("ok"),
    manifest: z.enum(["none", "init-container", "pod-sysctls", "chart-value"]).default("none"),
    psa: z.enum(["privileged", "baseline", "restricted"]).default("privileged"),
  })
  .strict()
  .transform((o) => ({
    ...tunnelOptionValues(o),
    dnsOk: o.dns === "ok",
    manifest: o.manifest as ManifestFix,
    psa: o.psa,
  }));
export type VpnLabOptions = z.output<typeof VpnOptions>;

/** A CA and a server and a client certificate (EC P-256), made on the fly. */
function makePki(dir: string): void {
  const o = (args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  o([
    "req",
    "-x509",
    ...key,
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
    "-days",
    "2",
    "-subj",
    "/CN=podpath-lab-ca",
  ]);
  for (const who of ["server", "client"]) {
    o(["req", ...key, "-keyout", `${who}.key`, "-out", `${who}.csr`, "-subj", `/CN=${who}`]);
    o([
      "x509",
      "-req",
      "-in",
      `${who}.csr`,
      "-CA",
      "ca.crt",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${who}.crt`,
      "-days",
      "2",
    ]);
  }
}

export function serverConfig(dir: string): string {
  return [
    "# OpenVPN server of the podpath VPN lab (as in the pod: /etc/openvpn/openvpn.conf)",
    "dev tun0",
    "topology subnet",
    "server 10.8.0.0 255.255.255.0",
    "proto udp",
    "port 1194",
    `local ${VPN.vpnPodIp}`,
    `ca ${join(dir, "ca.crt")}`,
    `cert ${join(dir, "server.crt")}`,
    `key ${join(dir, "server.key")}`,
    "dh none",
    "disable-dco",
    'push "route 10.244.0.0 255.255.0.0"',
    'push "route 10.96.0.0 255.240.0.0"',
    // stands for redirect-gateway: the "public" test range goes through the tunnel too
    'push "route 198.51.100.0 255.255.255.0"',
    `push "dhcp-option DNS ${VPN.dnsServiceIp}"`,
    "keepalive 10 60",
    "verb 3",
    "",
  ].join("\n");
}

function clientConfig(dir: string): string {
  return [
    "client",
    "dev tun0",
    "proto udp",
    `remote ${VPN.lbIp} 1194`,
    "nobind",
    `ca ${join(dir, "ca.crt")}`,
    `cert ${join(dir, "client.crt")}`,
    `key ${join(dir, "client.key")}`,
    "disable-dco",
    "verb 3",
    "",
  ].join("\n");
}

/** "OpenVPN 2.6.14", from the binary the lab runs (some builds exit 1 after printing it). */
function openvpnVersion(): string {
  let out = "";
  try {
    out = execFileSync("openvpn", ["--version"], { stdio: "pipe" }).toString();
  } catch (e) {
    out = String((e as { stdout?: Buffer }).stdout ?? "");
  }
  return /^OpenVPN \S+/.exec(out)?.[0] ?? "OpenVPN";
}

export const scenario: Scenario<VpnLabOptions> = {
  name: "vpn",
  description:
    "OpenVPN server in a pod namespace and a client laptop: --ip-forward 0|1 --masquerade-pool on|off --policy --dns ok|broken --manifest none|init-container|pod-sysctls|chart-value --psa LEVEL",
  options: VpnOptions,
  async run(ctx: ScenarioContext, o: VpnLabOptions): Promise<ScenarioOutcome> {
    const { lab, log } = ctx;
    const ns = await buildTunnelLab(lab, {
      pool: VPN.pool,
      lbUdpPorts: [1194],
      dnsPod: true,
      publicHost: true,
      policy: o.policy,
      ipForward: o.ipForward,
    });
    const { laptop, vpn } = ns;
    // the chart's masquerade rule when on
    if (o.masqueradePool) {
      await mustExec(vpn, [
        "iptables",
        "-t",
        "nat",
        "-A",
        "POSTROUTING",
        "-s",
        VPN.pool,
        "-o",
        "eth0",
        "-j",
        "MASQUERADE",
      ]);
    }
    // the PKI's private keys: removed with the lab, also after a kill (at the next start)
    const dir = labTempDir(lab, "vpn");
    try {
      log("vpn lab: making the PKI and starting OpenVPN");
      makePki(dir);
      writeFileSync(join(dir, "server.conf"), serverConfig(dir));
      writeFileSync(join(dir, "client.conf"), clientConfig(dir));
      const server = vpn.spawn(["openvpn", "--config", join(dir, "server.conf")]);
      await waitForOutput(server, /Initialization Sequence Completed/, 20_000);
      await startWebPod(ns.web);
      if (o.dnsOk && ns.dns) {
        await startDnsPod(ns.dns, [
          `${VPN.webName}=${VPN.webServiceIp}`,
          `kubernetes.default.svc.cluster.local=10.96.0.1`,
        ]);
      }
      const client = laptop.spawn(["openvpn", "--config", join(dir, "client.conf")]);
      await waitForOutput(client, /Initialization Sequence Completed/, 30_000);
      log("vpn lab: tunnel up; probing from the laptop");
      return await probeTunnelLab(ctx, ns, {
        steps: tunnelProbeSteps({ peer: VPN.peer, publicHost: true, dns: true, ipRoute: true }),
        variant: `ip_forward=${o.ipForward ? 1 : 0} in the vpn pod, masquerade ${o.masqueradePool ? "on" : "off"}, policy ${o.policy ? "on" : "off"}, dns ${o.dnsOk ? "ok" : "broken"}, manifest ${o.manifest}`,
        clientAddress: "10.8.0.2",
        capture: { name: "vpn-pod-eth0", filter: "not port 1194" },
        podDir: `pods/${VPN_NS}/${VPN_POD}`,
        podFiles: async () => ({
          "openvpn.conf": readFileSync(join(dir, "server.conf"), "utf8").replaceAll(
            dir,
            "/etc/openvpn/certs",
          ),
        }),
        clusterFiles: () =>
          vpnClusterFiles({
            pool: VPN.pool,
            vpnPodIp: VPN.vpnPodIp,
            targetPodIp: VPN.targetPodIp,
            dnsPodIp: VPN.dnsPodIp,
            webServiceIp: VPN.webServiceIp,
            dnsServiceIp: VPN.dnsServiceIp,
            podCidr: VPN.podCidr,
            manifest: o.manifest,
            psaLevel: o.psa,
            policy: o.policy,
          }),
        readme: () =>
          `# VPN lab snapshot\n\nMade by \`podpath lab run vpn --ip-forward ${o.ipForward ? 1 : 0} --masquerade-pool ${o.masqueradePool ? "on" : "off"}${o.policy ? " --policy" : ""} --dns ${o.dnsOk ? "ok" : "broken"} --manifest ${o.manifest} --psa ${o.psa}\`: real ${openvpnVersion()} server and client in network namespaces; probes, sysctl, iptables-save and routes are real outputs.\n`,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
