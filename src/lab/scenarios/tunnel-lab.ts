/**
 * @module lab/scenarios/tunnel-lab — what every VPN-pod lab (OpenVPN, WireGuard, IPsec) builds the
 * same way: the namespaces and addresses, the node's LoadBalancer and Service DNAT and the
 * client-pool NetworkPolicy as a FORWARD filter, the web and DNS pods, the probes from the laptop
 * and the snapshot's common files. Each kind supplies how its tunnel comes up, its UDP ports, its
 * pod's own files (configs, status outputs), its cluster objects and its words.
 *
 *   laptop (eth0 192.0.2.10) ─ node (lan0 192.0.2.1 · vpnveth 10.244.1.1 · webveth 10.244.2.1 ·
 *   [dnsveth 10.244.3.1] · [pubveth 198.51.100.1]) ─ vpn pod (eth0 10.244.1.10) ·
 *   web pod (10.244.2.20:8080) · [dns pod (10.244.3.53:53)] · [public host (198.51.100.7)]
 */
import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import {
  collectKernelState,
  type ProbeStep,
  runProbes,
  startCapture,
  writeSnapshotFile,
} from "../artifacts.ts";
import { type Lab, mustExec, type Namespace } from "../netns.ts";
import type { ScenarioContext, ScenarioOutcome } from "./index.ts";

/** The addresses every tunnel lab gives its pods, Services and hosts. */
export const TUNNEL_LAB = {
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

/** The options every tunnel kind takes: the vpn pod's forwarding, the pool's masquerade, the policy. */
export const TUNNEL_OPTION_FIELDS = {
  "ip-forward": z.enum(["0", "1"]).default("0"),
  "masquerade-pool": z.enum(["on", "off"]).default("on"),
  policy: z.union([z.literal(true), z.enum(["true", "false"])]).optional(),
};

/** The typed values of TUNNEL_OPTION_FIELDS (a bare `--policy` arrives as `true`). */
export function tunnelOptionValues(o: {
  readonly "ip-forward": "0" | "1";
  readonly "masquerade-pool": "on" | "off";
  readonly policy?: true | "true" | "false" | undefined;
}): { ipForward: boolean; masqueradePool: boolean; policy: boolean } {
  return {
    ipForward: o["ip-forward"] === "1",
    masqueradePool: o["masquerade-pool"] === "on",
    policy: o.policy === true || o.policy === "true",
  };
}

/** What a kind chooses of the shared replica. */
export interface TunnelLabShape {
  /** The client pool: the NetworkPolicy (with `policy`) admits only it to the web pod. */
  readonly pool: string;
  /** UDP ports the node's LoadBalancer forwards to the vpn pod (OpenVPN 1194, IKE 500 and 4500). */
  readonly lbUdpPorts: readonly number[];
  /** A DNS pod behind the kube-dns Service VIP. */
  readonly dnsPod: boolean;
  /** A public host the node reaches by masquerading the pod range. */
  readonly publicHost: boolean;
  /** The node's FORWARD filter enforcing the client-pool NetworkPolicy. */
  readonly policy: boolean;
  /** net.ipv4.ip_forward in the vpn pod's namespace. */
  readonly ipForward: boolean;
}

export interface TunnelLabNamespaces {
  readonly laptop: Namespace;
  readonly node: Namespace;
  readonly vpn: Namespace;
  readonly web: Namespace;
  readonly dns: Namespace | undefined;
  readonly pub: Namespace | undefined;
}

/** Gives `iface` in `ns` the address `cidr` and brings it up. */
export async function addressUp(ns: Namespace, iface: string, cidr: string): Promise<void> {
  await mustExec(ns, ["ip", "addr", "add", cidr, "dev", iface]);
  await mustExec(ns, ["ip", "link", "set", iface, "up"]);
}

/** The node's iptables-restore input: kube-proxy-like DNAT, and the policy as a FORWARD filter. */
function nodeRules(s: TunnelLabShape): string {
  const L = TUNNEL_LAB;
  const nat = [
    "*nat",
    ":PREROUTING ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ":POSTROUTING ACCEPT [0:0]",
    ":KUBE-SERVICES - [0:0]",
    "-A PREROUTING -j KUBE-SERVICES",
    // a LoadBalancer in front of the VPN pod
    ...s.lbUdpPorts.map(
      (p) =>
        `-A KUBE-SERVICES -d ${L.lbIp}/32 -p udp -m udp --dport ${p} -j DNAT --to-destination ${L.vpnPodIp}:${p}`,
    ),
    `-A KUBE-SERVICES -d ${L.webServiceIp}/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination ${L.targetPodIp}:8080`,
    ...(s.dnsPod
      ? [
          `-A KUBE-SERVICES -d ${L.dnsServiceIp}/32 -p udp -m udp --dport 53 -j DNAT --to-destination ${L.dnsPodIp}:53`,
        ]
      : []),
    // egress to the public host leaves as the node (pods are private addresses)
    ...(s.publicHost ? [`-A POSTROUTING -s ${L.podCidr} -o pubveth -j MASQUERADE`] : []),
    "COMMIT",
  ];
  const filter = [
    "*filter",
    ":INPUT ACCEPT [0:0]",
    ":FORWARD ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ...(s.policy
      ? [
          // NetworkPolicy demo/allow-vpn-clients as a CNI enforces it: only the pool reaches web-0
          `-A FORWARD -d ${L.targetPodIp}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
          `-A FORWARD -s ${s.pool} -d ${L.targetPodIp}/32 -j ACCEPT`,
          `-A FORWARD -d ${L.targetPodIp}/32 -j DROP`,
        ]
      : []),
    "COMMIT",
    "",
  ];
  return [...nat, ...filter].join("\n");
}

/**
 * Builds the shared replica in `lab`: namespaces, veth links, addresses and routes, the node's
 * forwarding and rules, and the vpn pod's forwarding as the variant says. The tunnel is the
 * kind's to bring up.
 */
export async function buildTunnelLab(lab: Lab, s: TunnelLabShape): Promise<TunnelLabNamespaces> {
  const L = TUNNEL_LAB;
  const laptop = await lab.addNamespace("laptop");
  const node = await lab.addNamespace("node");
  const vpn = await lab.addNamespace("vpn");
  const web = await lab.addNamespace("web");
  const dns = s.dnsPod ? await lab.addNamespace("dns") : undefined;
  const pub = s.publicHost ? await lab.addNamespace("pub") : undefined;
  // [node's interface, the pod's namespace, the node's address, the pod's address]
  const pods: [string, Namespace, string, string][] = [
    ["vpnveth", vpn, "10.244.1.1", L.vpnPodIp],
    ["webveth", web, "10.244.2.1", L.targetPodIp],
  ];
  if (dns) pods.push(["dnsveth", dns, "10.244.3.1", L.dnsPodIp]);
  if (pub) pods.push(["pubveth", pub, "198.51.100.1", L.publicIp]);
  await lab.link(node, "lan0", laptop, "eth0");
  for (const [iface, ns] of pods) await lab.link(node, iface, ns, "eth0");
  for (const ns of [laptop, node, ...pods.map((p) => p[1])])
    await mustExec(ns, ["ip", "link", "set", "lo", "up"]);
  await addressUp(node, "lan0", "192.0.2.1/24");
  await addressUp(laptop, "eth0", "192.0.2.10/24");
  for (const [iface, ns, gw, ip] of pods) {
    await addressUp(node, iface, `${gw}/24`);
    await addressUp(ns, "eth0", `${ip}/24`);
  }
  await mustExec(laptop, ["ip", "route", "add", `${L.lbIp}/32`, "via", "192.0.2.1"]);
  for (const [, ns, gw] of pods) await mustExec(ns, ["ip", "route", "add", "default", "via", gw]);
  await mustExec(node, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
  await mustExec(node, ["iptables-restore"], nodeRules(s));
  await mustExec(vpn, ["sysctl", "-qw", `net.ipv4.ip_forward=${s.ipForward ? 1 : 0}`]);
  return { laptop, node, vpn, web, dns, pub };
}

/** Resolves when `pattern` appears on the child's stdout or stderr; rejects after `ms`. */
export function waitForOutput(child: ChildProcess, pattern: RegExp, ms: number): Promise<void> {
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

/** Polls until `check` holds; rejects with `why()` after `ms`. Condition-based, never a fixed sleep. */
export async function until(
  check: () => Promise<boolean>,
  ms: number,
  why: () => string,
): Promise<void> {
  const deadline = Date.now() + ms;
  for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(why());
    await new Promise((r) => setTimeout(r, delay));
  }
}

/** Starts web-0's HTTP server (port 8080) and waits until it listens. */
export async function startWebPod(web: Namespace): Promise<void> {
  const ip = TUNNEL_LAB.targetPodIp;
  web.spawn([
    "node",
    "-e",
    `require("http").createServer((q,r)=>r.end("web-0 ok\\n")).listen(8080,"${ip}")`,
  ]);
  await until(
    async () => (await web.exec(["ss", "-ltn"])).stdout.includes(`${ip}:8080`),
    15_000,
    () => "timed out waiting for the web pod's server",
  );
}

function dnsResponderArgv(): string[] {
  const here = import.meta.url;
  const isTs = here.endsWith(".ts");
  const file = fileURLToPath(new URL(isTs ? "../dns-responder.ts" : "../dns-responder.js", here));
  return [process.execPath, ...(isTs ? ["--import", "tsx"] : []), file];
}

/** Starts the DNS pod's responder (lab/dns-responder.ts) with `name=address` records. */
export async function startDnsPod(dns: Namespace, records: readonly string[]): Promise<void> {
  const responder = dns.spawn([...dnsResponderArgv(), TUNNEL_LAB.dnsPodIp, "53", "ok", ...records]);
  await waitForOutput(responder, /ready/, 15_000);
}

function ping(ip: string): ProbeStep {
  return { shown: `ping -c 2 -W 1 ${ip}`, argv: ["ping", "-c", "2", "-W", "1", ip] };
}

/**
 * The laptop's probes, from the client outward: the tunnel's far end, the target pod, its
 * Service VIP, then (as the kind has them) the public host, the DNS Service and the routes.
 */
export function tunnelProbeSteps(p: {
  readonly peer: string;
  readonly publicHost: boolean;
  readonly dns: boolean;
  readonly ipRoute: boolean;
}): ProbeStep[] {
  const L = TUNNEL_LAB;
  const url = `http://${L.webServiceIp}/`;
  const steps: ProbeStep[] = [
    ping(p.peer),
    ping(L.targetPodIp),
    {
      shown: `curl -sS -m 3 -o /dev/null -w "%{http_code}\\n" ${url}`,
      argv: ["curl", "-sS", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}\n", url],
    },
  ];
  if (p.publicHost) steps.push(ping(L.publicIp));
  if (p.dns) {
    steps.push({
      shown: `dig @${L.dnsServiceIp} ${L.webName} +time=2 +tries=1`,
      argv: ["dig", `@${L.dnsServiceIp}`, L.webName, "+time=2", "+tries=1"],
    });
  }
  if (p.ipRoute) steps.push({ shown: "ip route", argv: ["ip", "route"] });
  return steps;
}

/** What a kind adds to the shared probes and snapshot. */
export interface TunnelProbePlan {
  readonly steps: readonly ProbeStep[];
  /** The summary's first line: the variant in the kind's words. */
  readonly variant: string;
  /** The laptop's address inside the tunnel, for the transcript's `# client:` header. */
  readonly clientAddress: string;
  /** A capture on the vpn pod's eth0 while the probes run (written as captures/<name>). */
  readonly capture?: { readonly name: string; readonly filter: string };
  /** `pods/<namespace>/<pod>`: the vpn pod's folder. */
  readonly podDir: string;
  /** The vpn pod's own files (name in podDir → text), read after its kernel state. */
  readonly podFiles: () => Promise<Record<string, string>>;
  /** cluster/*.yaml and the like: path → text. */
  readonly clusterFiles: () => Record<string, string>;
  /** The snapshot's README.md. */
  readonly readme: () => string;
}

/**
 * Runs the probes from the laptop and, when the context has an out folder, writes the snapshot:
 * the transcript, the capture, the vpn pod's and the node's kernel state, the pod's own files,
 * the cluster objects and the README.
 */
export async function probeTunnelLab(
  ctx: ScenarioContext,
  ns: TunnelLabNamespaces,
  plan: TunnelProbePlan,
): Promise<ScenarioOutcome> {
  const out = ctx.outDir;
  const wanted = out ? plan.capture : undefined;
  const capture =
    out && wanted
      ? await startCapture(ns.vpn, out, wanted.name, {
          iface: "eth0",
          filter: wanted.filter,
          point: plan.podDir.replace(/^pods\//, "pod/"),
          phase: "before",
        })
      : undefined;
  const { transcript, results } = await runProbes(ns.laptop, plan.steps);
  await capture?.stop();
  const summary = [plan.variant, ...results.map((r) => `$ ${r.shown} → exit ${r.code}`)];
  const files: string[] = [];
  if (!out) return { files, summary };
  const header = `# client: laptop vpn-address: ${plan.clientAddress}`;
  files.push(writeSnapshotFile(out, "probes/laptop.txt", `${header}\n${transcript}`));
  if (capture && wanted) files.push(capture.rel, `captures/${wanted.name}.yaml`);
  files.push(
    ...(await collectKernelState(ns.vpn, out, plan.podDir, [
      "sysctl",
      "iptables-save",
      "ip-addr",
      "ip-route",
    ])),
  );
  for (const [name, text] of Object.entries(await plan.podFiles()))
    files.push(writeSnapshotFile(out, `${plan.podDir}/${name}`, text));
  files.push(
    ...(await collectKernelState(ns.node, out, "nodes/lab-node-1", [
      "iptables-save",
      "ip-route",
      "sysctl",
    ])),
  );
  for (const [rel, text] of Object.entries(plan.clusterFiles()))
    files.push(writeSnapshotFile(out, rel, text));
  files.push(writeSnapshotFile(out, "README.md", plan.readme()));
  return { files, summary };
}
