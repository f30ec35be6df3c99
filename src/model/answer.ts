/**
 * @module model/answer — what a question returns, before rendering: findings, the paths traced,
 * evidence that is missing, and problems met while reading. Its JSON form is a public contract
 * (DESIGN.md "JSON output").
 */
import type { EnvelopeHead } from "./envelope.ts";
import {
  type Diagnostic,
  FINDING_IDS,
  type Finding,
  type FindingId,
  type Missing,
  type SourceRef,
} from "./types.ts";

/** One station of a traced path, as the report draws it. */
export interface PathHop {
  /** Where: `pod/default/app`, `node/gke-a-1`, `remote/onprem-dc1`. */
  readonly at: string;
  /** What happens there, in a few words. */
  readonly label: string;
  /** The packet's source address as it leaves this hop, when known. */
  readonly source?: string;
  /** ok: passes unchanged · changes: the source is rewritten · stops: the path ends here · unknown. */
  readonly state: "ok" | "changes" | "stops" | "unknown";
  readonly evidence?: SourceRef;
}

export interface PathView {
  readonly from: string;
  readonly to: string;
  readonly protocol?: string;
  readonly port?: number;
  readonly hops: readonly PathHop[];
  /** The source address the far side sees, when decided. */
  readonly sourceOnWire?: string;
  /** One sentence: how this path ends. */
  readonly verdict: string;
}

export const VERDICT_STATES = ["broken", "healthy", "undecided"] as const;
export type VerdictState = (typeof VERDICT_STATES)[number];

/**
 * The answer in one line: broken (an error-severity finding), undecided (podpath read evidence
 * but could not place it, or a traced path forks on a fact it does not have), or healthy.
 */
export interface Verdict {
  readonly state: VerdictState;
  /** One sentence. */
  readonly summary: string;
  /** The finding that decides it. */
  readonly finding?: FindingId;
  /** What it is about: a traced path (`pod/default/app → 10.20.30.40:5432`) or a finding's subject. */
  readonly subject?: string;
}

// The diagnose answer: the envelope's head (model/envelope, written out here as the published
// schema names it), then its body. (A line comment: a JSDoc here would enter the schema.)
export interface Answer {
  readonly schemaVersion: EnvelopeHead["schemaVersion"];
  readonly tool: EnvelopeHead["tool"];
  readonly question: string;
  readonly snapshot?: string;
  /** One verdict over the findings and paths (model/verdict). */
  readonly verdict: Verdict;
  readonly findings: readonly Finding[];
  readonly paths: readonly PathView[];
  readonly missing: readonly Missing[];
  readonly diagnostics: readonly Diagnostic[];
}

const SEVERITY_ORDER = { error: 0, warning: 1, info: 2 } as const;

/**
 * Most important first: errors, then warnings, then info; within a severity, in the order of
 * FINDING_IDS (the cause before its consequences: the exempt destination before the missing route
 * back and the wire that shows it); stable otherwise.
 */
export function sortFindings(findings: readonly Finding[]): Finding[] {
  const rank = (f: Finding) => FINDING_IDS.indexOf(f.id);
  return findings
    .map((f, i) => ({ f, i }))
    .sort(
      (a, b) =>
        SEVERITY_ORDER[a.f.severity] - SEVERITY_ORDER[b.f.severity] ||
        rank(a.f) - rank(b.f) ||
        a.i - b.i,
    )
    .map((x) => x.f);
}

/** Exit code per DESIGN.md: 1 when any error-severity finding, else 0. */
export function exitCodeFor(answer: Answer): 0 | 1 {
  return answer.findings.some((f) => f.severity === "error") ? 1 : 0;
}
