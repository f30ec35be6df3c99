/**
 * @module report/summary — what a person reads before the details: the verdict restated from its
 * root cause (report/causality), the cause in one sentence, what follows from it, the fix to try
 * first, and the traced path the verdict is about. Text, Markdown and HTML open with it. Pure.
 */
import type { Answer, PathView, Verdict } from "../model/answer.ts";
import { sortFindings } from "../model/answer.ts";
import type { Finding } from "../model/types.ts";
import { pathName } from "../model/verdict.ts";
import { type CauseGroup, flattenGroup, groupByCause, nodesOf } from "./causality.ts";
import { summariseLists } from "./list-summary.ts";

export interface Summary {
  /** The verdict; when its finding follows from another, restated from that cause. */
  readonly verdict: Verdict;
  /** The root cause's finding, when the verdict names one. */
  readonly cause?: Finding;
  /** The cause in one sentence (the first of its explanation), lists summarised. */
  readonly because?: string;
  /** The titles of what follows from the cause. */
  readonly consequences: readonly string[];
  /** The fix to try first: the cause's `Fix:` sentence, and its first command that changes something. */
  readonly fix?: string;
  readonly command?: string;
  /** No fix is known: the cause's first next step. */
  readonly nextStep?: string;
  /** The traced path the verdict is about. */
  readonly path?: PathView;
  /** The findings by cause (report/causality). */
  readonly groups: readonly CauseGroup[];
}

/** A command that changes something: `podpath plan …`, or kubectl apply/patch/edit/…. */
const CHANGE =
  /^(?:podpath plan\b|kubectl\s+(?:-n\s+\S+\s+)?(?:apply|patch|edit|label|annotate|set|rollout|delete|scale|taint|replace|create)\b)/;

/** The first sentence of a text: up to a `. ` outside parentheses, quotes and backticks. */
export function firstSentence(text: string): string {
  const flat = text.split("\n")[0]!;
  let depth = 0;
  let quote: string | undefined;
  for (let i = 0; i < flat.length; i++) {
    const c = flat[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
    } else if (c === '"' || c === "`") quote = c;
    else if (c === "(") depth++;
    else if (c === ")") depth = Math.max(0, depth - 1);
    else if (c === "." && depth === 0 && (flat[i + 1] === " " || i === flat.length - 1)) {
      return flat.slice(0, i + 1);
    }
  }
  return flat;
}

/** The sentence after `Fix:` in an explanation, without the label. */
export function fixSentence(explanation: string): string | undefined {
  const at = explanation.indexOf("Fix: ");
  if (at < 0) return undefined;
  return firstSentence(explanation.slice(at + 5));
}

/** `Pod traffic …` → `pod traffic …` (a word in capitals, `VPN …`, stays). */
export const lowerFirst = (s: string) =>
  /^[A-Z][a-z]/.test(s) ? s[0]!.toLowerCase() + s.slice(1) : s;

/** The finding the verdict names: the first of its id in sortFindings' order. */
function decidingFinding(answer: Answer): Finding | undefined {
  const id = answer.verdict.finding;
  if (id === undefined) return undefined;
  return sortFindings(answer.findings).find((f) => f.id === id);
}

function pathOf(answer: Answer, v: Verdict): PathView | undefined {
  return answer.paths.find((p) => pathName(p) === v.subject) ?? answer.paths[0];
}

export function summariseAnswer(answer: Answer): Summary {
  const groups = groupByCause(answer.findings);
  const deciding = decidingFinding(answer);
  const group = deciding && groups.find((g) => flattenGroup(g).includes(deciding));
  const path = pathOf(answer, answer.verdict);
  if (!deciding || !group) {
    return { verdict: answer.verdict, consequences: [], groups, ...(path ? { path } : {}) };
  }
  const cause = group.finding;
  const verdict: Verdict =
    cause === deciding
      ? answer.verdict
      : {
          ...answer.verdict,
          summary: `${cause.title}, so ${lowerFirst(answer.verdict.summary)}`,
          finding: cause.id,
        };
  const members = flattenGroup(group);
  const pool = cause.subject.startsWith("pool/") ? cause.subject.slice(5) : undefined;
  const nodes = nodesOf(cause);
  const because = summariseLists(firstSentence(cause.explanation), {
    ...(nodes.length > 0 ? { noun: "nodes" } : {}),
    ...(pool ? { pool } : {}),
  });
  const ownFix = fixSentence(cause.explanation);
  const ownCommand = cause.next.find((n) => CHANGE.test(n));
  return {
    verdict,
    cause,
    because,
    consequences: members.slice(1).map((f) => f.title),
    // the cause's own fix only: a consequence's fix would treat the symptom
    ...(ownFix ? { fix: ownFix } : {}),
    ...(ownCommand ? { command: ownCommand } : {}),
    ...(!ownFix && !ownCommand && cause.next[0] ? { nextStep: cause.next[0] } : {}),
    ...(path ? { path } : {}),
    groups,
  };
}
