/**
 * @module report/markdown — the verdict, findings and paths as Markdown, ready to paste into a
 * ticket; the first line is the verdict.
 */
import type { Answer, PathView, Verdict } from "../model/answer.ts";
import { sortFindings } from "../model/answer.ts";
import type { Finding } from "../model/types.ts";
import { VERDICT_LABEL } from "../model/verdict.ts";

/** Escapes text for a Markdown table cell or inline position. */
export function mdEscape(s: string): string {
  return s.replace(/([\\`*_|<>[\]])/g, "\\$1").replace(/\n/g, " ");
}

/** One traced path as a bold heading line, a table of its hops and its verdict. */
export function pathTable(path: PathView): string {
  const rows = path.hops.map(
    (h) =>
      `| ${mdEscape(h.at)} | ${mdEscape(h.label)} | ${h.source ? `\`${h.source}\`` : ""} | ${h.state} | ${
        h.evidence ? `\`${h.evidence.file}:${h.evidence.line}\`` : ""
      } |`,
  );
  return [
    `**${mdEscape(path.from)} → ${mdEscape(path.to)}${path.port === undefined ? "" : `:${path.port}`}**`,
    "",
    "| where | what | source | state | evidence |",
    "|---|---|---|---|---|",
    ...rows,
    "",
    `Verdict: ${mdEscape(path.verdict)}`,
  ].join("\n");
}

/** The verdict as one Markdown line: `**BROKEN** subject: summary (\`finding\`)`. */
export function verdictMarkdown(v: Verdict): string {
  return `**${VERDICT_LABEL[v.state]}** ${v.subject ? `${mdEscape(v.subject)}: ` : ""}${mdEscape(v.summary)}${
    v.finding ? ` (\`${v.finding}\`)` : ""
  }`;
}

/**
 * One finding as Markdown lines, each part followed by a blank line: its heading at `level`
 * (`##` in diagnose), id and subject, explanation, evidence and next steps.
 */
export function findingMarkdown(f: Finding, level: number): string[] {
  const out = [`${"#".repeat(level)} ${f.severity.toUpperCase()}: ${mdEscape(f.title)}`, ""];
  out.push(`\`${f.id}\` · ${mdEscape(f.subject)}`, "", f.explanation, "");
  if (f.evidence.length) {
    out.push("Evidence:", "");
    for (const e of f.evidence) {
      out.push(
        `- \`${e.file}:${e.line}\`${e.text ? ` — \`${e.text.trim().replace(/`/g, "'")}\`` : ""}`,
      );
    }
    out.push("");
  }
  if (f.next.length) {
    out.push("Next:", "", ...f.next.map((n) => `- \`${n.replace(/`/g, "'")}\``), "");
  }
  return out;
}

export function renderMarkdown(answer: Answer): string {
  const out = [
    verdictMarkdown(answer.verdict),
    "",
    `# podpath ${answer.question}${answer.snapshot ? `: \`${answer.snapshot}\`` : ""}`,
    "",
  ];
  const findings = sortFindings(answer.findings);
  if (findings.length === 0) out.push("No findings.", "");
  for (const f of findings) out.push(...findingMarkdown(f, 2));
  if (answer.paths.length) {
    out.push("## Paths", "");
    for (const p of answer.paths) out.push(pathTable(p), "");
  }
  if (answer.missing.length) {
    out.push("## Evidence that would decide more", "");
    for (const m of answer.missing) {
      out.push(
        `- \`${m.file}\`: ${mdEscape(m.would_decide)}${m.command ? ` (\`${m.command}\`)` : ""}`,
      );
    }
    out.push("");
  }
  return out.join("\n");
}
