/**
 * @module questions/diagnose — `diagnose`: asks every question the snapshot has evidence for (the
 * masquerade path, the wire, the VPN pod) and gathers one answer: a verdict, findings most
 * important first (with the evidence read but not placed), the paths traced, and the evidence
 * that would decide more.
 */
import type { Answer, PathView } from "../model/answer.ts";
import { sortFindings } from "../model/answer.ts";
import type { Diagnostic, Finding, Missing } from "../model/types.ts";
import { decideVerdict } from "../model/verdict.ts";
import type { Snapshot } from "../snapshot/load.ts";
import type { Destination, FromEndpoint } from "./endpoints.ts";
import { explainMasquerade } from "./masquerade/explain.ts";
import { unplacedFindings } from "./unplaced.ts";
import { explainVpn } from "./vpn/explain.ts";

export interface DiagnoseOptions {
  readonly dest?: Destination;
  readonly from?: FromEndpoint;
}

/** What each question contributes to the answer. */
export interface QuestionResult {
  readonly findings: Finding[];
  readonly paths: PathView[];
  readonly missing: Missing[];
  readonly diagnostics: Diagnostic[];
}

function dedupeMissing(list: readonly Missing[]): Missing[] {
  const seen = new Set<string>();
  return list.filter((m) => {
    const k = `${m.file}|${m.would_decide}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/**
 * One finding per (id, subject, title): observations of the same fact from several captures or
 * nodes become one finding with all their evidence.
 */
export function mergeFindings(list: readonly Finding[]): Finding[] {
  const byKey = new Map<string, Finding>();
  for (const f of list) {
    const k = `${f.id}|${f.subject}|${f.title}`;
    const prev = byKey.get(k);
    if (!prev) {
      byKey.set(k, f);
      continue;
    }
    const seen = new Set(prev.evidence.map((e) => `${e.file}:${e.line}`));
    byKey.set(k, {
      ...prev,
      evidence: [...prev.evidence, ...f.evidence.filter((e) => !seen.has(`${e.file}:${e.line}`))],
      next: [...new Set([...prev.next, ...f.next])],
    });
  }
  return [...byKey.values()];
}

export async function diagnose(snap: Snapshot, opts: DiagnoseOptions = {}): Promise<Answer> {
  const masq = await explainMasquerade(snap, opts);
  const vpn = await explainVpn(snap, opts);
  // checks that do not know the snapshot's name write SNAPSHOT in their next steps
  const paths = [...masq.paths, ...vpn.paths];
  // what was read but answers no question: said, with what would place it
  const unplaced = unplacedFindings(snap, opts, {
    findings: [...masq.findings, ...vpn.findings],
    paths,
  });
  const named = [...masq.findings, ...vpn.findings, ...unplaced.findings].map((f) => ({
    ...f,
    next: f.next.map((n) => n.replace(/\bSNAPSHOT\b|<snapshot>/g, snap.name)),
  }));
  const findings = sortFindings(mergeFindings(named));
  return {
    schemaVersion: 1,
    tool: "podpath",
    question: "diagnose",
    snapshot: snap.name,
    verdict: decideVerdict(findings, paths),
    findings,
    paths,
    missing: dedupeMissing([...masq.missing, ...vpn.missing]),
    diagnostics: [
      ...snap.diagnostics,
      ...masq.diagnostics,
      ...vpn.diagnostics,
      ...unplaced.diagnostics,
    ],
  };
}
