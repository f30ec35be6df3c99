/**
 * @module report/json — the `-o json` form (DESIGN.md "JSON output"): schemaVersion first, keys in
 * a stable order (the verdict after the snapshot's name, before the findings), no undefined,
 * bigint written as a string.
 */
import type { Answer } from "../model/answer.ts";

function normalise(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return value.map(normalise);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = normalise(v);
    return out;
  }
  return value;
}

export function renderJson(answer: Answer): string {
  const ordered = {
    schemaVersion: answer.schemaVersion,
    tool: answer.tool,
    question: answer.question,
    snapshot: answer.snapshot,
    verdict: {
      state: answer.verdict.state,
      summary: answer.verdict.summary,
      finding: answer.verdict.finding,
      subject: answer.verdict.subject,
    },
    findings: answer.findings.map((f) => ({
      id: f.id,
      severity: f.severity,
      title: f.title,
      subject: f.subject,
      explanation: f.explanation,
      evidence: f.evidence,
      next: f.next,
    })),
    paths: answer.paths,
    missing: answer.missing,
    diagnostics: answer.diagnostics,
  };
  return `${JSON.stringify(normalise(ordered), null, 2)}\n`;
}
