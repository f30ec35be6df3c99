/**
 * @module report/markdown — the verdict, findings and paths as Markdown, ready to paste into a
 * ticket; the first line is the verdict, then the cause, the fix and the verdict's path, then the
 * findings by cause. Everything from input is escaped (report/markdown-escape): names and prose
 * inline and at line starts, commands and evidence in code spans longer than their backtick runs.
 */
import type { Answer, PathView, Verdict } from "../model/answer.ts";
import type { Finding } from "../model/types.ts";
import { VERDICT_LABEL } from "../model/verdict.ts";
import type { CauseGroup } from "./causality.ts";
import { codeSpan, mdInline, mdLines } from "./markdown-escape.ts";
import { guardCommand } from "./shell-quote.ts";
import { lowerFirst, type Summary, summariseAnswer } from "./summary.ts";
import { terminalSafeDeep } from "./terminal-safe.ts";

/**
 * Escapes text for a Markdown table cell or inline position: every construct's punctuation
 * escaped, a line break read as a space (report/markdown-escape mdInline).
 */
export function mdEscape(s: string): string {
  return mdInline(s.replace(/\s*\n\s*/g, " "));
}

/** One traced path as a bold heading line, a table of its hops and its verdict. */
export function pathTable(path: PathView): string {
  const rows = path.hops.map(
    (h) =>
      `| ${mdEscape(h.at)} | ${mdEscape(h.label)} | ${h.source ? codeSpan(h.source, true) : ""} | ${h.state} | ${
        h.evidence ? codeSpan(`${h.evidence.file}:${h.evidence.line}`, true) : ""
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
    v.finding ? ` (${codeSpan(v.finding)})` : ""
  }`;
}

/**
 * One finding as Markdown lines, each part followed by a blank line: its heading at `level`
 * (`##` in diagnose), id and subject, explanation (escaped line by line), evidence and next steps.
 */
export function findingMarkdown(f: Finding, level: number, causedBy?: string): string[] {
  const out = [`${"#".repeat(level)} ${f.severity.toUpperCase()}: ${mdEscape(f.title)}`, ""];
  const after = causedBy ? ` · follows from ${codeSpan(causedBy)}` : "";
  out.push(`${codeSpan(f.id)} · ${mdEscape(f.subject)}${after}`, "", mdLines(f.explanation), "");
  if (f.evidence.length) {
    out.push("Evidence:", "");
    for (const e of f.evidence) {
      out.push(
        `- ${codeSpan(`${e.file}:${e.line}`)}${e.text ? ` — ${codeSpan(e.text.trim())}` : ""}`,
      );
    }
    out.push("");
  }
  if (f.next.length) {
    out.push("Next:", "", ...f.next.map((n) => `- ${codeSpan(n)}`), "");
  }
  return out;
}

/** The summary under the title: cause, what follows, the fix to try first, the verdict's path. */
function summaryMarkdown(s: Summary): string[] {
  const out: string[] = [];
  const rows: string[] = [];
  if (s.because) rows.push(`**Cause:** ${mdEscape(s.because)}`);
  if (s.consequences.length) {
    rows.push(`**Then:** ${s.consequences.map((t) => mdEscape(lowerFirst(t))).join("; ")}`);
  }
  if (s.fix) rows.push(`**Fix:** ${mdEscape(s.fix)}`);
  if (s.command) rows.push(`${s.fix ? "" : "**Fix:** "}${codeSpan(s.command)}`);
  if (s.nextStep) rows.push(`**Next:** ${codeSpan(s.nextStep)}`);
  // two trailing spaces: one line each in the same paragraph
  if (rows.length) out.push(rows.join("  \n"), "");
  if (s.path) out.push(pathTable(s.path), "");
  return out;
}

function groupMarkdown(g: CauseGroup, level: number, causedBy: string | undefined, out: string[]) {
  out.push(...findingMarkdown(g.finding, level, causedBy));
  for (const c of g.consequences) groupMarkdown(c, Math.min(level + 1, 6), g.finding.id, out);
}

/**
 * diagnose as Markdown: the verdict (restated from its root cause, report/summary), the title,
 * the summary and the verdict's path, then the findings by cause (a consequence one heading level
 * under its cause), the other paths, what would decide more. Control characters anywhere in the
 * answer are shown visibly (report/terminal-safe) before any of it is drawn.
 */
export function renderMarkdown(input: Answer): string {
  const answer = terminalSafeDeep(input, { command: guardCommand });
  const s = summariseAnswer(answer);
  const out = [
    verdictMarkdown(s.verdict),
    "",
    `# podpath ${mdEscape(answer.question)}${answer.snapshot ? `: ${codeSpan(answer.snapshot)}` : ""}`,
    "",
    ...summaryMarkdown(s),
  ];
  if (s.groups.length === 0) out.push("No findings.", "");
  for (const g of s.groups) groupMarkdown(g, 2, undefined, out);
  const others = answer.paths.filter((p) => p !== s.path);
  if (others.length) {
    out.push(s.path ? "## Other paths" : "## Paths", "");
    for (const p of others) out.push(pathTable(p), "");
  }
  if (answer.missing.length) {
    out.push("## Evidence that would decide more", "");
    for (const m of answer.missing) {
      out.push(
        `- ${codeSpan(m.file)}: ${mdEscape(m.would_decide)}${m.command ? ` (${codeSpan(m.command)})` : ""}`,
      );
    }
    out.push("");
  }
  return out.join("\n");
}
