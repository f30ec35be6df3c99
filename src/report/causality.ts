/**
 * @module report/causality — which finding follows from which, for the reader: the findings of an
 * answer as groups, each a cause with the consequences that follow from it (a consequence's own
 * consequences under it). Decided only from what findings already carry (id, subject, the flow or
 * nodes their title and explanation name), by one explicit table (CAUSES); a finding no rule ties
 * to another stands on its own. Display only: ids, JSON and severities are untouched. Pure.
 */
import { sortFindings } from "../model/answer.ts";
import type { Finding, FindingId } from "../model/types.ts";

/** A pod flow a finding is about: the source address on the wire and the destination. */
export interface FindingFlow {
  readonly src: string;
  readonly dst: string;
}

/**
 * The flow a finding names: `flow/SRC->DST` subjects; the exempt destination's title (`Pod
 * traffic to DST keeps its pod source address SRC`); the missing route back's explanation
 * (`Packets to DST arrive at SITE with source SRC,`). Otherwise none.
 */
export function flowOf(f: Finding): FindingFlow | undefined {
  const subject = /^flow\/([^\s>-]+)->(\S+)$/.exec(f.subject);
  if (subject) return { src: subject[1]!, dst: subject[2]! };
  if (f.id === "masq/exempt-destination") {
    const m = /^Pod traffic to (\S+) keeps its pod source address ([^\s,()]+)/.exec(f.title);
    if (m) return { src: m[2]!, dst: m[1]! };
  }
  if (f.id === "masq/no-return-route") {
    const m = /^Packets to (\S+) arrive at \S+ with source ([^\s,]+),/.exec(f.explanation);
    if (m) return { src: m[2]!, dst: m[1]! };
  }
  return undefined;
}

/**
 * The nodes a finding is about: a `node/NAME` subject; for a missing agent, the nodes its
 * explanation names (`does not place its pod on A, B: …`, `should run on A, B, but …`).
 */
export function nodesOf(f: Finding): readonly string[] {
  if (f.subject.startsWith("node/")) return [f.subject.slice(5)];
  if (f.id === "masq/agent-missing") {
    const m = /(?:does not place its pod on|should run on) (.+?)(?::|, but) /.exec(f.explanation);
    if (m) return m[1]!.split(", ").filter((n) => n.length > 0);
  }
  return [];
}

const sameFlow = (cause: Finding, effect: Finding): boolean => {
  const a = flowOf(cause);
  const b = flowOf(effect);
  return a !== undefined && b !== undefined && a.src === b.src && a.dst === b.dst;
};

const onItsNodes = (cause: Finding, effect: Finding): boolean => {
  const nodes = new Set(nodesOf(cause));
  return nodesOf(effect).some((n) => nodes.has(n));
};

/** One rule: `effect` follows from `cause` when `holds(cause, effect)`. */
export interface CauseRule {
  readonly cause: FindingId;
  readonly effect: FindingId;
  /** In words, for the reader of this table. */
  readonly why: string;
  readonly holds: (cause: Finding, effect: Finding) => boolean;
}

/** Every cause → consequence podpath knows, most specific first. */
export const CAUSES: readonly CauseRule[] = [
  {
    cause: "masq/agent-missing",
    effect: "masq/exempt-destination",
    why: "a node the agent does not run on keeps old rules, which exempt the destination",
    holds: onItsNodes,
  },
  {
    cause: "masq/intent-rules-drift",
    effect: "masq/exempt-destination",
    why: "the node's rules are not the ConfigMap's, and the ConfigMap names no such exemption",
    holds: (c, e) => onItsNodes(c, e) && !/\(exempted by /.test(e.title),
  },
  {
    cause: "masq/exempt-destination",
    effect: "masq/no-return-route",
    why: "the pod address leaves unmasqueraded, and the far side does not route it back",
    holds: sameFlow,
  },
  {
    cause: "masq/exempt-destination",
    effect: "masq/wire-pod-source",
    why: "the wire shows the pod address the rules kept",
    holds: (c, e) => sameFlow(c, e) && e.severity !== "info",
  },
  {
    cause: "vpn/forwarding-disabled",
    effect: "vpn/first-silent-hop",
    why: "the first silent hop is the VPN pod's forwarding, which is off",
    holds: (_c, e) => /\bvpn-pod-forwarding\b/.test(e.title),
  },
];

/** The finding `f` follows from, among `all` (itself excluded); the first rule that holds. */
export function causeOf(f: Finding, all: readonly Finding[]): Finding | undefined {
  for (const rule of CAUSES) {
    if (rule.effect !== f.id) continue;
    const cause = all.find((c) => c !== f && c.id === rule.cause && rule.holds(c, f));
    if (cause) return cause;
  }
  return undefined;
}

/** A cause and what follows from it. */
export interface CauseGroup {
  readonly finding: Finding;
  readonly consequences: readonly CauseGroup[];
}

const SEVERITY_RANK = { error: 0, warning: 1, info: 2 } as const;

function worst(g: CauseGroup): number {
  return Math.min(SEVERITY_RANK[g.finding.severity], ...g.consequences.map(worst));
}

/**
 * The findings as cause groups: roots (findings that follow from none) most important first
 * (the worst severity in the group, then model/answer sortFindings' order), each with its
 * consequences in that order. Every finding appears exactly once; a cycle is broken by keeping
 * the first finding of sortFindings' order as the root.
 */
export function groupByCause(findings: readonly Finding[]): CauseGroup[] {
  const sorted = sortFindings(findings);
  const parent = new Map<Finding, Finding>();
  for (const f of sorted) {
    const c = causeOf(f, sorted);
    if (c) parent.set(f, c);
  }
  // break cycles: walk up from each finding; a finding met twice loses its parent
  for (const f of sorted) {
    const seen = new Set<Finding>([f]);
    let at = parent.get(f);
    while (at) {
      if (seen.has(at)) {
        parent.delete(at);
        break;
      }
      seen.add(at);
      at = parent.get(at);
    }
  }
  const build = (f: Finding): CauseGroup => ({
    finding: f,
    consequences: sorted.filter((c) => parent.get(c) === f).map(build),
  });
  const order = new Map(sorted.map((f, i) => [f, i]));
  return sorted
    .filter((f) => !parent.has(f))
    .map(build)
    .map((g) => ({ g, w: worst(g), i: order.get(g.finding)! }))
    .sort((a, b) => a.w - b.w || a.i - b.i)
    .map((x) => x.g);
}

/** The root cause of `f` among `all`: the cause of the group (groupByCause) that holds `f`. */
export function rootCauseOf(f: Finding, all: readonly Finding[]): Finding {
  return groupByCause(all).find((g) => flattenGroup(g).includes(f))?.finding ?? f;
}

/** The group's findings, cause first, depth-first. */
export function flattenGroup(g: CauseGroup): Finding[] {
  return [g.finding, ...g.consequences.flatMap(flattenGroup)];
}
