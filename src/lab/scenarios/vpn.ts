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
 *   laptop (eth0 192.0.2.10) ─ node (lan0 192.0.2.1 · vpnveth 10.244.1.1 · webveth 10.244.2.1 ·
 *   dnsveth 10.244.3.1 · pubveth 198.51.100.1) ─ vpn pod (eth0 10.244.1.10, tun0 10.8.0.1/24) ·
 *   web pod (10.244.2.20:8080) · dns pod (10.244.3.53:53) · public host (198.51.100.7)
 */
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { collectKernelState, runProbes, startCapture, writeSnapshotFile } from "../artifacts.ts";
import { labTempDir, type Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { type ManifestFix, VPN_NS, VPN_POD, vpnClusterFiles } from "./vpn-cluster.ts";

export const VPN = {
  pool: "10.8.0.0/24",
  peer: "10.8.0.1",
  lbIp: "203.0.113.10",
  vpnPodIp: "10.244.1.10",
  targetPodIp: "10.244.2.20",
  dnsPodIp: "10.244.3.53",
  webServiceIp: "10.96.0.20",
  dnsServiceIp: "10.96.0.10",
  publicIp: "198.51.100.7",
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/12",
  webName: "web.demo.svc.cluster.local",
} as const;

const onOff = z.enum(["on", "off"]);
export const VpnOptions = z
  .object({
    "ip-forward": z.enum(["0", "1"]).default("0"),
    "masquerade-pool": onOff.default("on"),
    policy: z.union([z.literal(true), z.enum(["true", "false"])]).optional(),
    dns: z.enum(["ok", "broken"]).default("ok"),
    manifest: z.enum(["none", "init-container", "pod-sysctls", "chart-value"]).default("none"),
    psa: z.enum(["privileged", "baseline", "restricted"]).default("privileged"),
  })
  .strict()
  .transform((o) => ({
    ipForward: o["ip-forward"] === "1",
    masqueradePool: o["masquerade-pool"] === "on",
    policy: o.policy === true || o.policy === "true",
    dnsOk: o.dns === "ok",
    manifest: o.manifest as ManifestFix,
    psa: o.psa,
  }));
export type VpnLabOptions = z.output<typeof VpnOptions>;

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

/** Resolves when `pattern` appears on the child's stdout; rejects after `ms`. */
function waitFor(
  child: import("node:child_process").ChildProcess,
  pattern: RegExp,
  ms: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(
      () => reject(new Error(`timed out waiting for ${pattern}: ${seen.slice(-800)}`)),
      ms,
    );
    const on = (b: Buffer) => {
      seen += b.toString();
      if (pattern.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", on);
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before ${pattern}: ${seen.slice(-800)}`));
    });
  });
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

function dnsResponderArgv(): string[] {
  const here = import.meta.url;
  const isTs = here.endsWith(".ts");
  const file = fileURLToPath(new URL(isTs ? "../dns-responder.ts" : "../dns-responder.js", here));
  return [process.execPath, ...(isTs ? ["--import", "tsx"] : []), file];
}

export const scenario: Scenario<VpnLabOptions> = {
  name: "vpn",
  description:
    "OpenVPN server in a pod namespace and a client laptop: --ip-forward 0|1 --masquerade-pool on|off --policy --dns ok|broken --manifest none|init-container|pod-sysctls|chart-value --psa LEVEL",
  options: VpnOptions,
  async run(ctx: ScenarioContext, o: VpnLabOptions): Promise<ScenarioOutcome> {
    const { lab, log } = ctx;
    const laptop = await lab.addNamespace("laptop");
    const node = await lab.addNamespace("node");
    const vpn = await lab.addNamespace("vpn");
    const web = await lab.addNamespace("web");
    const dns = await lab.addNamespace("dns");
    const pub = await lab.addNamespace("pub");
    await lab.link(node, "lan0", laptop, "eth0");
    await lab.link(node, "vpnveth", vpn, "eth0");
    await lab.link(node, "webveth", web, "eth0");
    await lab.link(node, "dnsveth", dns, "eth0");
    await lab.link(node, "pubveth", pub, "eth0");
    for (const ns of [laptop, node, vpn, web, dns, pub])
      await sh(ns, ["ip", "link", "set", "lo", "up"]);
    await up(node, "lan0", "192.0.2.1/24");
    await up(laptop, "eth0", "192.0.2.10/24");
    await up(node, "vpnveth", "10.244.1.1/24");
    await up(vpn, "eth0", `${VPN.vpnPodIp}/24`);
    await up(node, "webveth", "10.244.2.1/24");
    await up(web, "eth0", `${VPN.targetPodIp}/24`);
    await up(node, "dnsveth", "10.244.3.1/24");
    await up(dns, "eth0", `${VPN.dnsPodIp}/24`);
    await up(node, "pubveth", "198.51.100.1/24");
    await up(pub, "eth0", `${VPN.publicIp}/24`);
    await sh(laptop, ["ip", "route", "add", `${VPN.lbIp}/32`, "via", "192.0.2.1"]);
    for (const [ns, gw] of [
      [vpn, "10.244.1.1"],
      [web, "10.244.2.1"],
      [dns, "10.244.3.1"],
      [pub, "198.51.100.1"],
    ] as const) {
      await sh(ns, ["ip", "route", "add", "default", "via", gw]);
    }
    await sh(node, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    // The node: a LoadBalancer in front of the VPN pod, and kube-proxy's Service DNAT.
    const nat = [
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      ":KUBE-SERVICES - [0:0]",
      "-A PREROUTING -j KUBE-SERVICES",
      `-A KUBE-SERVICES -d ${VPN.lbIp}/32 -p udp -m udp --dport 1194 -j DNAT --to-destination ${VPN.vpnPodIp}:1194`,
      `-A KUBE-SERVICES -d ${VPN.webServiceIp}/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination ${VPN.targetPodIp}:8080`,
      `-A KUBE-SERVICES -d ${VPN.dnsServiceIp}/32 -p udp -m udp --dport 53 -j DNAT --to-destination ${VPN.dnsPodIp}:53`,
      // egress to the public host leaves as the node (pods are private addresses)
      `-A POSTROUTING -s ${VPN.podCidr} -o pubveth -j MASQUERADE`,
      "COMMIT",
      "",
    ];
    const filter = [
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
    ];
    if (o.policy) {
      // NetworkPolicy demo/allow-vpn-clients, as a CNI enforces it: only the client pool reaches web-0.
      filter.push(
        `-A FORWARD -d ${VPN.targetPodIp}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
        `-A FORWARD -s ${VPN.pool} -d ${VPN.targetPodIp}/32 -j ACCEPT`,
        `-A FORWARD -d ${VPN.targetPodIp}/32 -j DROP`,
      );
    }
    filter.push("COMMIT", "");
    await sh(node, ["iptables-restore"], [...nat, ...filter].join("\n"));

    // The VPN pod: forwarding as the variant says, and the chart's masquerade rule when on.
    await sh(vpn, ["sysctl", "-qw", `net.ipv4.ip_forward=${o.ipForward ? 1 : 0}`]);
    if (o.masqueradePool) {
      await sh(vpn, [
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
      await waitFor(server, /Initialization Sequence Completed/, 20_000);
      web.spawn([
        "node",
        "-e",
        `require("http").createServer((q,r)=>r.end("web-0 ok\\n")).listen(8080,"${VPN.targetPodIp}")`,
      ]);
      if (o.dnsOk) {
        const responder = dns.spawn([
          ...dnsResponderArgv(),
          VPN.dnsPodIp,
          "53",
          "ok",
          `${VPN.webName}=${VPN.webServiceIp}`,
          `kubernetes.default.svc.cluster.local=10.96.0.1`,
        ]);
        await waitFor(responder, /ready/, 15_000);
      }
      const client = laptop.spawn(["openvpn", "--config", join(dir, "client.conf")]);
      await waitFor(client, /Initialization Sequence Completed/, 30_000);
      log("vpn lab: tunnel up; probing from the laptop");

      const files: string[] = [];
      const out = ctx.outDir;
      const summary: string[] = [
        `ip_forward=${o.ipForward ? 1 : 0} in the vpn pod, masquerade ${o.masqueradePool ? "on" : "off"}, policy ${o.policy ? "on" : "off"}, dns ${o.dnsOk ? "ok" : "broken"}, manifest ${o.manifest}`,
      ];
      const capture = out
        ? await startCapture(vpn, out, "vpn-pod-eth0", {
            iface: "eth0",
            filter: "not port 1194",
            point: `pod/${VPN_NS}/${VPN_POD}`,
            phase: "before",
          })
        : undefined;
      const steps = [
        { shown: `ping -c 2 -W 1 ${VPN.peer}`, argv: ["ping", "-c", "2", "-W", "1", VPN.peer] },
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
        {
          shown: `ping -c 2 -W 1 ${VPN.publicIp}`,
          argv: ["ping", "-c", "2", "-W", "1", VPN.publicIp],
        },
        {
          shown: `dig @${VPN.dnsServiceIp} ${VPN.webName} +time=2 +tries=1`,
          argv: ["dig", `@${VPN.dnsServiceIp}`, VPN.webName, "+time=2", "+tries=1"],
        },
        { shown: "ip route", argv: ["ip", "route"] },
      ];
      const { transcript, results } = await runProbes(laptop, steps);
      await capture?.stop();
      const header = `# client: laptop vpn-address: 10.8.0.2`;
      for (const r of results) summary.push(`$ ${r.shown} → exit ${r.code}`);
      if (out) {
        files.push(writeSnapshotFile(out, "probes/laptop.txt", `${header}\n${transcript}`));
        if (capture) files.push(capture.rel, "captures/vpn-pod-eth0.yaml");
        const podDir = `pods/${VPN_NS}/${VPN_POD}`;
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
            `${podDir}/openvpn.conf`,
            readFileSync(join(dir, "server.conf"), "utf8").replaceAll(dir, "/etc/openvpn/certs"),
          ),
        );
        files.push(
          ...(await collectKernelState(node, out, "nodes/lab-node-1", [
            "iptables-save",
            "ip-route",
            "sysctl",
          ])),
        );
        const cluster = vpnClusterFiles({
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
        });
        for (const [rel, text] of Object.entries(cluster))
          files.push(writeSnapshotFile(out, rel, text));
        files.push(
          writeSnapshotFile(
            out,
            "README.md",
            `# VPN lab snapshot\n\nMade by \`podpath lab run vpn --ip-forward ${o.ipForward ? 1 : 0} --masquerade-pool ${o.masqueradePool ? "on" : "off"}${o.policy ? " --policy" : ""} --dns ${o.dnsOk ? "ok" : "broken"} --manifest ${o.manifest} --psa ${o.psa}\`: real ${openvpnVersion()} server and client in network namespaces; probes, sysctl, iptables-save and routes are real outputs.\n`,
          ),
        );
      }
      return { files, summary };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
