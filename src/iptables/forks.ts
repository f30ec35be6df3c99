/**
 * @module iptables/forks — what every rule walker (the nat evaluator, the whole path's table walks,
 * the nftables evaluators) does alike with a packet's state: a rule's predicates read in
 * three-valued logic, the state copied for a fork, an unknown fact taken both ways, and the facts
 * that turned out not to matter when every way led to the same answer.
 */
import type { PacketState, Pred, Taken } from "./nat-match.ts";
import type { Flow, NatBranch, NatTrace, UnknownFact } from "./nat-trace.ts";

/** Targets that only look at the packet (or its conntrack entry, or log it) and let the walk go on. */
export const CONTINUING_TARGETS: readonly string[] = [
  "LOG",
  "NFLOG",
  "ULOG",
  "TRACE",
  "AUDIT",
  "CLASSIFY",
  "DSCP",
  "TOS",
  "TTL",
  "HL",
  "TCPMSS",
  "CHECKSUM",
  "SET",
  "IDLETIMER",
  "LED",
  "SECMARK",
  "CONNSECMARK",
  "RATEEST",
  "NOTRACK",
  "CT",
];

// nat-match's verdicts, as local constants (imported bindings cost a getter under tsx)
const NO = 0;
const UNDECIDED = 2;
const BRANCH = 3;

/**
 * Three-valued AND of a rule's predicates: one NO decides; else UNDECIDED (the first undecided
 * predicate's reason and fact kept on the state); else BRANCH (chances multiplied) or YES.
 */
export function evalPreds(preds: readonly Pred[], s: PacketState): number {
  let undecided = false;
  let branch = false;
  let reason = "";
  let ask: PacketState["unknown"];
  let p = 1;
  let note = "";
  for (let i = 0; i < preds.length; i++) {
    const v = preds[i]!(s);
    if (v === NO) return NO;
    if (v === UNDECIDED && !undecided) {
      undecided = true;
      reason = s.reason;
      ask = s.unknown;
    } else if (v === BRANCH) {
      branch = true;
      p *= s.branchP;
      note = note ? `${note}; ${s.branchNote}` : s.branchNote;
    }
  }
  if (undecided) {
    s.reason = reason;
    s.unknown = ask;
    return UNDECIDED;
  }
  if (branch) {
    s.branchP = p;
    s.branchNote = note;
    return BRANCH;
  }
  return 1;
}

/** A copy of the packet state a walk can change without touching the original. */
export function cloneState(s: PacketState): PacketState {
  return {
    family: s.family,
    src: s.src,
    dst: s.dst,
    origSrc: s.origSrc,
    origDst: s.origDst,
    proto: s.proto,
    sport: s.sport,
    dport: s.dport,
    inIface: s.inIface,
    outIface: s.outIface,
    mark: s.mark,
    markKnown: s.markKnown,
    ctmark: s.ctmark,
    ctmarkKnown: s.ctmarkKnown,
    ctstate: s.ctstate,
    dnatted: s.dnatted,
    reason: s.reason,
    branchP: s.branchP,
    branchNote: s.branchNote,
    // these are replaced, never changed in place: sharing them is safe
    premise: s.premise,
    taken: s.taken,
    factsUsed: s.factsUsed,
    unknown: undefined,
  };
}

/**
 * Records an unknown fact both ways: `yes` (the walk that goes on) takes it as true, `no` (its
 * copy) as false. The fact is keyed as the predicates ask for it, so each walk reads it again.
 */
export function takeBothWays(
  yes: PacketState,
  no: PacketState,
  u: UnknownFact & { readonly key: unknown },
): void {
  const base: UnknownFact = { fact: u.fact, rule: u.rule, reason: u.reason, decide: u.decide };
  const take = (s: PacketState, holds: boolean) => {
    const t: Taken = { key: u.key, assumption: { ...base, holds } };
    s.taken = s.taken === undefined ? [t] : [...s.taken, t];
  };
  take(yes, true);
  take(no, false);
}

/**
 * Outcomes that differ, as one trace: the steps they all share (the same step objects, from the
 * start), each outcome as a branch, and the source they leave with when every one agrees.
 */
export function branchesTrace(
  flow: Flow,
  traces: readonly NatTrace[],
  branches: NatBranch[],
  notes: string[],
): NatTrace {
  const first = traces[0]!;
  let prefix = first.steps.length;
  for (const t of traces) {
    let k = 0;
    while (k < prefix && k < t.steps.length && t.steps[k] === first.steps[k]) k++;
    prefix = k;
  }
  let same = true;
  for (let i = 0; i < traces.length && same; i++) {
    const t = traces[i]!;
    same =
      t.decision === first.decision &&
      t.sourceOut?.how === first.sourceOut?.how &&
      t.sourceOut?.ip?.value === first.sourceOut?.ip?.value;
  }
  return {
    flow,
    steps: first.steps.slice(0, prefix),
    decision: "branches",
    ...(same && first.sourceOut ? { sourceOut: first.sourceOut } : {}),
    branches,
    notes,
  };
}

/**
 * The unknown facts a set of outcomes took, once each (by fact and rule), without the way each
 * took it: said as "not known, but it does not matter" when every outcome is the same.
 */
export function settledFacts(
  traces: readonly { readonly assumptions?: readonly UnknownFact[] | undefined }[],
): UnknownFact[] {
  const settled = new Map<string, UnknownFact>();
  for (const t of traces) {
    for (const a of t.assumptions ?? []) {
      const k = `${a.fact}|${a.rule.file}:${a.rule.line}`;
      if (!settled.has(k))
        settled.set(k, { fact: a.fact, rule: a.rule, reason: a.reason, decide: a.decide });
    }
  }
  return [...settled.values()];
}
