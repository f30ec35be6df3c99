/**
 * @module model/verdict — the one-line verdict over an answer's findings and traced paths: broken,
 * undecided or healthy, with the finding (or the path) that decides it. Pure.
 */
import { type PathView, sortFindings, type Verdict } from "./answer.ts";
import type { Diagnostic, Finding, FindingId, Missing } from "./types.ts";

/** How reports name each state. */
export const VERDICT_LABEL: { readonly [S in Verdict["state"]]: string } = {
  broken: "BROKEN",
  undecided: "UNDECIDED",
  healthy: "HEALTHY",
};

/** Findings that say podpath read evidence it could not decide on. */
export const UNDECIDED_FINDINGS: ReadonlySet<FindingId> = new Set<FindingId>([
  "masq/source-undecided",
  "evidence/unplaced",
]);

const NOT_DECIDED = /\bnot decided\b|\bcannot decide\b|\bundecided\b/i;

/** `pod/default/app → 10.20.30.40:5432`. */
export function pathName(p: PathView): string {
  return `${p.from} → ${p.to}${p.port === undefined ? "" : `:${p.port}`}`;
}

/** A path with a hop whose state is unknown, or whose verdict says it is not decided. */
export function isPathUndecided(p: PathView): boolean {
  return p.hops.some((h) => h.state === "unknown") || NOT_DECIDED.test(p.verdict);
}

/**
 * The traced path a finding is about: one with a hop that cites the finding's evidence, else one
 * that passes the finding's subject; among them, one that stops first.
 */
export function pathOfFinding(f: Finding, paths: readonly PathView[]): PathView | undefined {
  const cited = new Set(f.evidence.map((e) => `${e.file}:${e.line}`));
  const byEvidence = paths.filter((p) =>
    p.hops.some((h) => h.evidence && cited.has(`${h.evidence.file}:${h.evidence.line}`)),
  );
  const candidates =
    byEvidence.length > 0
      ? byEvidence
      : paths.filter((p) => p.hops.some((h) => h.at === f.subject));
  return candidates.find((p) => p.hops.some((h) => h.state === "stops")) ?? candidates[0];
}

function fromFinding(state: Verdict["state"], f: Finding, paths: readonly PathView[]): Verdict {
  const p = pathOfFinding(f, paths);
  return { state, summary: f.title, finding: f.id, subject: p ? pathName(p) : f.subject };
}

/**
 * Broken when any error-severity finding exists (the first as sortFindings orders them decides);
 * else undecided when a finding says evidence could not be placed or a source not decided
 * (`evidence/unplaced`, `masq/source-undecided`), or a traced path has a hop in state unknown or
 * a verdict that says it is not decided; else healthy.
 * @example decideVerdict([], []) // → { state: "undecided", summary: "nothing was traced: …" }
 */
/** What was read but not concluded, for the verdict of an answer that traced nothing. */
export interface Unanswered {
  readonly missing?: readonly Missing[];
  readonly diagnostics?: readonly Diagnostic[];
}

export function decideVerdict(
  findings: readonly Finding[],
  paths: readonly PathView[],
  unanswered: Unanswered = {},
): Verdict {
  const sorted = sortFindings(findings);
  const error = sorted.find((f) => f.severity === "error");
  if (error) return fromFinding("broken", error, paths);
  const unplaced = sorted.find((f) => UNDECIDED_FINDINGS.has(f.id));
  if (unplaced) return fromFinding("undecided", unplaced, paths);
  const open = paths.find(isPathUndecided);
  if (open) return { state: "undecided", summary: open.verdict, subject: pathName(open) };
  if (sorted.length === 0 && paths.length === 0) {
    // no finding and no path: nothing was concluded, which is not health
    const error = unanswered.diagnostics?.find((d) => d.severity === "error");
    const missing = unanswered.missing?.[0];
    return {
      state: "undecided",
      summary: error
        ? `nothing was traced: ${error.message}`
        : missing
          ? `nothing was traced; ${missing.file} would decide ${missing.would_decide}`
          : "nothing was traced: the snapshot holds no evidence a question reads",
    };
  }
  const warnings = sorted.filter((f) => f.severity === "warning").length;
  const first = paths[0];
  const decided =
    first === undefined
      ? "no error finding in the evidence read"
      : paths.length === 1
        ? `the traced path is decided: ${first.verdict}`
        : `all ${paths.length} traced paths are decided: ${first.verdict}`;
  return {
    state: "healthy",
    summary:
      warnings > 0 ? `${decided} (${warnings} warning${warnings === 1 ? "" : "s"} below)` : decided,
    ...(first ? { subject: pathName(first) } : {}),
  };
}
