/**
 * @module nftables/nat-eval — the nat question of the iptables evaluator ({@link NatEvaluator}:
 * a {@link Flow} in, a {@link NatTrace} citing every rule out) answered from an nftables ruleset:
 * the nat base chains of prerouting (or output for the node's own traffic), the routing decision
 * (local delivery or forwarding), then postrouting (or input). kube-proxy's nftables mode (the
 * service-ips verdict map, numgen endpoint maps, the 0x4000 masquerade mark) and iptables-nft's
 * tables are read alike.
 */

import { branchesTrace, settledFacts } from "../iptables/forks.ts";
import { addressKnowledge } from "../iptables/nat-match.ts";
import type {
  DstOut,
  Flow,
  NatBranch,
  NatContext,
  NatDecision,
  NatEvaluator,
  NatTrace,
  SourceOut,
} from "../iptables/nat-trace.ts";
import { formatIp, type Ip } from "../net/cidr.ts";
import { localOf, type NftPacket, protoNumber } from "./match.ts";
import type { NftMapData, NftRuleset, NftStatement, NftTable } from "./model.ts";
import { CT_STATE_BITS } from "./values.ts";
import { cloneWalk, type NftHook, type NftHookEnd, type NftWalk, NftWalker } from "./walk.ts";

const CT: Record<string, number> = {
  NEW: CT_STATE_BITS["new"]!,
  ESTABLISHED: CT_STATE_BITS["established"]!,
  RELATED: CT_STATE_BITS["related"]!,
  INVALID: CT_STATE_BITS["invalid"]!,
  UNTRACKED: CT_STATE_BITS["untracked"]!,
};

/** The first packet of a flow as the nftables walk tracks it. */
export function packetOf(flow: Flow, marksMayBePreset: number): NftPacket {
  const host = flow.origin === "host";
  return {
    family: flow.dst.family,
    src: flow.src.value,
    dst: flow.dst.value,
    proto: protoNumber(flow.proto),
    sport: flow.sport,
    dport: flow.dport,
    iif: host ? "" : flow.inIface,
    oif: host ? flow.outIface : "",
    mark: (flow.mark ?? 0) >>> 0,
    markKnown: flow.mark === undefined ? ~marksMayBePreset >>> 0 : 0xffffffff,
    ctState: CT[flow.ctstate ?? "NEW"] ?? 8,
    dnatted: false,
    premise:
      flow.dstLocal === undefined ? undefined : { addr: flow.dst.value, local: flow.dstLocal },
    taken: new Map(),
    factsUsed: undefined,
  };
}

/**
 * The packet-mark bits that chains other than nat ones may set before nat (a filter chain at
 * prerouting, a route chain at output): the packet's mark is then not known to be 0.
 */
export function marksSetOutsideNat(rs: NftRuleset): number {
  let bits = 0;
  for (const t of rs.tables) {
    // the chains a non-nat base chain reaches (by jump, goto or verdict map)
    const seen = new Set<string>();
    const todo = [...t.chains.values()].filter((c) => c.base && c.base.type !== "nat");
    while (todo.length > 0) {
      const c = todo.pop()!;
      if (seen.has(c.name)) continue;
      seen.add(c.name);
      for (const r of c.rules) {
        for (const s of r.statements) {
          if (s.kind === "mark-set") {
            bits |= s.op === "set" || s.op === "and" ? 0xffffffff : Number(s.value);
            if (s.second) bits |= s.second.op === "and" ? 0xffffffff : Number(s.second.value);
          }
          for (const name of targetsOf(s, t)) {
            const next = t.chains.get(name);
            if (next) todo.push(next);
          }
        }
      }
    }
  }
  return bits >>> 0;
}

/** The chains a statement can jump or go to. */
function targetsOf(s: NftStatement, t: NftTable): string[] {
  const fromData = (d: NftMapData) =>
    d.kind === "verdict" && (d.verdict.kind === "jump" || d.verdict.kind === "goto")
      ? [d.verdict.chain]
      : [];
  if (s.kind === "verdict") return fromData({ kind: "verdict", verdict: s.verdict });
  if (s.kind !== "vmap") return [];
  if (s.map.kind === "anonymous") return s.map.entries.flatMap((e) => fromData(e.data));
  return (t.sets.get(s.map.name)?.data ?? []).flatMap(fromData);
}

/**
 * Compiles an nftables ruleset for the nat question, with the same context as the iptables
 * evaluator (node addresses, interfaces, InternalIP).
 *
 * @example
 * const nat = compileNftNat(readNftRuleset(text, "nft-ruleset.txt").value, { nodeInternalIp });
 * nat.evaluate({ src, dst: parseIp("10.96.0.10"), proto: "udp", dport: 53, origin: "pod" }).dstOut
 */
export function compileNftNat(rs: NftRuleset, ctx: NatContext = {}): NatEvaluator {
  const ifaceAddrs = (ctx.interfaces ?? []).flatMap((i) => i.addresses ?? []);
  const k = addressKnowledge(ctx.localAddresses, ifaceAddrs, ctx.addressFacts);
  const preset = marksSetOutsideNat(rs);
  // one walker per ruleset: it keeps each hook's base chains (a kube-proxy table has 10k chains)
  const walker = new NftWalker(rs, k);
  return {
    evaluate(flow: Flow): NatTrace {
      const notes: string[] = [];
      if (flow.mark === undefined && preset !== 0) {
        notes.push(
          "chains outside nat can set packet marks and the flow's mark was not given: mark matches on those bits are followed both ways",
        );
      }
      if ((flow.ctstate ?? "NEW") !== "NEW") {
        notes.push(
          "the nat chains see only the first packet of a connection; this is what a new connection would get now",
        );
      }
      walker.walks = 0;
      const w0: NftWalk = {
        pkt: packetOf(flow, preset),
        frames: [],
        steps: [],
        probability: 1,
        assumptions: [],
      };
      const host = flow.origin === "host";
      const ends: { e: NftHookEnd; delivery: "local" | "forward" }[] = [];
      for (const e1 of walker.runHook(w0, host ? "output" : "prerouting", "nat")) {
        if (e1.kind !== "accept" && e1.kind !== "nat") {
          ends.push({ e: e1, delivery: "forward" });
          continue;
        }
        // the routing decision: to the node itself (input) or on (postrouting)
        const alts: NftWalk[] = [];
        const w = e1.w;
        w.frames = [];
        delete w.acceptedAt;
        let local = host ? false : localOf(w.pkt, k);
        if (local === undefined) {
          const other = cloneWalk(w);
          const fact = `${formatIp({ family: w.pkt.family, value: w.pkt.dst })} is one of the node's own addresses`;
          const key = `local:${w.pkt.family}:${w.pkt.dst}`;
          for (const [x, holds] of [
            [w, true],
            [other, false],
          ] as const) {
            x.pkt.taken.set(key, holds);
            x.assumptions.push({
              fact,
              rule: e1.ref,
              reason:
                "routing: whether the destination is the node's own decides between local delivery and forwarding",
              decide: { command: "ip -o addr   # on the node" },
              holds,
            });
          }
          alts.push(other);
          local = true;
        }
        const second = (x: NftWalk, isLocal: boolean) => {
          const hook: NftHook = isLocal ? "input" : "postrouting";
          x.pkt.iif = isLocal ? (host ? "" : flow.inIface) : x.pkt.iif === "" ? "" : x.pkt.iif;
          x.pkt.oif = isLocal ? "" : flow.outIface;
          // postrouting: nft_meta's iifname needs the input device, absent there
          if (!isLocal) x.pkt.iif = "";
          for (const e2 of walker.runHook(x, hook, "nat")) {
            ends.push({ e: e2, delivery: isLocal ? "local" : "forward" });
          }
        };
        second(w, local);
        for (const x of alts) second(x, false);
      }
      const traces = ends.map(({ e, delivery }) => toTrace(flow, e, delivery, notes, ctx));
      if (traces.length === 1) return traces[0]!;
      return combine(
        flow,
        traces,
        ends.map(({ e }) => e.w.probability),
        notes,
      );
    },
  };
}

function sourceOut(
  flow: Flow,
  e: NftHookEnd,
  ctx: NatContext,
): { decision: NatDecision; out: SourceOut } {
  const unchanged: SourceOut = {
    ip: flow.src,
    how: "unchanged",
    note: "no source NAT: the packet leaves with its own source address",
  };
  const s = e.nat;
  if (e.kind !== "nat" || !s || s.kind === "dnat" || s.kind === "redirect")
    return { decision: "keep", out: unchanged };
  if (s.kind === "snat") {
    const a = s.to?.kind === "fixed" ? s.to.addr : undefined;
    if (a?.kind !== "range")
      return {
        decision: "snat",
        out: { how: "unknown", note: "snat to an address podpath does not read" },
      };
    const ip: Ip = { family: flow.src.family, value: a.lo };
    const single = a.lo === a.hi;
    return {
      decision: "snat",
      out: {
        ip,
        ...(single ? {} : { rangeEnd: { family: ip.family, value: a.hi } }),
        how: "to-source",
        note: `snat to ${formatIp(ip)}${single ? "" : ": one of the range per connection"}`,
      },
    };
  }
  const ifName = flow.outIface;
  const iface = ifName === undefined ? undefined : ctx.interfaces?.find((i) => i.name === ifName);
  if (iface?.primary) {
    return {
      decision: "masquerade",
      out: {
        ip: iface.primary,
        how: "interface-primary",
        note: `primary address of ${iface.name}`,
      },
    };
  }
  const why =
    ifName === undefined
      ? "the outgoing interface is not known"
      : `the addresses of ${ifName} are not known`;
  if (ctx.nodeInternalIp) {
    return {
      decision: "masquerade",
      out: {
        ip: ctx.nodeInternalIp,
        how: "node-internal-ip-fallback",
        note: `${why}; assumed the Node's InternalIP ${formatIp(ctx.nodeInternalIp)} (masquerade takes the primary address of the outgoing interface)`,
      },
    };
  }
  return {
    decision: "masquerade",
    out: { how: "unknown", note: `${why}, and the Node's InternalIP was not given` },
  };
}

function toTrace(
  flow: Flow,
  e: NftHookEnd,
  delivery: "local" | "forward",
  notes: string[],
  ctx: NatContext,
): NatTrace {
  const p = e.w.pkt;
  const changed = p.dst !== flow.dst.value || p.dport !== flow.dport;
  const dstOut: DstOut = {
    ip: { family: p.family, value: p.dst },
    ...(p.dport !== undefined ? { port: p.dport } : {}),
    how: changed && p.dnatted ? "dnat" : "unchanged",
  };
  const base = {
    flow,
    steps: e.w.steps,
    dstOut,
    notes,
    ...(e.w.assumptions.length > 0 ? { assumptions: e.w.assumptions } : {}),
    ...(p.factsUsed ? { factsUsed: p.factsUsed } : {}),
  };
  const last = e.w.steps.at(-1);
  if (e.kind === "undecided") {
    return {
      ...base,
      decision: "cannot-decide",
      undecided: {
        chain: last?.chain ?? "",
        ruleIndex: last?.ruleIndex ?? 0,
        rule: e.ref,
        reason: e.reason ?? "",
      },
    };
  }
  if (e.kind === "drop" || e.kind === "reject") {
    return { ...base, decision: "dropped", decidingRule: e.ref };
  }
  const { decision, out } = sourceOut(flow, e, ctx);
  return { ...base, decision, sourceOut: out, decidingRule: e.ref, delivery };
}

function outcomeKey(t: NatTrace): string | undefined {
  if (t.decision === "cannot-decide" || t.decision === "branches") return undefined;
  return [
    t.decision,
    t.delivery ?? "",
    t.sourceOut?.how ?? "",
    t.sourceOut?.ip?.value ?? "",
    t.dstOut?.ip.value ?? "",
    t.dstOut?.port ?? "",
    t.decidingRule ? `${t.decidingRule.file}:${t.decidingRule.line}` : "",
  ].join("|");
}

function combine(flow: Flow, traces: NatTrace[], probs: number[], notes: string[]): NatTrace {
  const branches: NatBranch[] = traces.map((trace, i) => ({ probability: probs[i]!, trace }));
  const random = traces.some((t) =>
    t.steps.some((s) => s.kind === "branch" && !s.note.startsWith("assumed")),
  );
  const key0 = outcomeKey(traces[0]!);
  if (!random && key0 !== undefined && traces.every((t) => outcomeKey(t) === key0)) {
    const { assumptions: _a, ...rest } = traces[0]!;
    return { ...rest, unknownButSettled: settledFacts(traces), branches };
  }
  return branchesTrace(flow, traces, branches, notes);
}
