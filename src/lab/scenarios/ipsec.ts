/**
 * @module lab/scenarios/ipsec — the replica of case B for an IPsec VPN pod: strongSwan's charon
 * (started by `ipsec start`, reading ipsec.conf) in a "vpn pod" namespace as the road-warrior
 * gateway (PSK, `rightsourceip` pool 10.9.0.0/24, `leftsubnet` the traffic selectors), a second
 * charon in a "laptop" namespace as the client, a "node" namespace routing between pods with
 * kube-proxy-like DNAT (Service VIPs, a LoadBalancer for IKE), a target pod and a DNS pod.
 *
 * Each charon runs in a private mount namespace (`unshare -m`) with a tmpfs on /run, so its pid
 * file and stroke/vici sockets are its own; `ip netns exec` binds the namespace's
 * /etc/netns/<ns>/{ipsec.conf,ipsec.secrets,strongswan.conf,ipsec.d} over /etc (removed with the
 * lab). ESP runs in userspace through charon's kernel-libipsec plugin (a TUN device, ipsec0), so
 * the replica needs no ESP support in the kernel; forwarding, NAT and routing are the kernel's.
 *
 *   laptop (eth0 192.0.2.10, virtual IP 10.9.0.1) ─ node (lan0 192.0.2.1 · vpnveth 10.244.1.1 ·
 *   webveth 10.244.2.1 · dnsveth 10.244.3.1) ─ vpn pod (eth0 10.244.1.10, ipsec0) ·
 *   web pod (10.244.2.20:8080) · dns pod (10.244.3.53:53)
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { collectKernelState, runProbes, writeSnapshotFile } from "../artifacts.ts";
import type { Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { IPSEC_NS, IPSEC_POD, type IpsecManifestFix, ipsecClusterFiles } from "./ipsec-cluster.ts";

export const IPSEC = {
  pool: "10.9.0.0/24",
  clientVip: "10.9.0.1",
  lbIp: "203.0.113.10",
  vpnPodIp: "10.244.1.10",
  targetPodIp: "10.244.2.20",
  dnsPodIp: "10.244.3.53",
  webServiceIp: "10.96.0.20",
  dnsServiceIp: "10.96.0.10",
  podCidr: "10.244.0.0/16",
  webName: "web.demo.svc.cluster.local",
  /** `leftsubnet` per `--selectors`: the cluster (pods and Services), the VPN pod's node range only. */
  clusterSelectors: "10.0.0.0/8",
  narrowSelectors: "10.244.1.0/24",
  /** What the client asks for with `--selectors mismatch`: nothing the gateway offers. */
  foreignSelectors: "172.16.0.0/12",
} as const;

const onOff = z.enum(["on", "off"]);
export const IpsecOptions = z
  .object({
    "ip-forward": z.enum(["0", "1"]).default("0"),
    "masquerade-pool": onOff.default("on"),
    policy: z.union([z.literal(true), z.enum(["true", "false"])]).optional(),
    selectors: z.enum(["cluster", "narrow", "mismatch"]).default("cluster"),
    manifest: z.enum(["none", "init-container", "pod-sysctls"]).default("none"),
  })
  .strict()
  .transform((o) => ({
    ipForward: o["ip-forward"] === "1",
    masqueradePool: o["masquerade-pool"] === "on",
    policy: o.policy === true || o.policy === "true",
    selectors: o.selectors,
    manifest: o.manifest as IpsecManifestFix,
  }));
export type IpsecLabOptions = z.output<typeof IpsecOptions>;

/** Why the IPsec lab cannot run here (strongSwan's starter or kernel-libipsec missing), or undefined. */
export function strongswanUnavailableReason(): string | undefined {
  try {
    execFileSync("ipsec", ["--version"], { stdio: "pipe" });
  } catch {
    return "needs strongSwan (apt-get install strongswan-starter strongswan-charon strongswan-swanctl libcharon-extra-plugins)";
  }
  try {
    execFileSync("sh", ["-c", "ls /usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so"], {
      stdio: "pipe",
    });
  } catch {
    return "needs strongSwan's kernel-libipsec plugin (apt-get install libcharon-extra-plugins)";
  }
  return undefined;
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

/** The VPN pod's ipsec.conf (as mounted at /etc/ipsec.conf). */
export function gatewayConfig(o: IpsecLabOptions): string {
  const leftsubnet = o.selectors === "narrow" ? IPSEC.narrowSelectors : IPSEC.clusterSelectors;
  return [
    "# strongSwan gateway of the podpath IPsec lab (as in the pod: /etc/ipsec.conf)",
    "config setup",
    "    uniqueids=no",
    "",
    "conn %default",
    "    keyexchange=ikev2",
    "    authby=secret",
    "",
    "conn rw",
    "    left=%any",
    "    leftid=@vpn.podpath.lab",
    `    leftsubnet=${leftsubnet}`,
    ...(o.masqueradePool ? ["    leftupdown=/etc/ipsec.d/updown-masq.sh"] : []),
    "    right=%any",
    "    rightid=@laptop",
    `    rightsourceip=${IPSEC.pool}`,
    "    auto=add",
    "",
  ].join("\n");
}

function clientConfig(o: IpsecLabOptions): string {
  const rightsubnet = o.selectors === "mismatch" ? IPSEC.foreignSelectors : IPSEC.clusterSelectors;
  return [
    "config setup",
    "conn home",
    "    keyexchange=ikev2",
    "    authby=secret",
    "    left=%defaultroute",
    "    leftid=@laptop",
    "    leftsourceip=%config",
    `    right=${IPSEC.lbIp}`,
    "    rightid=@vpn.podpath.lab",
    `    rightsubnet=${rightsubnet}`,
    "    auto=start",
    "",
  ].join("\n");
}

/** The gateway's updown script: masquerade the client pool as the pod's own address. */
const UPDOWN = `#!/bin/sh
# leftupdown of the VPN pod: when a client's CHILD SA comes up, masquerade the client pool
rule="POSTROUTING -s ${IPSEC.pool} -o eth0 -j MASQUERADE"
case "$PLUTO_VERB" in
  up-client) iptables -t nat -C $rule 2>/dev/null || iptables -t nat -A $rule ;;
esac
exit 0
`;

/**
 * strongswan.conf: charon with kernel-libipsec (ESP in userspace over a TUN device) and a log
 * file; everything else as Debian ships it.
 */
function strongswanConf(log: string): string {
  return [
    "charon {",
    "  filelog {",
    "    lab {",
    `      path = ${log}`,
    "      default = 1",
    "    }",
    "  }",
    "  load_modular = yes",
    "  plugins {",
    "    include strongswan.d/charon/*.conf",
    "    kernel-libipsec {",
    "      load = yes",
    "    }",
    "  }",
    "}",
    "include strongswan.d/*.conf",
    "",
  ].join("\n");
}

/** Writes /etc/netns/<ns>/…, which `ip netns exec` binds over /etc (removed by the lab). */
function writeEtc(ns: Namespace, files: Record<string, string>): void {
  const root = `/etc/netns/${ns.name}`;
  for (const [rel, text] of Object.entries(files)) {
    const path = join(root, rel);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, text, { mode: rel.endsWith(".sh") ? 0o755 : 0o600 });
  }
}

/** Starts `ipsec start --nofork` in a private mount namespace with its own /run. */
function startCharon(ns: Namespace) {
  return ns.spawn([
    "unshare",
    "-m",
    "--propagation",
    "private",
    "sh",
    "-c",
    "mount -t tmpfs tmpfs /run && exec ipsec start --nofork",
  ]);
}

/** Runs a command in charon's mount namespace (its /run holds the stroke and vici sockets). */
function inCharon(ns: Namespace, pid: number | undefined, argv: readonly string[]) {
  return ns.exec(["nsenter", "-t", String(pid), "-m", ...argv], { timeoutMs: 15_000 });
}

/** Polls until `check` holds; rejects with `why()` after `ms`. Condition-based, never a fixed sleep. */
async function until(check: () => Promise<boolean>, ms: number, why: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(why());
    await new Promise((r) => setTimeout(r, delay));
  }
}

function dnsResponderArgv(): string[] {
  const here = import.meta.url;
  const isTs = here.endsWith(".ts");
  const file = fileURLToPath(new URL(isTs ? "../dns-responder.ts" : "../dns-responder.js", here));
  return [process.execPath, ...(isTs ? ["--import", "tsx"] : []), file];
}

function waitForLine(child: import("node:child_process").ChildProcess, re: RegExp, ms: number) {
  return new Promise<void>((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${re}`)), ms);
    child.stdout?.on("data", (b: Buffer) => {
      seen += b.toString();
      if (re.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before ${re}`));
    });
  });
}

function strongswanVersion(): string {
  try {
    const out = execFileSync("ipsec", ["--version"], { stdio: "pipe" }).toString();
    return /strongSwan U?(\S+)/.exec(out)?.[0]?.replace(" U", " ") ?? "strongSwan";
  } catch {
    return "strongSwan";
  }
}

export const scenario: Scenario<IpsecLabOptions> = {
  name: "ipsec",
  description:
    "strongSwan (IKEv2, PSK, rightsourceip pool) in a pod namespace and a client laptop: --ip-forward 0|1 --masquerade-pool on|off --policy --selectors cluster|narrow|mismatch --manifest none|init-container|pod-sysctls",
  options: IpsecOptions,
  async run(ctx: ScenarioContext, o: IpsecLabOptions): Promise<ScenarioOutcome> {
    const missing = strongswanUnavailableReason();
    if (missing) throw new Error(`podpath lab ipsec ${missing}`);
    const { lab, log } = ctx;
    const laptop = await lab.addNamespace("laptop");
    const node = await lab.addNamespace("node");
    const vpn = await lab.addNamespace("vpn");
    const web = await lab.addNamespace("web");
    const dns = await lab.addNamespace("dns");
    await lab.link(node, "lan0", laptop, "eth0");
    await lab.link(node, "vpnveth", vpn, "eth0");
    await lab.link(node, "webveth", web, "eth0");
    await lab.link(node, "dnsveth", dns, "eth0");
    for (const ns of [laptop, node, vpn, web, dns]) await sh(ns, ["ip", "link", "set", "lo", "up"]);
    await up(node, "lan0", "192.0.2.1/24");
    await up(laptop, "eth0", "192.0.2.10/24");
    await up(node, "vpnveth", "10.244.1.1/24");
    await up(vpn, "eth0", `${IPSEC.vpnPodIp}/24`);
    await up(node, "webveth", "10.244.2.1/24");
    await up(web, "eth0", `${IPSEC.targetPodIp}/24`);
    await up(node, "dnsveth", "10.244.3.1/24");
    await up(dns, "eth0", `${IPSEC.dnsPodIp}/24`);
    await sh(laptop, ["ip", "route", "add", `${IPSEC.lbIp}/32`, "via", "192.0.2.1"]);
    for (const [ns, gw] of [
      [vpn, "10.244.1.1"],
      [web, "10.244.2.1"],
      [dns, "10.244.3.1"],
    ] as const) {
      await sh(ns, ["ip", "route", "add", "default", "via", gw]);
    }
    await sh(node, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    // The node: a LoadBalancer for IKE (500, 4500) in front of the VPN pod; kube-proxy's DNAT.
    const rules = [
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      ":KUBE-SERVICES - [0:0]",
      "-A PREROUTING -j KUBE-SERVICES",
      `-A KUBE-SERVICES -d ${IPSEC.lbIp}/32 -p udp -m udp --dport 500 -j DNAT --to-destination ${IPSEC.vpnPodIp}:500`,
      `-A KUBE-SERVICES -d ${IPSEC.lbIp}/32 -p udp -m udp --dport 4500 -j DNAT --to-destination ${IPSEC.vpnPodIp}:4500`,
      `-A KUBE-SERVICES -d ${IPSEC.webServiceIp}/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination ${IPSEC.targetPodIp}:8080`,
      `-A KUBE-SERVICES -d ${IPSEC.dnsServiceIp}/32 -p udp -m udp --dport 53 -j DNAT --to-destination ${IPSEC.dnsPodIp}:53`,
      "COMMIT",
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ...(o.policy
        ? [
            // NetworkPolicy demo/allow-vpn-clients as a CNI enforces it: only the client pool.
            `-A FORWARD -d ${IPSEC.targetPodIp}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
            `-A FORWARD -s ${IPSEC.pool} -d ${IPSEC.targetPodIp}/32 -j ACCEPT`,
            `-A FORWARD -d ${IPSEC.targetPodIp}/32 -j DROP`,
          ]
        : []),
      "COMMIT",
      "",
    ];
    await sh(node, ["iptables-restore"], rules.join("\n"));
    await sh(vpn, ["sysctl", "-qw", `net.ipv4.ip_forward=${o.ipForward ? 1 : 0}`]);

    const dir = mkdtempSync(join(tmpdir(), `podpath-${lab.id}-ipsec-`));
    try {
      const gatewayConf = gatewayConfig(o);
      writeEtc(vpn, {
        "ipsec.conf": gatewayConf,
        "ipsec.secrets": '@vpn.podpath.lab @laptop : PSK "podpath-lab-psk"\n',
        "strongswan.conf": strongswanConf(join(dir, "charon-vpn.log")),
        ...(o.masqueradePool ? { "ipsec.d/updown-masq.sh": UPDOWN } : {}),
      });
      writeEtc(laptop, {
        "ipsec.conf": clientConfig(o),
        "ipsec.secrets": '@laptop @vpn.podpath.lab : PSK "podpath-lab-psk"\n',
        "strongswan.conf": strongswanConf(join(dir, "charon-laptop.log")),
      });
      web.spawn([
        "node",
        "-e",
        `require("http").createServer((q,r)=>r.end("web-0 ok\\n")).listen(8080,"${IPSEC.targetPodIp}")`,
      ]);
      const responder = dns.spawn([
        ...dnsResponderArgv(),
        IPSEC.dnsPodIp,
        "53",
        "ok",
        `${IPSEC.webName}=${IPSEC.webServiceIp}`,
      ]);
      await waitForLine(responder, /ready/, 15_000);

      log("ipsec lab: starting charon in the vpn pod and on the laptop");
      const gw = startCharon(vpn);
      const logTail = (who: string) => () => {
        let text = "";
        try {
          text = readFileSync(join(dir, `charon-${who}.log`), "utf8");
        } catch {
          text = "(no log)";
        }
        return `ipsec lab: no tunnel within 30 s; charon (${who}) log ends:\n${text.slice(-1500)}`;
      };
      const status = async (ns: Namespace, pid: number | undefined) =>
        (await inCharon(ns, pid, ["ipsec", "statusall"])).stdout;
      // The gateway answers once its stroke socket accepts the conn (starter loaded ipsec.conf).
      await until(async () => /rw:\s+%any/.test(await status(vpn, gw.pid)), 30_000, logTail("vpn"));
      const client = startCharon(laptop);
      const want = o.selectors === "mismatch" ? /ESTABLISHED/ : /INSTALLED/;
      await until(
        async () => want.test(await status(laptop, client.pid)),
        30_000,
        logTail("laptop"),
      );
      // leftupdown runs when a CHILD SA comes up (none does with mismatched selectors)
      if (o.masqueradePool && o.selectors !== "mismatch") {
        await until(
          async () => /MASQUERADE/.test(await sh(vpn, ["iptables", "-t", "nat", "-S"])),
          15_000,
          logTail("vpn"),
        );
      }
      log("ipsec lab: IKE SA up; probing from the laptop");

      const summary: string[] = [
        `ip_forward=${o.ipForward ? 1 : 0} in the vpn pod, masquerade ${o.masqueradePool ? "on (leftupdown)" : "off"}, policy ${o.policy ? "on" : "off"}, selectors ${o.selectors}, manifest ${o.manifest}`,
      ];
      const steps = [
        {
          shown: `ping -c 2 -W 1 ${IPSEC.vpnPodIp}`,
          argv: ["ping", "-c", "2", "-W", "1", IPSEC.vpnPodIp],
        },
        {
          shown: `ping -c 2 -W 1 ${IPSEC.targetPodIp}`,
          argv: ["ping", "-c", "2", "-W", "1", IPSEC.targetPodIp],
        },
        {
          shown: `curl -sS -m 3 -o /dev/null -w "%{http_code}\\n" http://${IPSEC.webServiceIp}/`,
          argv: [
            "curl",
            "-sS",
            "-m",
            "3",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}\n",
            `http://${IPSEC.webServiceIp}/`,
          ],
        },
        {
          shown: `dig @${IPSEC.dnsServiceIp} ${IPSEC.webName} +time=2 +tries=1`,
          argv: ["dig", `@${IPSEC.dnsServiceIp}`, IPSEC.webName, "+time=2", "+tries=1"],
        },
      ];
      const { transcript, results } = await runProbes(laptop, steps);
      for (const r of results) summary.push(`$ ${r.shown} → exit ${r.code}`);
      const files: string[] = [];
      const out = ctx.outDir;
      if (out) {
        const header = `# client: laptop vpn-address: ${IPSEC.clientVip}`;
        files.push(writeSnapshotFile(out, "probes/laptop.txt", `${header}\n${transcript}`));
        const podDir = `pods/${IPSEC_NS}/${IPSEC_POD}`;
        files.push(
          ...(await collectKernelState(vpn, out, podDir, [
            "sysctl",
            "iptables-save",
            "ip-addr",
            "ip-route",
          ])),
        );
        files.push(writeSnapshotFile(out, `${podDir}/ipsec.conf`, gatewayConf));
        const statusall = await inCharon(vpn, gw.pid, ["ipsec", "statusall"]);
        files.push(writeSnapshotFile(out, `${podDir}/ipsec-statusall.txt`, statusall.stdout));
        const listSas = await inCharon(vpn, gw.pid, ["swanctl", "--list-sas"]);
        files.push(writeSnapshotFile(out, `${podDir}/swanctl-list-sas.txt`, listSas.stdout));
        for (const what of ["policy", "state"] as const) {
          const x = await sh(vpn, ["ip", "xfrm", what]);
          files.push(writeSnapshotFile(out, `${podDir}/xfrm-${what}.txt`, x));
        }
        files.push(
          ...(await collectKernelState(node, out, "nodes/lab-node-1", [
            "iptables-save",
            "ip-route",
            "sysctl",
          ])),
        );
        const cluster = ipsecClusterFiles({
          pool: IPSEC.pool,
          vpnPodIp: IPSEC.vpnPodIp,
          targetPodIp: IPSEC.targetPodIp,
          dnsPodIp: IPSEC.dnsPodIp,
          webServiceIp: IPSEC.webServiceIp,
          dnsServiceIp: IPSEC.dnsServiceIp,
          podCidr: IPSEC.podCidr,
          manifest: o.manifest,
          policy: o.policy,
        });
        for (const [rel, text] of Object.entries(cluster))
          files.push(writeSnapshotFile(out, rel, text));
        files.push(
          writeSnapshotFile(
            out,
            "README.md",
            `# IPsec lab snapshot\n\nMade by \`podpath lab run ipsec --ip-forward ${o.ipForward ? 1 : 0} --masquerade-pool ${o.masqueradePool ? "on" : "off"}${o.policy ? " --policy" : ""} --selectors ${o.selectors} --manifest ${o.manifest}\`: real ${strongswanVersion()} charon (ESP through kernel-libipsec) in network namespaces; probes, statusall, list-sas, xfrm, sysctl, iptables-save and routes are real outputs.\n`,
          ),
        );
      }
      return { files, summary };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
