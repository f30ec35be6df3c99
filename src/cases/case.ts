/**
 * @module cases/case — the contract every case keeps: the finding ids it decides (each in exactly
 * one file of its folder), and its part of the answer to `diagnose`. The registry
 * (`cases/index.ts`) lists the cases; `diagnose` walks it and names none.
 */
import type { PathView } from "../model/answer.ts";
import type { Diagnostic, Finding, FindingId, Missing } from "../model/types.ts";
import type { Snapshot } from "../snapshot/load.ts";
import type { Destination, FromEndpoint } from "./endpoints.ts";

export interface DiagnoseOptions {
  readonly dest?: Destination;
  readonly from?: FromEndpoint;
}

/** What each case contributes to the answer. */
export interface QuestionResult {
  readonly findings: Finding[];
  readonly paths: PathView[];
  readonly missing: Missing[];
  readonly diagnostics: Diagnostic[];
}

/** What the cases before this one answered (a case that judges the others' coverage reads it). */
export interface EarlierAnswers {
  readonly findings: readonly Finding[];
  readonly paths: readonly PathView[];
}

export interface Case<Id extends FindingId = FindingId> {
  /** The folder's name: `masquerade`, `vpn`, `evidence`. */
  readonly name: string;
  /** One line for the README's cases table and `--help`. */
  readonly summary: string;
  /** Every finding id this case decides; the compiler checks each id has exactly one case. */
  readonly findingIds: readonly Id[];
  diagnose(snap: Snapshot, opts: DiagnoseOptions, earlier: EarlierAnswers): Promise<QuestionResult>;
}
