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
 * The steps of one part of a nat trace ("pre": PREROUTING/OUTPUT, "post": the hook after the
 * routing decision) as path steps; in the "pre" part the marks its rules set are applied to `st`.
 */
export function natSteps(
  dump: IptablesDump,
  t: NatTrace,
  st: PacketState,
  part: "pre" | "post" = "pre",
): { steps: PathStep[] } {
  const cut = secondHook(t.steps);
  const list = part === "pre" ? t.steps.slice(0, cut) : t.steps.slice(cut);
  const steps: PathStep[] = [];
  for (const s of list) {
    switch (s.kind) {
      case "enter": {
        const hook = s.note.replace(/^nat /, "");
        if (
          hook === "PREROUTING" ||
          hook === "OUTPUT" ||
          hook === "POSTROUTING" ||
          hook === "INPUT"
        )
          steps.push({ kind: "hook", table: "nat", hook, source: s.source });
        break;
      }
      case "dnat":
      case "redirect": {
        const d = t.dstOut;
        if (d) {
          steps.push({
            kind: "dnat",
            chain: s.chain,
            ruleIndex: s.ruleIndex,
            to: d.ip,
            ...(d.port !== undefined ? { port: d.port } : {}),
            note: s.note,
            source: s.source,
          });
        }
        break;
      }
      case "mark": {
        if (part === "pre") {
          const tg = targetAt(dump, s.chain, s.ruleIndex);
          if (tg?.kind === "MARK") {
            st.mark = ((st.mark & ~tg.op.mask) ^ tg.op.value) >>> 0;
            st.markKnown = (st.markKnown | tg.op.mask) >>> 0;
          }
        }
        steps.push(ruleStep(s));
        break;
      }
      case "return":
        if (s.ruleIndex > 0) steps.push(ruleStep(s));
        break;
      case "masquerade":
      case "snat":
      case "policy":
      case "accept":
        // the source decision is said once, as the path's snat step
        break;
      default:
        steps.push(ruleStep(s));
    }
  }
  return { steps };
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
