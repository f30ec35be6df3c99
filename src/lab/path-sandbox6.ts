/**
 * @module lab/path-sandbox6 — asks the kernel where an IPv6 packet ends on a node: the sandbox of
 * lab/path-sandbox carried over to IPv6 (lab/path-gen6's addresses: a `pod` namespace behind
 * pod0, the `node` with the rules, `ip -6 rule` entries and routes under test, two far hosts
 * behind eth0 and eth1). Addresses are added without duplicate address detection and every
 * neighbour is known up front, so no packet waits for neighbour discovery. For each flow: delivered
 * (a counting rule in ip6tables' security table, after filter INPUT), forwarded out of which
 * interface with which source and destination, rejected with which ICMPv6 destination-unreachable
 * code or a TCP reset, or silent. A run is complete when sentinel packets sent after the flows are
 * seen at every capture point. Kernel-only rules are marked and left out of the snapshot. An
 * explicit I/O module.
 */
import { type SandboxFlow, type Sender, startSender } from "./nat-sandbox.ts";
import { createLab, type Lab, mustExec as must, type Namespace } from "./netns.ts";
import { type SandboxPacket, startCapture } from "./path-capture.ts";
import { PATH_NET, type PathCase, type PathFlow } from "./path-gen.ts";
import { toIpv6 } from "./path-gen6.ts";
import {
  ipRuleWithoutObservers,
  readDeliveries,
  withObservers,
  withoutObservers,
} from "./path-observers.ts";
import { type KernelPathVerdict, type PathCaptures, verdictOf } from "./path-verdict.ts";

/** The sandbox's fixed shape in IPv6 (each address lab/path-gen6's carry-over of IPv4's). */
export const PATH_NET6 = {
  podIface: PATH_NET.podIface,
  podGateway: toIpv6(PATH_NET.podGateway),
  pods: PATH_NET.pods.map(toIpv6),
  eth0: {
    iface: "eth0",
    node: toIpv6(PATH_NET.eth0.node),
    gateway: toIpv6(PATH_NET.eth0.gateway),
  },
  eth1: {
    iface: "eth1",
    node: toIpv6(PATH_NET.eth1.node),
    gateway: toIpv6(PATH_NET.eth1.gateway),
  },
} as const;

/** A /24 of the IPv4 sandbox is a /120 here. */
const LEN = 120;
const SENTINEL = toIpv6("10.244.0.99");
const POD_NET = `${toIpv6("10.244.0.0")}/${LEN}`;
/** The node's IPv6 state as a snapshot holds it, beside its (untouched) IPv4 state. */
export interface NodeFiles6 {
  readonly ip6tablesSave: string;
  readonly ip6Rule: string;
  readonly ip6Route: string;
  readonly ipAddr: string;
  readonly iptablesSave: string;
  readonly ipRule: string;
  readonly ipRoute: string;
}

export interface PathSandbox6 {
  readonly lab: Lab;
  /** Loads an IPv6 case (lab/path-gen6): ip6tables rules with the observers, rules, routes. */
  load(c: PathCase, flows: readonly PathFlow[]): Promise<string | undefined>;
  nodeFiles(): Promise<NodeFiles6>;
  observe(flows: readonly PathFlow[]): Promise<KernelPathVerdict[]>;
  destroy(): Promise<void>;
}

const batch6 = (ns: Namespace, lines: readonly string[]) =>
  lines.length === 0
    ? Promise.resolve("")
    : must(ns, ["ip", "-6", "-force", "-batch", "-"], `${lines.join("\n")}\n`);

const sysctl = (ns: Namespace, ...kv: string[]) => must(ns, ["sysctl", "-q", "-w", ...kv]);

async function macOf(ns: Namespace, iface: string): Promise<string> {
  return (await must(ns, ["cat", `/sys/class/net/${iface}/address`])).trim();
}

export async function createPathSandbox6(): Promise<PathSandbox6> {
  const lab = await createLab({ prefix: "pppat6" });
  try {
    const pod = await lab.addNamespace("pod");
    const node = await lab.addNamespace("node");
    const far0 = await lab.addNamespace("far0");
    const far1 = await lab.addNamespace("far1");
    for (const ns of [pod, node, far0, far1]) {
      // before the links exist: their link-local addresses skip detection too
      await sysctl(ns, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0");
    }
    const { eth0, eth1 } = PATH_NET6;
    await lab.link(pod, "eth0", node, PATH_NET6.podIface);
    await lab.link(node, eth0.iface, far0, "eth0");
    await lab.link(node, eth1.iface, far1, "eth0");
    await batch6(pod, [
      "link set lo up",
      "link set eth0 up",
      ...[...PATH_NET6.pods, SENTINEL].map((a) => `addr add ${a}/${LEN} dev eth0 nodad`),
      `route add default via ${PATH_NET6.podGateway} dev eth0`,
    ]);
    await batch6(node, [
      "link set lo up",
      `addr add ${PATH_NET6.podGateway}/${LEN} dev ${PATH_NET6.podIface} nodad`,
      `link set ${PATH_NET6.podIface} up`,
      `addr add ${eth0.node}/${LEN} dev ${eth0.iface} nodad`,
      `link set ${eth0.iface} up`,
      `addr add ${eth1.node}/${LEN} dev ${eth1.iface} nodad`,
      `link set ${eth1.iface} up`,
      `route add default via ${eth0.gateway} dev ${eth0.iface}`,
    ]);
    for (const [far, net] of [
      [far0, eth0],
      [far1, eth1],
    ] as const) {
      await batch6(far, ["link set eth0 up", `addr add ${net.gateway}/${LEN} dev eth0 nodad`]);
      // silent: no answer may come back and be mistaken for the node's
      await must(far, ["ip6tables", "-w", "-A", "INPUT", "-j", "DROP"]);
      await must(far, ["ip6tables", "-w", "-A", "OUTPUT", "-j", "DROP"]);
    }
    // every neighbour known up front: no packet waits for neighbour discovery
    const podMac = await macOf(pod, "eth0");
    await batch6(node, [
      ...[...PATH_NET6.pods, SENTINEL].map(
        (a) => `neigh replace ${a} lladdr ${podMac} dev ${PATH_NET6.podIface} nud permanent`,
      ),
      `neigh replace ${eth0.gateway} lladdr ${await macOf(far0, "eth0")} dev ${eth0.iface} nud permanent`,
      `neigh replace ${eth1.gateway} lladdr ${await macOf(far1, "eth0")} dev ${eth1.iface} nud permanent`,
    ]);
    await batch6(pod, [
      `neigh replace ${PATH_NET6.podGateway} lladdr ${await macOf(node, PATH_NET6.podIface)} dev eth0 nud permanent`,
    ]);
    await sysctl(
      node,
      "net.ipv6.conf.all.forwarding=1",
      // every ICMPv6 error sent, however many a run asks for
      "net.ipv6.icmp.ratelimit=0",
      "net.ipv4.icmp_msgs_per_sec=100000",
      "net.ipv4.icmp_msgs_burst=100000",
    );
    // the kernel's own: sentinels by the main table, replies to the pods too
    await batch6(node, [
      `rule add priority 1 from ${SENTINEL} lookup main`,
      `rule add priority 2 to ${POD_NET} lookup main`,
      `route add default via ${eth1.gateway} dev ${eth1.iface} table 100`,
    ]);
    const caps = {
      far0: await startCapture(far0, 6, ["-i", "eth0", "-Q", "in", "ip6"]),
      far1: await startCapture(far1, 6, ["-i", "eth0", "-Q", "in", "ip6"]),
      pod: await startCapture(pod, 6, ["-i", "eth0", "-Q", "in", "icmp6 or tcp"]),
      lo: await startCapture(node, 6, ["-i", "lo", "icmp6 or tcp or udp port 9"]),
    };
    const senders = { pod: startSender(pod), node: startSender(node) };
    return sandbox(lab, pod, node, caps, senders);
  } catch (e) {
    await lab.destroy();
    throw e;
  }
}

function sandbox(
  lab: Lab,
  pod: Namespace,
  node: Namespace,
  caps: PathCaptures,
  senders: { pod: Sender; node: Sender },
): PathSandbox6 {
  let undo: string[] = [];
  return {
    lab,
    async load(c, flows) {
      await batch6(node, undo);
      undo = [];
      const r = await node.exec(["ip6tables-restore", "-w"], {
        input: withObservers(c.restore, flows, 6),
      });
      if (r.code !== 0) return r.stderr.trim() || `ip6tables-restore exited ${r.code}`;
      for (const route of c.routes) {
        const res = await node.exec(["ip", "-6", "route", "add", ...route.split(" ")]);
        if (res.code !== 0) return `ip -6 route add ${route}: ${res.stderr.trim()}`;
        undo.push(`route del ${route}`);
      }
      for (const rule of c.ipRules) {
        const res = await node.exec(["ip", "-6", "rule", "add", ...rule.split(" ")]);
        if (res.code !== 0) return `ip -6 rule add ${rule}: ${res.stderr.trim()}`;
        undo.push(`rule del ${rule}`);
      }
      return undefined;
    },
    async nodeFiles() {
      const [save6, rule6, route6, addr, save, rule, route] = await Promise.all([
        must(node, ["ip6tables-save"]),
        must(node, ["ip", "-6", "rule"]),
        must(node, ["ip", "-6", "route", "show", "table", "all"]),
        must(node, ["ip", "addr"]),
        must(node, ["iptables-save"]),
        must(node, ["ip", "rule"]),
        must(node, ["ip", "route", "show", "table", "all"]),
      ]);
      return {
        ip6tablesSave: withoutObservers(save6),
        ip6Rule: ipRuleWithoutObservers(rule6),
        ip6Route: route6,
        ipAddr: addr,
        iptablesSave: save,
        ipRule: rule,
        ipRoute: route,
      };
    },
    async observe(flows) {
      await node.exec(["conntrack", "-F", "-f", "ipv6"]);
      for (const c of Object.values(caps)) c.packets.length = 0;
      const toSandbox = (f: PathFlow): SandboxFlow => ({
        proto: f.proto,
        src: f.src,
        dst: f.dst,
        ...(f.sport !== undefined ? { sport: f.sport } : {}),
        ...(f.dport !== undefined ? { dport: f.dport } : {}),
      });
      const podFlows = flows.filter((f) => f.origin === "pod");
      const hostFlows = flows.filter((f) => f.origin === "host");
      await Promise.all([
        senders.pod.send(podFlows.filter((f) => f.proto !== "icmp").map(toSandbox)),
        senders.node.send(hostFlows.filter((f) => f.proto !== "icmp").map(toSandbox)),
        ...flows
          .filter((f) => f.proto === "icmp")
          .map((f) =>
            (f.origin === "pod" ? pod : node).exec(
              ["ping", "-6", "-n", "-c", "1", "-W", "0.01", "-I", f.src, f.dst],
              { timeoutMs: 5_000 },
            ),
          ),
      ]);
      const sentinel = (dst: string): SandboxFlow => ({
        proto: "udp",
        src: SENTINEL,
        dst,
        sport: 9,
        dport: 9,
      });
      // one at a time: each binds the same source port
      for (const dst of [PATH_NET6.eth0.gateway, PATH_NET6.eth1.gateway, PATH_NET6.podGateway]) {
        await senders.pod.send([sentinel(dst)]);
      }
      await senders.node.send([{ proto: "udp", src: "::1", dst: "::1", sport: 9, dport: 9 }]);
      const isSentinel = (p: SandboxPacket) => p.proto === 17 && p.sport === 9;
      const done = () =>
        caps.far0.packets.some(isSentinel) &&
        caps.far1.packets.some(isSentinel) &&
        caps.lo.packets.some(isSentinel) &&
        caps.pod.packets.some((p) => p.inner?.src === SENTINEL && p.inner.sport === 9);
      const deadline = Date.now() + 15_000;
      while (!done()) {
        if (Date.now() > deadline) {
          const missing = Object.entries(caps)
            .filter(([, c]) => !c.packets.some((p) => isSentinel(p) || p.inner?.sport === 9))
            .map(([k]) => k);
          throw new Error(`the IPv6 sentinels never reached ${missing.join(", ")}`);
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      const hits = await readDeliveries(node, 6);
      return flows.map((f, i) => verdictOf(f, (hits[i] ?? 0) > 0, caps, 6));
    },
    destroy: () => lab.destroy(),
  };
}
