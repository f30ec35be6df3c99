/**
 * @module report/json — diagnose's `-o json` form (DESIGN.md "JSON output"): the envelope
 * (model/envelope), then keys in a stable order (the verdict after the snapshot's name, before
 * the findings), no undefined, bigint written as a string.
 */
import type { Answer } from "../model/answer.ts";
import { envelope, toJson } from "../model/envelope.ts";

export function renderJson(answer: Answer): string {
  const body = {
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
  return toJson(envelope(answer.question, body, answer.snapshot));
}
