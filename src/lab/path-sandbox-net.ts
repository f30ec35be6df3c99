/**
 * @module lab/path-sandbox-net — the whole-path sandbox's network, in IPv4 or IPv6: a `pod`
 * namespace (the pods' addresses and the sentinel's behind pod0), the `node` (forwarding, and the
 * kernel-only rules that route the sentinels and the pods' replies by the main table) and two far
 * hosts behind eth0 and eth1 that drop what they receive; every neighbour known up front (IPv6:
 * addresses without duplicate address detection), so no packet waits for ARP or neighbour
 * discovery. It starts the capture points and the senders, and loads a case's rules, `ip rule`
 * entries and routes into the node. An explicit I/O module.
 */
import { type Sender, startSender } from "./nat-sandbox.ts";
import { createLab, type Lab, mustExec as must, type Namespace } from "./netns.ts";
import { startPathCapture } from "./path-capture.ts";
import { PATH_NET, type PathCase, type PathFlow } from "./path-gen.ts";
import { PATH_NET6, toIpv6 } from "./path-gen6.ts";
import { withObservers } from "./path-observers.ts";
import type { PathCaptures } from "./path-verdict.ts";

/** The sandbox's addresses in one family. */
export type PathNet = typeof PATH_NET | typeof PATH_NET6;

export interface SandboxNet {
  readonly family: 4 | 6;
  readonly net: PathNet;
  /** The sentinels' source, an address of the pod namespace. */
  readonly sentinel: string;
  readonly lab: Lab;
  readonly pod: Namespace;
  readonly node: Namespace;
  readonly far: Record<"far0" | "far1", Namespace>;
  readonly caps: PathCaptures;
  readonly senders: Record<"pod" | "node" | "far0" | "far1", Sender>;
}

/** Per family: the addresses, prefix length, `ip` and iptables words, capture filters. */
const FAMILY = {
  4: {
    prefix: "pppath",
    net: PATH_NET,
    sentinel: "10.244.0.99",
    podNet: "10.244.0.0/24",
    len: 24,
    ip: ["ip"],
    nodad: "",
    iptables: "iptables",
    ipFilter: "ip",
    icmp: "icmp",
  },
  6: {
    prefix: "pppat6",
    net: PATH_NET6,
    sentinel: toIpv6("10.244.0.99"),
    // a /24 of the IPv4 sandbox is a /120 here
    podNet: `${toIpv6("10.244.0.0")}/120`,
    len: 120,
    ip: ["ip", "-6"],
    nodad: " nodad",
    iptables: "ip6tables",
    ipFilter: "ip6",
    icmp: "icmp6",
  },
} as const;

/** `ip -batch` (IPv6: `ip -6 -batch`) in a namespace. */
export function sandboxIpBatch(
  family: 4 | 6,
  ns: Namespace,
  lines: readonly string[],
): Promise<string> {
  return lines.length === 0
    ? Promise.resolve("")
    : must(ns, [...FAMILY[family].ip, "-force", "-batch", "-"], `${lines.join("\n")}\n`);
}

const sysctl = (ns: Namespace, ...kv: string[]) => must(ns, ["sysctl", "-q", "-w", ...kv]);

async function macOf(ns: Namespace, iface: string): Promise<string> {
  return (await must(ns, ["cat", `/sys/class/net/${iface}/address`])).trim();
}

/** The node's sysctls: forwarding, every ICMP(v6) error sent however many a run asks for. */
const SYSCTLS = {
  4: [
    "net.ipv4.ip_forward=1",
    "net.ipv4.icmp_ratelimit=0",
    "net.ipv4.icmp_msgs_per_sec=100000",
    "net.ipv4.icmp_msgs_burst=100000",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
    `net.ipv4.conf.${PATH_NET.podIface}.rp_filter=0`,
    "net.ipv4.conf.eth0.rp_filter=0",
    "net.ipv4.conf.eth1.rp_filter=0",
  ],
  6: [
    "net.ipv6.conf.all.forwarding=1",
    "net.ipv6.icmp.ratelimit=0",
    "net.ipv4.icmp_msgs_per_sec=100000",
    "net.ipv4.icmp_msgs_burst=100000",
  ],
} as const;

export async function createSandboxNet(family: 4 | 6): Promise<SandboxNet> {
  const fam = FAMILY[family];
  const { net, sentinel, len, nodad } = fam;
  const batch = (ns: Namespace, lines: readonly string[]) => sandboxIpBatch(family, ns, lines);
  const lab = await createLab({ prefix: fam.prefix });
  try {
    const pod = await lab.addNamespace("pod");
    const node = await lab.addNamespace("node");
    const far0 = await lab.addNamespace("far0");
    const far1 = await lab.addNamespace("far1");
    if (family === 6) {
      for (const ns of [pod, node, far0, far1]) {
        // before the links exist: their link-local addresses skip detection too
        await sysctl(ns, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0");
      }
    }
    const { eth0, eth1 } = net;
    await lab.link(pod, "eth0", node, net.podIface);
    await lab.link(node, eth0.iface, far0, "eth0");
    await lab.link(node, eth1.iface, far1, "eth0");
    await batch(pod, [
      "link set lo up",
      "link set eth0 up",
      ...[...net.pods, sentinel].map((a) => `addr add ${a}/${len} dev eth0${nodad}`),
      `route add default via ${net.podGateway} dev eth0`,
    ]);
    await batch(node, [
      "link set lo up",
      `addr add ${net.podGateway}/${len} dev ${net.podIface}${nodad}`,
      `link set ${net.podIface} up`,
      `addr add ${eth0.node}/${len} dev ${eth0.iface}${nodad}`,
      `link set ${eth0.iface} up`,
      `addr add ${eth1.node}/${len} dev ${eth1.iface}${nodad}`,
      `link set ${eth1.iface} up`,
      `route add default via ${eth0.gateway} dev ${eth0.iface}`,
    ]);
    for (const [far, link] of [
      [far0, eth0],
      [far1, eth1],
    ] as const) {
      if (family === 4) {
        await batch(far, [
          "link set lo up",
          "link set eth0 up",
          `addr add ${link.gateway}/${len} dev eth0`,
          // the answers that make a connection established go back through the node
          `route add default via ${link.node} dev eth0`,
        ]);
      } else {
        await batch(far, ["link set eth0 up", `addr add ${link.gateway}/${len} dev eth0${nodad}`]);
      }
      // silent: no answer may come back and be mistaken for the node's
      await must(far, [fam.iptables, "-w", "-A", "INPUT", "-j", "DROP"]);
      if (family === 4) {
        await batch(far, [
          `neigh replace ${link.node} lladdr ${await macOf(node, link.iface)} dev eth0 nud permanent`,
        ]);
      } else {
        await must(far, [fam.iptables, "-w", "-A", "OUTPUT", "-j", "DROP"]);
      }
    }
    // every neighbour known up front: no packet waits for ARP or neighbour discovery
    const podMac = await macOf(pod, "eth0");
    await batch(node, [
      ...[...net.pods, sentinel].map(
        (a) => `neigh replace ${a} lladdr ${podMac} dev ${net.podIface} nud permanent`,
      ),
      `neigh replace ${eth0.gateway} lladdr ${await macOf(far0, "eth0")} dev ${eth0.iface} nud permanent`,
      `neigh replace ${eth1.gateway} lladdr ${await macOf(far1, "eth0")} dev ${eth1.iface} nud permanent`,
    ]);
    await batch(pod, [
      `neigh replace ${net.podGateway} lladdr ${await macOf(node, net.podIface)} dev eth0 nud permanent`,
    ]);
    await sysctl(node, ...SYSCTLS[family]);
    // the kernel's own: sentinels by the main table, replies to the pods too
    await batch(node, [
      `rule add priority 1 from ${sentinel} lookup main`,
      `rule add priority 2 to ${fam.podNet} lookup main`,
      `route add default via ${eth1.gateway} dev ${eth1.iface} table 100`,
    ]);
    const caps = {
      far0: await startPathCapture(far0, family, ["-i", "eth0", "-Q", "in", fam.ipFilter]),
      far1: await startPathCapture(far1, family, ["-i", "eth0", "-Q", "in", fam.ipFilter]),
      pod: await startPathCapture(pod, family, ["-i", "eth0", "-Q", "in", `${fam.icmp} or tcp`]),
      lo: await startPathCapture(node, family, ["-i", "lo", `${fam.icmp} or tcp or udp port 9`]),
    };
    const senders = {
      pod: startSender(pod),
      node: startSender(node),
      far0: startSender(far0),
      far1: startSender(far1),
    };
    return { family, net, sentinel, lab, pod, node, far: { far0, far1 }, caps, senders };
  } catch (e) {
    await lab.destroy();
    throw e;
  }
}

/**
 * Loads a case into the node: its rules (with the observers, counting deliveries of `flows`),
 * then its routes (the kernel checks a gateway through the rules: a rule may refuse it) and its
 * `ip rule` entries; `undo` gets the lines that take the routes and rules away again. The
 * kernel's refusal, or undefined.
 */
export async function loadCase(
  sb: SandboxNet,
  c: PathCase,
  flows: readonly PathFlow[],
  undo: string[],
): Promise<string | undefined> {
  const restore = `${FAMILY[sb.family].iptables}-restore`;
  const ip = FAMILY[sb.family].ip;
  const r = await sb.node.exec([restore, "-w"], {
    input: withObservers(c.restore, flows, sb.family),
  });
  if (r.code !== 0) return r.stderr.trim() || `${restore} exited ${r.code}`;
  for (const route of c.routes) {
    const res = await sb.node.exec([...ip, "route", "add", ...route.split(" ")]);
    if (res.code !== 0) return `${ip.join(" ")} route add ${route}: ${res.stderr.trim()}`;
    undo.push(`route del ${route}`);
  }
  for (const rule of c.ipRules) {
    const res = await sb.node.exec([...ip, "rule", "add", ...rule.split(" ")]);
    if (res.code !== 0) return `${ip.join(" ")} rule add ${rule}: ${res.stderr.trim()}`;
    undo.push(`rule del ${rule}`);
  }
  return undefined;
}
