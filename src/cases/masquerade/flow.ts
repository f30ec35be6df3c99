import { lookupRoute } from "../../evidence/ip-route.ts";
import { compileNat, decidingRuleOf } from "../../iptables/nat-eval.ts";
import type {
  AddressFact,
  Assumption,
  NatEvaluator,
  NatTrace,
  UnknownFact,
} from "../../iptables/nat-trace.ts";
import type { NodeView } from "../../k8s/objects.ts";
import type { SourceRef } from "../../model/types.ts";
import type { Ip } from "../../net/cidr.ts";
import type { NftRuleset } from "../../nftables/model.ts";
import { compileNftNat } from "../../nftables/nat-eval.ts";
import { nodeDump, nodeNatContext } from "../../path/node-context.ts";
import { decideRoute } from "../../path/route-decision.ts";
import type { NodeEvidence } from "../../snapshot/load.ts";

export interface FlowQuestion {
  readonly src: Ip;
  readonly dst: Ip;
  readonly protocol: "tcp" | "udp" | "icmp";
  readonly dport?: number;
  readonly origin: "pod" | "host";
}

/** One outcome of the facts the evidence does not state. */
export interface Alternative {
  /** What this outcome takes as true or false. */
  readonly assumptions: readonly Assumption[];
  readonly decision: "masquerade" | "snat" | "keep" | "cannot-decide" | "dropped";
  readonly sourceOut?: Ip;
  readonly decidingRule?: SourceRef;
  readonly undecided?: string;
  /** "local": the destination is the node's own; the packet never leaves the node. */
  readonly delivery?: "local" | "forward";
}

export interface FlowOutcome {
  /** "forks": the answer turns on facts the evidence does not state (see `alternatives`). */
  readonly decision: "masquerade" | "snat" | "keep" | "cannot-decide" | "forks";
  /** The source address on the wire; undefined when it cannot be decided. */
  readonly sourceOut?: Ip;
  /** How it was chosen, in words (interface primary address, --to-source, fallback...). */
  readonly sourceNote?: string;
  /** The rule that decided (the RETURN that skipped MASQUERADE, or the MASQUERADE/SNAT rule). */
  readonly decidingRule?: SourceRef;
  /** Why it cannot be decided. */
  readonly undecided?: string;
  /** The node's own address toward the destination, for the "why the node works" sentence. */
  readonly hostSource?: Ip;
  readonly outIface?: string;
  readonly trace: NatTrace;
  /** For "forks": each outcome with what it takes for true. */
  readonly alternatives?: readonly Alternative[];
  /** Facts from other evidence that decided a match (the node's addresses, a far site's). */
  readonly factsUsed?: readonly AddressFact[];
  /** Facts not stated anywhere whose every outcome leads to this same answer. */
  readonly unknownButSettled?: readonly UnknownFact[];
}

type NatDump = NonNullable<NodeEvidence["iptables"]>;
/** One evaluator per dump: a node's iptables-save and its ip6tables-save each have their own. */
const evaluators = new WeakMap<NatDump, NatEvaluator>();

const nftEvaluators = new WeakMap<NftRuleset, Map<number, NatEvaluator>>();

function evaluatorOf(
  node: NodeEvidence,
  view: NodeView | undefined,
  addressFacts: readonly AddressFact[],
  family: 4 | 6 = 4,
): NatEvaluator | undefined {
  // a node whose nat rules the kernel runs from nftables (kube-proxy's nftables mode): that listing
  const rs = node.natFrom === "nftables" ? node.nftables : undefined;
  if (rs) {
    const byFamily = nftEvaluators.get(rs) ?? new Map<number, NatEvaluator>();
    nftEvaluators.set(rs, byFamily);
    const ev =
      byFamily.get(family) ?? compileNftNat(rs, nodeNatContext(node, view, addressFacts, family));
    byFamily.set(family, ev);
    return ev;
  }
  const dump = nodeDump(node, family);
  if (!dump) return undefined;
  let e = evaluators.get(dump);
  if (!e) {
    e = compileNat(dump, nodeNatContext(node, view, addressFacts, family));
    evaluators.set(dump, e);
  }
  return e;
}

function alternativeOf(trace: NatTrace): Alternative {
  const rule = decidingRuleOf(trace);
  const u = trace.undecided;
  const decision = trace.decision === "branches" ? "cannot-decide" : trace.decision;
  return {
    assumptions: trace.assumptions ?? [],
    decision,
    ...(trace.sourceOut?.ip ? { sourceOut: trace.sourceOut.ip } : {}),
    ...(rule ? { decidingRule: rule } : u ? { decidingRule: u.rule } : {}),
    ...(u
      ? { undecided: `${u.chain}${u.ruleIndex > 0 ? ` rule ${u.ruleIndex}` : ""}: ${u.reason}` }
      : {}),
    ...(trace.delivery ? { delivery: trace.delivery } : {}),
  };
}

/**
 * The interface a route sends `ip` out of, from the node's `ip route`; through its `ip rule` when
 * the snapshot has it (a pod's packet, from `src` arriving on `iif`, may be routed by another table).
 */
function routeDev(
  node: NodeEvidence,
  ip: Ip,
  from: { src?: Ip; iif?: string } = {},
): { dev?: string; src?: Ip } {
  if (!node.routes) return {};
  const d = node.ipRules
    ? decideRoute({ routes: node.routes, rules: node.ipRules }, { dst: ip, ...from })
    : undefined;
  const r = d ? (d.kind === "route" ? d.route : undefined) : lookupRoute(node.routes, ip);
  return { ...(r?.dev ? { dev: r.dev } : {}), ...(r?.src ? { src: r.src } : {}) };
}

/** The fields every outcome of one flow carries, whatever its decision. */
type OutcomeBase = Omit<FlowOutcome, "decision">;

/**
 * The flow through the node's installed rules. `addressFacts` (from the cluster objects, routes and
 * far sites) settle which addresses are the node's own when its `ip addr` is not in the snapshot;
 * they are read on the node's first flow.
 */
export function evaluateNodeFlow(
  node: NodeEvidence,
  view: NodeView | undefined,
  q: FlowQuestion,
  addressFacts: readonly AddressFact[] = [],
): FlowOutcome | undefined {
  // an IPv6 flow goes through the node's ip6tables-save; without it, the evaluator of the
  // IPv4 dump says that the families differ
  const dump = nodeDump(node, q.dst.family) ?? node.iptables;
  const ev = evaluatorOf(node, view, addressFacts, dump === node.iptables ? 4 : 6);
  if (!ev) return undefined;
  const inIface = q.origin === "pod" ? routeDev(node, q.src).dev : undefined;
  const from = q.origin === "pod" ? { src: q.src, ...(inIface ? { iif: inIface } : {}) } : {};
  let out = routeDev(node, q.dst, from);
  const flow = {
    src: q.src,
    dst: q.dst,
    proto: q.protocol,
    ...(q.dport ? { dport: q.dport } : {}),
    origin: q.origin,
    ...(inIface ? { inIface } : {}),
  };
  let trace = ev.evaluate({ ...flow, ...(out.dev ? { outIface: out.dev } : {}) });
  // a Service's DNAT: the -o matches of POSTROUTING see the route to the endpoint, not to the VIP
  const to = trace.dstOut;
  if (to && to.how !== "unchanged" && trace.delivery !== "local") {
    const routed = routeDev(node, to.ip, from);
    if (routed.dev && routed.dev !== out.dev) {
      out = routed;
      trace = ev.evaluate({ ...flow, outIface: routed.dev });
    }
  }
  // the node's own address of the destination's family: an IPv4 one says nothing for IPv6
  const hostSource = out.src ?? view?.internalIPs.find((a) => a.ip.family === q.dst.family)?.ip;
  const deciding = decidingRuleOf(trace);
  // whether any RETURN skipped a translation (a cut dump's kept source may rest on none)
  const lastReturn = trace.steps.some((s) => s.kind === "return" && s.ruleIndex > 0);
  const base: OutcomeBase = {
    trace,
    ...(deciding ? { decidingRule: deciding } : {}),
    ...(hostSource ? { hostSource } : {}),
    ...(out.dev ? { outIface: out.dev } : {}),
    ...(trace.factsUsed ? { factsUsed: trace.factsUsed } : {}),
    ...(trace.unknownButSettled ? { unknownButSettled: trace.unknownButSettled } : {}),
  };
  const nat = dump?.tables.get("nat");
  if (
    trace.decision === "keep" &&
    !lastReturn &&
    dump?.format === "save" &&
    nat?.committed === false
  ) {
    // The dump ends before the nat table's COMMIT: the rules that would rewrite the source may
    // be the ones cut off, so "no rule rewrites it" is not known.
    return {
      ...base,
      decision: "cannot-decide",
      undecided: `the nat table in ${dump.file} is cut off (no COMMIT): the rules after its last line are missing`,
    };
  }
  return outcomeOf(base, trace, q);
}

/** The trace's decision reduced to what the masquerade question reports. */
function outcomeOf(base: OutcomeBase, trace: NatTrace, q: FlowQuestion): FlowOutcome {
  const src = trace.sourceOut?.ip;
  const note = trace.sourceOut?.note;
  switch (trace.decision) {
    case "keep":
    case "masquerade":
    case "snat":
      return {
        ...base,
        decision: trace.decision,
        ...(src ? { sourceOut: src } : {}),
        ...(note ? { sourceNote: note } : {}),
        ...(src ? {} : { undecided: note ?? "the translated address is not known" }),
      };
    case "branches":
      return branchesOutcome(base, trace, q);
    case "dropped":
      return { ...base, decision: "cannot-decide", undecided: "the nat table drops this packet" };
    case "cannot-decide": {
      const u = trace.undecided;
      return {
        ...base,
        ...(u ? { decidingRule: u.rule } : {}),
        decision: "cannot-decide",
        undecided: u
          ? `${u.chain} rule ${u.ruleIndex}: ${u.reason}`
          : "a rule podpath cannot evaluate",
      };
    }
  }
}

/**
 * A trace that branches: a fork when the branches turn on facts the evidence does not state,
 * else the one source every branch leaves with, else undecided (a random branch).
 */
function branchesOutcome(base: OutcomeBase, trace: NatTrace, q: FlowQuestion): FlowOutcome {
  const src = trace.sourceOut?.ip;
  const note = trace.sourceOut?.note;
  const forked = (trace.branches ?? []).some((b) => b.trace.assumptions !== undefined);
  if (forked) {
    // the answer turns on facts the evidence does not state: each outcome, with what it takes
    const factsUsed = [...new Set((trace.branches ?? []).flatMap((b) => b.trace.factsUsed ?? []))];
    // the outcomes podpath can follow first, then those it cannot
    const alternatives = (trace.branches ?? [])
      .map((b) => alternativeOf(b.trace))
      .sort(
        (a, b) => Number(a.decision === "cannot-decide") - Number(b.decision === "cannot-decide"),
      );
    const facts = [...new Set(alternatives.flatMap((a) => a.assumptions.map((x) => x.fact)))];
    return {
      ...base,
      decision: "forks",
      alternatives,
      ...(factsUsed.length > 0 ? { factsUsed } : {}),
      undecided: `it turns on whether ${facts.join("; whether ")}`,
    };
  }
  if (src) {
    return {
      ...base,
      decision: src.value === q.src.value ? "keep" : "masquerade",
      sourceOut: src,
      ...(note ? { sourceNote: note } : {}),
    };
  }
  return {
    ...base,
    decision: "cannot-decide",
    undecided: "the source depends on a random (statistic) branch",
  };
}
