/**
 * @module report/text — the form a person reads top to bottom. First the summary (report/summary):
 * the verdict in one line (whole, for `head -1`), the cause in one sentence, what follows from it,
 * the fix to try first, and the traced path the verdict is about. Then the details: the findings
 * by cause (report/causality), each consequence under the cause it follows from, evidence already
 * shown in the group cited once, long lists of names summarised; the other paths; what would
 * decide more. Text is wrapped to a width (report/wrap) and never cut. Control characters and
 * bidi overrides from input are shown visibly (report/terminal-safe), names and commands stay one
 * line each.
 */
import type { Answer, PathView, Verdict } from "../model/answer.ts";
import type { Finding, FindingId } from "../model/types.ts";
import { VERDICT_LABEL } from "../model/verdict.ts";
import type { CauseGroup } from "./causality.ts";
import { nodesOf } from "./causality.ts";
import { summariseLists } from "./list-summary.ts";
import { guardCommand } from "./shell-quote.ts";
import { lowerFirst, type Summary, summariseAnswer } from "./summary.ts";
import { terminalSafeDeep } from "./terminal-safe.ts";
import { fillWords, type PaintedWord, PIPE_WIDTH, paintedWords, wrap } from "./wrap.ts";

export { wrap };

/** Colour functions; pass identity functions for plain text. */
export interface Paint {
  readonly red: (s: string) => string;
  readonly yellow: (s: string) => string;
  readonly cyan: (s: string) => string;
  readonly green: (s: string) => string;
  readonly bold: (s: string) => string;
  readonly dim: (s: string) => string;
}

const id = (s: string) => s;
export const PLAIN: Paint = { red: id, yellow: id, cyan: id, green: id, bold: id, dim: id };

function severityLabel(f: Finding, p: Paint): string {
  if (f.severity === "error") return p.red(p.bold("ERROR  "));
  if (f.severity === "warning") return p.yellow(p.bold("WARN   "));
  return p.cyan("INFO   ");
}

/** What a finding's rendering shares with the findings rendered before it. */
export interface FindingContext {
  readonly width?: number;
  /** The finding it follows from (report/causality). */
  readonly causedBy?: FindingId;
  /** `file:line` of evidence already shown in the group: cited again without its text. */
  readonly shownEvidence?: Set<string>;
  /** Explanation lines already shown, and under which finding: said once. */
  readonly shownLines?: Map<string, FindingId>;
}

/** Explanation lines at least this long are said once per answer. */
const REPEATABLE = 40;

/** The explanation with lines already shown replaced by a pointer, and long lists summarised. */
function explanationText(f: Finding, shown: Map<string, FindingId> | undefined): string {
  const nodes = nodesOf(f);
  const pool = f.subject.startsWith("pool/") ? f.subject.slice(5) : undefined;
  const text = summariseLists(f.explanation, {
    ...(nodes.length > 0 ? { noun: "nodes" } : {}),
    ...(pool ? { pool } : {}),
  });
  if (!shown) return text;
  const out: string[] = [];
  let run: { n: number; under: FindingId } | undefined;
  const flush = () => {
    if (run) out.push(`(${run.n} line${run.n === 1 ? "" : "s"} as shown above under ${run.under})`);
    run = undefined;
  };
  for (const line of text.split("\n")) {
    const under = line.length >= REPEATABLE ? shown.get(line) : undefined;
    if (under !== undefined) {
      if (run?.under !== under) flush();
      run = { n: (run?.n ?? 0) + 1, under };
      continue;
    }
    flush();
    out.push(line);
    if (line.length >= REPEATABLE) shown.set(line, f.id);
  }
  flush();
  return out.join("\n");
}

/**
 * One finding: severity and title, id and subject (and what it follows from), explanation,
 * evidence (wrapped under its text, never cut), next steps.
 */
export function renderFinding(f: Finding, p: Paint, ctx: FindingContext = {}): string {
  const width = ctx.width ?? PIPE_WIDTH;
  const lines = fillWords(paintedWords(f.title, p.bold), severityLabel(f, p), "       ", width);
  const about = `${f.id} · ${f.subject}${ctx.causedBy ? ` · follows from ${ctx.causedBy}` : ""}`;
  lines.push(...fillWords(paintedWords(about, p.dim), "       ", "         ", width));
  lines.push(wrap(explanationText(f, ctx.shownLines), "       ", width));
  const fresh = f.evidence.filter((e) => !ctx.shownEvidence?.has(`${e.file}:${e.line}`));
  const again = f.evidence.filter((e) => ctx.shownEvidence?.has(`${e.file}:${e.line}`));
  if (f.evidence.length > 0) {
    lines.push("       evidence:");
    const at = (e: { file: string; line: number }) => `${e.file}:${e.line}`;
    const atWidth = Math.min(52, Math.max(0, ...fresh.map((e) => at(e).length)));
    // the text hangs under itself; a long file:line pushes it to a fixed indent instead
    const hang = width - (9 + atWidth + 2) >= 40 ? " ".repeat(9 + atWidth + 2) : " ".repeat(11);
    for (const e of fresh) {
      const first = `         ${at(e).padEnd(atWidth)}  `;
      const text = e.text === undefined ? [] : paintedWords(e.text.trim(), p.dim);
      lines.push(...fillWords(text, first, hang, width).map((l) => l.trimEnd()));
      ctx.shownEvidence?.add(at(e));
    }
    if (again.length > 0) {
      lines.push(
        ...fillWords(
          paintedWords(`${again.map(at).join(", ")} (shown above)`, p.dim),
          "         also ",
          "              ",
          width,
        ),
      );
    }
  }
  if (f.next.length > 0) {
    lines.push("       next:");
    // commands stay whole on one line, to be copied
    for (const n of f.next) lines.push(`         ${n}`);
  }
  return lines.join("\n");
}

function hopMark(h: PathView["hops"][number], p: Paint): string {
  if (h.state === "stops") return p.red("✗");
  if (h.state === "changes") return p.yellow("↺");
  if (h.state === "unknown") return "?";
  return p.green("│");
}

/**
 * One path as a column of hops joined by arrows; the source address shown where it changes; a
 * hop wider than `width` goes on under its label.
 */
export function renderPath(path: PathView, p: Paint, width = PIPE_WIDTH): string {
  const head = `${path.from} → ${path.to}${path.port === undefined ? "" : `:${path.port}`}${
    path.protocol ? ` (${path.protocol})` : ""
  }`;
  const lines = [p.bold(head)];
  const atWidth = Math.min(34, Math.max(...path.hops.map((h) => h.at.length)));
  path.hops.forEach((h, i) => {
    const words: PaintedWord[] = [
      ...paintedWords(h.label),
      ...(h.source ? [{ text: ` src ${h.source}` }] : []),
      ...(h.evidence ? [{ text: ` [${h.evidence.file}:${h.evidence.line}]`, paint: p.dim }] : []),
    ];
    const first = `  ${hopMark(h, p)} ${h.at.padEnd(atWidth)}  `;
    const last = i === path.hops.length - 1 || h.state === "stops";
    const rest = `  ${last ? " " : p.dim("·")} ${" ".repeat(atWidth)}  `;
    // measured on plain prefixes: the marks are one column each
    const plainFirst = `  x ${h.at.padEnd(atWidth)}  `;
    const plainRest = `  x ${" ".repeat(atWidth)}  `;
    fillWords(words, plainFirst, plainRest, width).forEach((l, j) => {
      const text = l.slice(j === 0 ? plainFirst.length : plainRest.length);
      lines.push(j === 0 ? first + text : rest + text.trimStart());
    });
    if (!last) lines.push(`  ${p.dim("↓")}`);
  });
  lines.push(...fillWords(paintedWords(path.verdict), `  ${p.bold("⇒")} `, "    ", width));
  return lines.join("\n");
}

/**
 * The verdict as one line: `BROKEN  pod/default/app → 10.20.30.40:5432: <summary>
 * (masq/exempt-destination)`.
 */
export function verdictLine(v: Verdict): string {
  const subject = v.subject ? `${v.subject}: ` : "";
  return `${VERDICT_LABEL[v.state]}  ${subject}${v.summary}${v.finding ? ` (${v.finding})` : ""}`;
}

function paintVerdict(v: Verdict, p: Paint): string {
  const line = verdictLine(v);
  const label = VERDICT_LABEL[v.state];
  const color = v.state === "broken" ? p.red : v.state === "undecided" ? p.yellow : p.green;
  return `${color(p.bold(label))}${line.slice(label.length)}`;
}

/** The summary's lines: verdict (one line, whole), cause, then, fix, and the verdict's path. */
function summaryText(s: Summary, p: Paint, width: number): string[] {
  const out = [paintVerdict(s.verdict, p)];
  const row = (key: string, text: string) =>
    out.push(...fillWords(paintedWords(text), p.bold(key.padEnd(8)), "        ", width));
  if (s.because) row("cause", s.because);
  if (s.consequences.length > 0) row("then", s.consequences.map(lowerFirst).join("; "));
  if (s.fix) row("fix", s.fix);
  if (s.command) out.push(`${p.bold((s.fix ? "" : "fix").padEnd(8))}$ ${s.command}`);
  if (s.nextStep) out.push(`${p.bold("next".padEnd(8))}$ ${s.nextStep}`);
  if (s.path) out.push("", renderPath(s.path, p, width));
  return out;
}

function groupText(
  g: CauseGroup,
  p: Paint,
  width: number,
  shownLines: Map<string, FindingId>,
  shownEvidence: Set<string>,
  depth: number,
  causedBy: FindingId | undefined,
  out: string[],
): void {
  const indent = "   ".repeat(depth);
  const text = renderFinding(g.finding, p, {
    width: width - indent.length,
    shownLines,
    shownEvidence,
    ...(causedBy ? { causedBy } : {}),
  });
  const lines = text.split("\n").map((l) => (l === "" ? "" : indent + l));
  if (depth > 0) lines[0] = `${"   ".repeat(depth - 1)}↳  ${lines[0]!.slice(indent.length)}`;
  out.push("", ...lines);
  for (const c of g.consequences) {
    groupText(c, p, width, shownLines, shownEvidence, depth + 1, g.finding.id, out);
  }
}

/**
 * The answer as text; `width` is the terminal's (report/wrap textWidth), 100 in files and pipes.
 * Every string of the answer is made terminal-safe first, so nothing it carries drives the terminal.
 */
export function renderText(input: Answer, p: Paint = PLAIN, width = PIPE_WIDTH): string {
  const answer = terminalSafeDeep(input, { command: guardCommand });
  const s = summariseAnswer(answer);
  const out: string[] = summaryText(s, p, width);
  const counts = ["error", "warning", "info"]
    .map((sev) => [sev, answer.findings.filter((f) => f.severity === sev).length] as const)
    .filter(([, n]) => n > 0)
    .map(([sev, n]) => `${n} ${sev}${n === 1 ? "" : "s"}`);
  const said = counts.length
    ? `${counts.join(", ")}, each consequence under its cause`
    : "no findings";
  const heading: PaintedWord[] = [
    { text: "podpath", paint: p.bold },
    { text: answer.snapshot ? answer.question : `${answer.question}:`, paint: p.bold },
    ...paintedWords(`${answer.snapshot ? `${answer.snapshot}: ` : ""}${said}`),
  ];
  out.push("", ...fillWords(heading, "", "  ", width));
  const shownLines = new Map<string, FindingId>();
  for (const g of s.groups) groupText(g, p, width, shownLines, new Set(), 0, undefined, out);
  const others = answer.paths.filter((path) => path !== s.path);
  if (others.length > 0) {
    out.push("", p.bold(s.path ? "Other paths" : "Paths"));
    for (const path of others) out.push("", renderPath(path, p, width));
  }
  if (answer.missing.length > 0) {
    out.push("", p.bold("Evidence that would decide more"));
    for (const m of answer.missing) {
      out.push(wrap(`- ${m.file}: ${m.would_decide}`, "  ", width));
      if (m.command) out.push(`      $ ${m.command}`);
    }
  }
  const problems = answer.diagnostics.filter((d) => d.severity !== "info");
  if (problems.length > 0) {
    out.push("", p.bold("Problems reading the snapshot (the rest was used)"));
    for (const d of problems.slice(0, 50)) {
      const at = d.source ? `${d.source.file}:${d.source.line}: ` : "";
      out.push(wrap(`- ${at}${d.message}`, "  ", width));
    }
    if (problems.length > 50) out.push(`  … and ${problems.length - 50} more (-o json lists all)`);
  }
  return `${out.join("\n")}\n`;
}
