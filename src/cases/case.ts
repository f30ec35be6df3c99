/**
 * @module cases/case — the contract every case keeps: the finding ids it decides (each in exactly
 * one file of its folder), and its part of the answer to `diagnose`. The registry
 * (`cases/index.ts`) lists the cases; `diagnose` walks it and names none. A case may also prove a
 * change (`verify`): given the snapshots before and after, its change record, or nothing when the
 * snapshots hold nothing the case compares.
 */
import type { PathView } from "../model/answer.ts";
import {
  type Diagnostic,
  FINDING_IDS,
  type Finding,
  type FindingId,
  type Missing,
} from "../model/types.ts";
import type { Document } from "../report/document.ts";
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

/** What `verify` passes every case. */
export interface ProofOptions {
  /** The known request (`--dest`), for the cases that follow one. */
  readonly dest?: Destination;
}

/** Did the change do what it intended (exit 0), or not, or is it not decided (exit 1)? */
export type ProofVerdict = "intended" | "not-intended";

/**
 * One case's change record, as `verify` hands it on: the case's own record (what `-o json`
 * writes inside the envelope), the one line that proves or disproves the change, and the record
 * as a document (report/ renders it as text, Markdown and HTML) and rendered as text and Markdown.
 */
export interface CaseProof {
  /** The case's name (`masquerade`, `vpn`). */
  readonly case: string;
  readonly verdict: ProofVerdict;
  readonly proofLine: string;
  /** The case's record, written as is by `-o json`. */
  readonly record: {
    readonly schemaVersion: 1;
    readonly tool: "podpath";
    readonly question: "verify";
  };
  /** The record as a document (report/ renders it); text and markdown are its renderings. */
  readonly document: Document;
  readonly text: string;
  readonly markdown: string;
}

export interface Case<Id extends FindingId = FindingId> {
  /** The folder's name: `masquerade`, `vpn`, `evidence`. */
  readonly name: string;
  /** One line for the README's cases table and `--help`. */
  readonly summary: string;
  /** Every finding id this case decides; the compiler checks each id has exactly one case. */
  readonly findingIds: readonly Id[];
  diagnose(snap: Snapshot, opts: DiagnoseOptions, earlier: EarlierAnswers): Promise<QuestionResult>;
  /** The change record of `before` → `after`; undefined when neither holds what the case compares. */
  proof?(before: Snapshot, after: Snapshot, opts: ProofOptions): Promise<CaseProof | undefined>;
}

/** The finding ids of one area (`masq`, `vpn`, …), in `FINDING_IDS`'s order: a case's ids. */
export function idsOfArea<A extends string>(area: A): Extract<FindingId, `${A}/${string}`>[] {
  return FINDING_IDS.filter((id): id is Extract<FindingId, `${A}/${string}`> =>
    id.startsWith(`${area}/`),
  );
}
