/**
 * @module lab/path-sandbox — asks the kernel where a packet ends on a node: a `pod` namespace
 * (sources 10.244.0.5/.6 behind pod0), the `node` (the rules, `ip rule` entries and routes under
 * test, forwarding) and two far hosts behind eth0 and eth1. For each flow it reports what the
 * kernel did: delivered to the node (a counting rule in the security table, which runs after
 * filter INPUT), forwarded out of which interface with which source and destination (tcpdump on
 * the far side), rejected with which ICMP type or a TCP reset (tcpdump at the sender: the pod's
 * eth0, or the node's lo for its own packets), or nothing of these (silently dropped).
 *
 * A run is complete when sentinel packets sent after the flows are seen at every capture point
 * (to each far host, and to the node, whose ICMP answer reaches the pod). Kernel-only rules let
 * the sentinels, ICMP errors and TCP resets through every chain and keep the pods' replies in the
 * main table; they are marked and left out of the snapshot podpath reads. An explicit I/O module.
 */
import { type SandboxFlow, type Sender, startSender } from "./nat-sandbox.ts";
import { createLab, type Lab, mustExec as must, type Namespace } from "./netns.ts";
import { type Capture, type SandboxPacket, startCapture } from "./path-capture.ts";
import { PATH_NET, type PathCase, type PathFlow } from "./path-gen.ts";
import {
  ipRuleWithoutObservers,
  readDeliveries,
  withObservers,
  withoutObservers,
  zeroDeliveries,
} from "./path-observers.ts";
import { type KernelPathVerdict, type PathCaptures, verdictOf } from "./path-verdict.ts";

export type { KernelPathVerdict } from "./path-verdict.ts";

/** The node's state as a snapshot holds it (real tools' output, kernel-only parts left out). */
export interface NodeFiles {
  readonly iptablesSave: string;
  readonly ipRule: string;
  readonly ipRoute: string;
  readonly ipAddr: string;
}

export interface PathSandbox {
  readonly lab: Lab;
  /**
   * Loads a case: its rules (with the observers, counting deliveries of `flows`: every flow a
   * later `observe` sends) and its `ip rule` entries and routes.
   */
  load(c: PathCase, flows: readonly PathFlow[]): Promise<string | undefined>;
  /** The node's files after `load`. */
  nodeFiles(): Promise<NodeFiles>;
  /** Sends the flows and reads what the kernel did with each. */
  observe(flows: readonly PathFlow[]): Promise<KernelPathVerdict[]>;
  destroy(): Promise<void>;
}

const SENTINEL = "10.244.0.99";
const batch = (ns: Namespace, lines: readonly string[]) =>
  lines.length === 0
    ? Promise.resolve("")
    : must(ns, ["ip", "-force", "-batch", "-"], `${lines.join("\n")}\n`);

const sysctl = (ns: Namespace, ...kv: string[]) => must(ns, ["sysctl", "-q", "-w", ...kv]);

async function macOf(ns: Namespace, iface: string): Promise<string> {
  const out = await must(ns, ["cat", `/sys/class/net/${iface}/address`]);
  return out.trim();
}

export async function createPathSandbox(): Promise<PathSandbox> {
  const lab = await createLab({ prefix: "pppath" });
  try {
    const pod = await lab.addNamespace("pod");
    const node = await lab.addNamespace("node");
    const far0 = await lab.addNamespace("far0");
    const far1 = await lab.addNamespace("far1");
    const { eth0, eth1 } = PATH_NET;
    await lab.link(pod, "eth0", node, PATH_NET.podIface);
    await lab.link(node, eth0.iface, far0, "eth0");
    await lab.link(node, eth1.iface, far1, "eth0");
    await batch(pod, [
      "link set lo up",
      "link set eth0 up",
      ...[...PATH_NET.pods, SENTINEL].map((a) => `addr add ${a}/24 dev eth0`),
      `route add default via ${PATH_NET.podGateway} dev eth0`,
    ]);
    await batch(node, [
      "link set lo up",
      `addr add ${PATH_NET.podGateway}/24 dev ${PATH_NET.podIface}`,
      `link set ${PATH_NET.podIface} up`,
      `addr add ${eth0.node}/24 dev ${eth0.iface}`,
      `link set ${eth0.iface} up`,
      `addr add ${eth1.node}/24 dev ${eth1.iface}`,
      `link set ${eth1.iface} up`,
      `route add default via ${eth0.gateway} dev ${eth0.iface}`,
    ]);
    for (const [far, net] of [
      [far0, eth0],
      [far1, eth1],
    ] as const) {
      await batch(far, [
        "link set lo up",
        "link set eth0 up",
        `addr add ${net.gateway}/24 dev eth0`,
        // the answers that make a connection established go back through the node
        `route add default via ${net.node} dev eth0`,
      ]);
      // silent: no answer may come back and be mistaken for the node's
      await must(far, ["iptables", "-w", "-A", "INPUT", "-j", "DROP"]);
      await batch(far, [
        `neigh replace ${net.node} lladdr ${await macOf(node, net.iface)} dev eth0 nud permanent`,
      ]);
    }
    // every neighbour known up front: no packet waits for ARP, none is lost to it
    const podMac = await macOf(pod, "eth0");
    await batch(node, [
      ...[...PATH_NET.pods, SENTINEL].map(
        (a) => `neigh replace ${a} lladdr ${podMac} dev ${PATH_NET.podIface} nud permanent`,
      ),
      `neigh replace ${eth0.gateway} lladdr ${await macOf(far0, "eth0")} dev ${eth0.iface} nud permanent`,
      `neigh replace ${eth1.gateway} lladdr ${await macOf(far1, "eth0")} dev ${eth1.iface} nud permanent`,
    ]);
    await batch(pod, [
      `neigh replace ${PATH_NET.podGateway} lladdr ${await macOf(node, PATH_NET.podIface)} dev eth0 nud permanent`,
    ]);
    await sysctl(
      node,
      "net.ipv4.ip_forward=1",
      // every ICMP error sent, however many a run asks for
      "net.ipv4.icmp_ratelimit=0",
      "net.ipv4.icmp_msgs_per_sec=100000",
      "net.ipv4.icmp_msgs_burst=100000",
      "net.ipv4.conf.all.rp_filter=0",
      "net.ipv4.conf.default.rp_filter=0",
      `net.ipv4.conf.${PATH_NET.podIface}.rp_filter=0`,
      "net.ipv4.conf.eth0.rp_filter=0",
      "net.ipv4.conf.eth1.rp_filter=0",
    );
    // the kernel's own: sentinels by the main table, replies to the pods too
    await batch(node, [
      `rule add priority 1 from ${SENTINEL} lookup main`,
      "rule add priority 2 to 10.244.0.0/24 lookup main",
      `route add default via ${eth1.gateway} dev ${eth1.iface} table 100`,
    ]);
    const caps = {
      far0: await startCapture(far0, 4, ["-i", "eth0", "-Q", "in", "ip"]),
      far1: await startCapture(far1, 4, ["-i", "eth0", "-Q", "in", "ip"]),
      pod: await startCapture(pod, 4, ["-i", "eth0", "-Q", "in", "icmp or tcp"]),
      lo: await startCapture(node, 4, ["-i", "lo", "icmp or tcp or udp port 9"]),
    };
    const senders = {
      pod: startSender(pod),
      node: startSender(node),
      far0: startSender(far0),
      far1: startSender(far1),
    };
    return sandbox(lab, pod, node, caps, senders, { far0, far1 });
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
  senders: Record<"pod" | "node" | "far0" | "far1", Sender>,
  far: Record<"far0" | "far1", Namespace>,
): PathSandbox {
  let undo: string[] = [];
  /** The flows `load` gave counting rules, in the security table's order. */
  let counted: readonly PathFlow[] = [];
  const clear = () => {
    for (const c of Object.values(caps)) c.packets.length = 0;
  };
  const toSandbox = (f: PathFlow): SandboxFlow => ({
    proto: f.proto,
    src: f.src,
    dst: f.dst,
    ...(f.sport !== undefined ? { sport: f.sport } : {}),
    ...(f.dport !== undefined ? { dport: f.dport } : {}),
  });
  const sendAll = async (flows: readonly PathFlow[]) => {
    const podFlows = flows.filter((f) => f.origin === "pod");
    const hostFlows = flows.filter((f) => f.origin === "host");
    await Promise.all([
      senders.pod.send(podFlows.filter((f) => f.proto !== "icmp").map(toSandbox)),
      senders.node.send(hostFlows.filter((f) => f.proto !== "icmp").map(toSandbox)),
      ...flows
        .filter((f) => f.proto === "icmp")
        .map((f) =>
          (f.origin === "pod" ? pod : node).exec(
            ["ping", "-n", "-c", "1", "-W", "0.01", "-I", f.src, f.dst],
            { timeoutMs: 5_000 },
          ),
        ),
    ]);
  };
  /** Sends the sentinels and waits until every capture point has seen its own. */
  const settle = async () => {
    const sentinel = (dst: string): SandboxFlow => ({
      proto: "udp",
      src: SENTINEL,
      dst,
      sport: 9,
      dport: 9,
    });
    // one at a time: each binds the same source port
    for (const dst of [PATH_NET.eth0.gateway, PATH_NET.eth1.gateway, PATH_NET.podGateway]) {
      await senders.pod.send([sentinel(dst)]);
    }
    await senders.node.send([
      { proto: "udp", src: "127.0.0.1", dst: "127.0.0.1", sport: 9, dport: 9 },
    ]);
    const seen = (c: Capture, test: (p: SandboxPacket) => boolean) => c.packets.some(test);
    const isSentinel = (p: SandboxPacket) => p.proto === 17 && p.sport === 9;
    const done = () =>
      seen(caps.far0, isSentinel) &&
      seen(caps.far1, isSentinel) &&
      seen(caps.lo, isSentinel) &&
      seen(caps.pod, (p) => p.inner?.src === SENTINEL && p.inner.sport === 9);
    const deadline = Date.now() + 15_000;
    while (!done()) {
      if (Date.now() > deadline) {
        const missing = Object.entries(caps)
          .filter(([, c]) => !c.packets.some((p) => isSentinel(p) || p.inner?.sport === 9))
          .map(([k]) => k);
        throw new Error(`the sentinels never reached ${missing.join(", ")}`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  /**
   * Answers each first packet from where it went (the node itself, or the far host that saw
   * it: the reply tuple conntrack lists), then waits until conntrack has seen the answers (the
   * far hosts' answers are followed by a sentinel answer of their own). Per flow, undefined when
   * conntrack holds the connection established, or why not.
   */
  const answerFirstPackets = async (later: readonly PathFlow[]) => {
    const why = new Map<PathFlow, string | undefined>();
    const listed = (await must(node, ["conntrack", "-L", "-p", "udp"])).split("\n");
    const entryOf = (f: PathFlow) =>
      listed.map(readConntrackLine).find((e) => e?.orig.src === f.src && e.orig.sport === f.sport);
    const answers: Record<"node" | "far0" | "far1", SandboxFlow[]> = {
      node: [],
      far0: [],
      far1: [],
    };
    for (const f of later) {
      const e = entryOf(f);
      if (!e) {
        why.set(f, "the first packet did not pass the node (no connection)");
        continue;
      }
      const r = e.reply;
      const answer: SandboxFlow = {
        proto: "udp",
        src: r.src,
        dst: r.dst,
        sport: r.sport,
        dport: r.dport,
      };
      const at = NODE_ADDRESSES.includes(r.src)
        ? "node"
        : caps.far0.packets.some((p) => p.proto === 17 && p.dport === r.sport && p.dst === r.src)
          ? "far0"
          : caps.far1.packets.some((p) => p.proto === 17 && p.dport === r.sport && p.dst === r.src)
            ? "far1"
            : undefined;
      if (at === undefined) {
        why.set(f, `the first packet went to ${r.src}, which no far host saw`);
        continue;
      }
      answers[at].push(answer);
      why.set(f, undefined);
    }
    // a far host answers from the address the first packet went to: its own, for the answer
    for (const k of ["far0", "far1"] as const) {
      await batch(
        far[k],
        answers[k].map((a) => `addr replace ${a.src}/32 dev lo`),
      );
    }
    // the node's own answers pass conntrack as they are sent; the far hosts' cross a link
    for (const [k, s] of Object.entries(answers) as ["node" | "far0" | "far1", SandboxFlow[]][]) {
      for (const a of s) {
        const err = await senders[k].send([a]);
        if (err !== undefined) throw new Error(`the answer ${JSON.stringify(a)} from ${k}: ${err}`);
      }
    }
    const farSentinels = [
      { at: "far0", src: PATH_NET.eth0.gateway },
      { at: "far1", src: PATH_NET.eth1.gateway },
    ] as const;
    for (const x of farSentinels) {
      await senders[x.at].send([{ proto: "udp", src: x.src, dst: SENTINEL, sport: 9, dport: 9 }]);
    }
    const deadline = Date.now() + 15_000;
    let entries: ConntrackLine[] = [];
    for (;;) {
      entries = (await must(node, ["conntrack", "-L", "-p", "udp"]))
        .split("\n")
        .map(readConntrackLine)
        .filter((e): e is ConntrackLine => e !== undefined);
      const answered = (src: string) =>
        entries.some((e) => e.orig.src === SENTINEL && e.orig.dst === src && e.replied);
      if (farSentinels.every((x) => answered(x.src))) break;
      if (Date.now() > deadline) throw new Error("the far hosts' sentinel answers never came");
      await new Promise((r) => setTimeout(r, 5));
    }
    for (const f of later) {
      if (why.get(f) !== undefined) continue;
      const e = entries.find((x) => x.orig.src === f.src && x.orig.sport === f.sport);
      if (!e?.replied) why.set(f, "the answer did not reach conntrack (left untracked or lost)");
    }
    return why;
  };
  return {
    lab,
    async load(c, flows) {
      await batch(node, undo);
      undo = [];
      counted = flows;
      const r = await node.exec(["iptables-restore", "-w"], {
        input: withObservers(c.restore, flows, 4),
      });
      if (r.code !== 0) return r.stderr.trim() || `iptables-restore exited ${r.code}`;
      // routes first: the kernel checks a gateway through the rules (a rule may refuse it)
      for (const route of c.routes) {
        const res = await node.exec(["ip", "route", "add", ...route.split(" ")]);
        if (res.code !== 0) return `ip route add ${route}: ${res.stderr.trim()}`;
        undo.push(`route del ${route}`);
      }
      for (const rule of c.ipRules) {
        const res = await node.exec(["ip", "rule", "add", ...rule.split(" ")]);
        if (res.code !== 0) return `ip rule add ${rule}: ${res.stderr.trim()}`;
        undo.push(`rule del ${rule}`);
      }
      return undefined;
    },
    async nodeFiles() {
      const [save, rule, route, addr] = await Promise.all([
        must(node, ["iptables-save"]),
        must(node, ["ip", "rule"]),
        must(node, ["ip", "route", "show", "table", "all"]),
        must(node, ["ip", "addr"]),
      ]);
      return {
        iptablesSave: withoutObservers(save),
        ipRule: ipRuleWithoutObservers(rule),
        ipRoute: route,
        ipAddr: addr,
      };
    },
    async observe(flows) {
      await node.exec(["conntrack", "-F"]);
      const later = flows.filter((f) => f.established === true);
      const established = new Map<PathFlow, string | undefined>();
      if (later.length > 0) {
        // the connections' first packets, each answered from where it went
        clear();
        await sendAll(later);
        await settle();
        const why = await answerFirstPackets(later);
        for (const [f, w] of why) established.set(f, w);
      }
      clear();
      await zeroDeliveries(node, 4);
      await sendAll(flows);
      await settle();
      const hits = await readDeliveries(node, 4);
      return flows.map((f): KernelPathVerdict => {
        const why = established.get(f);
        if (why !== undefined) return { kind: "not-established", why };
        // its counting rule: by what NAT keeps (withObservers)
        const i = counted.findIndex((x) =>
          f.proto === "icmp"
            ? x.proto === "icmp" && x.dst === f.dst
            : x.proto === f.proto && x.sport === f.sport,
        );
        if (i < 0) throw new Error(`no counting rule for ${JSON.stringify(f)}: not given to load`);
        return verdictOf(f, (hits[i] ?? 0) > 0, caps, 4);
      });
    },
    destroy: () => lab.destroy(),
  };
}

/** The node's own addresses: an answer from one of them is sent by the node. */
const NODE_ADDRESSES: readonly string[] = [
  PATH_NET.podGateway,
  PATH_NET.eth0.node,
  PATH_NET.eth1.node,
];

interface ConntrackTuple {
  readonly src: string;
  readonly dst: string;
  readonly sport: number;
  readonly dport: number;
}

/** One `conntrack -L` line: its original and reply tuples, and whether a reply was seen. */
export interface ConntrackLine {
  readonly orig: ConntrackTuple;
  readonly reply: ConntrackTuple;
  readonly replied: boolean;
}

/**
 * Reads a UDP or TCP line of `conntrack -L`:
 * `udp 17 29 src=A dst=B sport=P dport=Q [UNREPLIED] src=B' dst=A' sport=Q' dport=P' mark=0 use=1`.
 */
export function readConntrackLine(line: string): ConntrackLine | undefined {
  const src = [...line.matchAll(/\bsrc=(\S+)/g)].map((m) => m[1]!);
  const dst = [...line.matchAll(/\bdst=(\S+)/g)].map((m) => m[1]!);
  const sport = [...line.matchAll(/\bsport=(\d+)/g)].map((m) => Number(m[1]));
  const dport = [...line.matchAll(/\bdport=(\d+)/g)].map((m) => Number(m[1]));
  if (src.length < 2 || dst.length < 2 || sport.length < 2 || dport.length < 2) return undefined;
  return {
    orig: { src: src[0]!, dst: dst[0]!, sport: sport[0]!, dport: dport[0]! },
    reply: { src: src[1]!, dst: dst[1]!, sport: sport[1]!, dport: dport[1]! },
    replied: !line.includes("[UNREPLIED]"),
  };
}
