/**
 * @module questions/diagnose — `diagnose`: asks every question the snapshot has evidence for (the
 * masquerade path, the wire, the VPN pod; a case is loaded only when the registry says the
 * snapshot holds something for it) and gathers one answer: a verdict, findings most
 * important first (with the evidence read but not placed), the paths traced, and the evidence
 * that would decide more.
 */
import type { DiagnoseOptions, QuestionResult } from "../cases/case.ts";
import { checkFromEndpoint } from "../cases/endpoints.ts";
import { CASE_ENTRIES } from "../cases/index.ts";
import type { Answer, PathView } from "../model/answer.ts";
import { sortFindings } from "../model/answer.ts";
import type { Diagnostic, Finding, Missing } from "../model/types.ts";
import { decideVerdict } from "../model/verdict.ts";
import { shellWordOrUndefined } from "../report/shell-quote.ts";
import type { Snapshot } from "../snapshot/load.ts";

export type { DiagnoseOptions, QuestionResult } from "../cases/case.ts";

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

/**
 * @throws UnknownEndpointError when `opts.from` names a pod, node or namespace the snapshot does
 * not hold (with the closest names it does): a question about a sender that is not there.
 */
export async function diagnose(snap: Snapshot, opts: DiagnoseOptions = {}): Promise<Answer> {
  if (opts.from) {
    const unknown = checkFromEndpoint(opts.from, {
      objects: snap.objects,
      nodes: snap.nodes.keys(),
      pods: snap.pods.keys(),
    });
    if (unknown) throw unknown;
  }
  const findings: Finding[] = [];
  const paths: PathView[] = [];
  const missing: Missing[] = [];
  const diagnostics: Diagnostic[] = [...snap.diagnostics];
  for (const entry of CASE_ENTRIES) {
    // a case with nothing to read in this snapshot would answer nothing: it is not even loaded
    if (!entry.claims(snap)) continue;
    const c = await entry.load();
    const r: QuestionResult = await c.diagnose(snap, opts, { findings, paths });
    findings.push(...r.findings);
    paths.push(...r.paths);
    missing.push(...r.missing);
    diagnostics.push(...r.diagnostics);
  }
  // checks that do not know the snapshot's name write SNAPSHOT in their next steps; the name is
  // quoted as one shell word (a name no quoting holds leaves the placeholder for the user)
  const snapWord = shellWordOrUndefined(snap.name);
  const named = findings.map((f) => ({
    ...f,
    next: f.next.map((n) =>
      snapWord === undefined ? n : n.replace(/\bSNAPSHOT\b|<snapshot>/g, () => snapWord),
    ),
  }));
  const sorted = sortFindings(mergeFindings(named));
  return {
    schemaVersion: 1,
    tool: "podpath",
    question: "diagnose",
    snapshot: snap.name,
    verdict: decideVerdict(sorted, paths, { missing, diagnostics }),
    findings: sorted,
    paths,
    missing: dedupeMissing(missing),
    diagnostics,
  };
}
