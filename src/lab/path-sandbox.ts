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
 * main table; they are marked and left out of the snapshot podpath reads. The network, the traffic,
 * the observers and the verdicts are lab/path-sandbox-net, lab/path-traffic, lab/path-observers
 * and lab/path-verdict (shared with IPv6's lab/path-sandbox6); the later packets of established
 * connections (their first packets answered from where they went) are this module's own. An
 * explicit I/O module.
 */
import type { SandboxFlow } from "./nat-sandbox.ts";
import { type Lab, mustExec as must, type Namespace } from "./netns.ts";
import { PATH_NET, type PathCase, type PathFlow } from "./path-gen.ts";
import {
  ipRuleWithoutObservers,
  readDeliveries,
  withoutObservers,
  zeroDeliveries,
} from "./path-observers.ts";
import { createSandboxNet, loadCase, type SandboxNet, sandboxIpBatch } from "./path-sandbox-net.ts";
import { clearCaptures, sendFlows, settle } from "./path-traffic.ts";
import { type KernelPathVerdict, pathVerdictOf } from "./path-verdict.ts";

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

export async function createPathSandbox(): Promise<PathSandbox> {
  return sandbox(await createSandboxNet(4));
}

function sandbox(sb: SandboxNet): PathSandbox {
  const { lab, node, caps, senders, far, sentinel } = sb;
  const batch = (ns: Namespace, lines: readonly string[]) => sandboxIpBatch(4, ns, lines);
  let undo: string[] = [];
  /** The flows `load` gave counting rules, in the security table's order. */
  let counted: readonly PathFlow[] = [];
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
      await senders[x.at].send([{ proto: "udp", src: x.src, dst: sentinel, sport: 9, dport: 9 }]);
    }
    const deadline = Date.now() + 15_000;
    let entries: ConntrackLine[] = [];
    for (;;) {
      entries = (await must(node, ["conntrack", "-L", "-p", "udp"]))
        .split("\n")
        .map(readConntrackLine)
        .filter((e): e is ConntrackLine => e !== undefined);
      const answered = (src: string) =>
        entries.some((e) => e.orig.src === sentinel && e.orig.dst === src && e.replied);
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
      return loadCase(sb, c, flows, undo);
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
        clearCaptures(sb);
        await sendFlows(sb, later);
        await settle(sb);
        const why = await answerFirstPackets(later);
        for (const [f, w] of why) established.set(f, w);
      }
      clearCaptures(sb);
      await zeroDeliveries(node, 4);
      await sendFlows(sb, flows);
      await settle(sb);
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
        return pathVerdictOf(f, (hits[i] ?? 0) > 0, caps, 4);
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
