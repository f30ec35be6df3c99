/**
 * @module path/nat-steps — the nat evaluator's answer read as path steps: its branches (kube-proxy's
 * `statistic` endpoints, the facts it forked on) as separate outcomes, the DNAT and the chains it
 * took as cited steps, and the marks its rules set (KUBE-MARK-MASQ) carried on to the packet.
 */
import type { IptablesDump, Target } from "../iptables/dump.ts";
import type { PacketState } from "../iptables/nat-match.ts";
import type { NatStep, NatTrace } from "../iptables/nat-trace.ts";
import type { PathStep } from "./path-types.ts";

/** One complete outcome of a nat trace, with its chance. */
export interface NatLeaf {
  readonly trace: NatTrace;
  readonly probability: number;
}

/** Every outcome of a nat trace: the trace itself, or each of its branches in turn. */
export function natLeaves(t: NatTrace, p = 1, out: NatLeaf[] = []): NatLeaf[] {
  if (t.decision !== "branches" || !t.branches || t.branches.length === 0) {
    out.push({ trace: t, probability: p });
    return out;
  }
  for (const b of t.branches) natLeaves(b.trace, p * b.probability, out);
  return out;
}

/** Where the second hook (nat INPUT or POSTROUTING) starts in a trace's steps. */
function secondHook(steps: readonly NatStep[]): number {
  let seen = 0;
  for (let i = 0; i < steps.length; i++) {
    if (steps[i]!.kind === "enter" && ++seen === 2) return i;
  }
  return steps.length;
}

function targetAt(dump: IptablesDump, chain: string, index: number): Target | undefined {
  return dump.tables.get("nat")?.chains.get(chain)?.rules[index - 1]?.target;
}

/**
 * The MARK a nat "mark" step applies (null: none), by step: the nat evaluator makes one step
 * object per rule, so each is looked up in the dump once.
 */
const markOps = new WeakMap<NatStep, { readonly value: number; readonly mask: number } | null>();

function markOpOf(
  dump: IptablesDump,
  s: NatStep,
): { readonly value: number; readonly mask: number } | null {
  let op = markOps.get(s);
  if (op === undefined) {
    const tg = targetAt(dump, s.chain, s.ruleIndex);
    op = tg?.kind === "MARK" ? tg.op : null;
    markOps.set(s, op);
  }
  return op;
}

/** The hook a nat "enter" step names (its note: `nat HOOK`), or undefined. */
function hookOf(note: string): "PREROUTING" | "OUTPUT" | "POSTROUTING" | "INPUT" | undefined {
  switch (note) {
    case "nat PREROUTING":
    case "PREROUTING":
      return "PREROUTING";
    case "nat OUTPUT":
    case "OUTPUT":
      return "OUTPUT";
    case "nat POSTROUTING":
    case "POSTROUTING":
      return "POSTROUTING";
    case "nat INPUT":
    case "INPUT":
      return "INPUT";
    default:
      return undefined;
  }
}

/**
 * The steps of one part of a nat trace ("pre": PREROUTING/OUTPUT, "post": the hook after the
 * routing decision) as path steps; in the "pre" part the marks its rules set are applied to `st`.
 */
export function natSteps(
  dump: IptablesDump,
  t: NatTrace,
  st: PacketState,
  part: "pre" | "post" = "pre",
): { steps: PathStep[] } {
  const all = t.steps;
  const cut = secondHook(all);
  const from = part === "pre" ? 0 : cut;
  const to = part === "pre" ? cut : all.length;
  const steps: PathStep[] = [];
  for (let i = from; i < to; i++) {
    const s = all[i]!;
    switch (s.kind) {
      case "enter": {
        const step = cachedStep(s);
        if (step !== null) steps.push(step);
        break;
      }
      case "dnat":
      case "redirect": {
        const d = t.dstOut;
        if (d) {
          // built field by field, in the order of the type: this runs for every outcome
          const step: Mutable<DnatStep> = {
            kind: "dnat",
            chain: s.chain,
            ruleIndex: s.ruleIndex,
            to: d.ip,
          } as DnatStep;
          if (d.port !== undefined) step.port = d.port;
          step.note = s.note;
          step.source = s.source;
          steps.push(step);
        }
        break;
      }
      case "mark": {
        if (part === "pre") {
          const op = markOpOf(dump, s);
          if (op !== null) {
            st.mark = ((st.mark & ~op.mask) ^ op.value) >>> 0;
            st.markKnown = (st.markKnown | op.mask) >>> 0;
          }
        }
        steps.push(cachedStep(s)!);
        break;
      }
      case "return":
        if (s.ruleIndex > 0) steps.push(cachedStep(s)!);
        break;
      case "masquerade":
      case "snat":
      case "policy":
      case "accept":
        // the source decision is said once, as the path's snat step
        break;
      default:
        steps.push(cachedStep(s)!);
    }
  }
  return { steps };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type DnatStep = Extract<PathStep, { kind: "dnat" }>;

/**
 * The path step a nat step reads as (null: an "enter" of no hook), made once per nat step: the
 * nat evaluator shares its step objects between a table's walks, and path steps never change.
 */
const pathSteps = new WeakMap<NatStep, PathStep | null>();

function cachedStep(s: NatStep): PathStep | null {
  let step = pathSteps.get(s);
  if (step === undefined) {
    if (s.kind === "enter") {
      const hook = hookOf(s.note);
      step = hook === undefined ? null : { kind: "hook", table: "nat", hook, source: s.source };
    } else step = ruleStep(s);
    pathSteps.set(s, step);
  }
  return step;
}

function ruleStep(s: NatStep): PathStep {
  return {
    kind: "rule",
    table: "nat",
    chain: s.chain,
    ruleIndex: s.ruleIndex,
    note: s.note,
    source: s.source,
  };
}
