/**
 * @module report/text — the form a person reads top to bottom: the verdict in one line, then the
 * most important finding first, each with its evidence (file:line and the line itself) and what to
 * do next, then the traced paths as small ASCII diagrams showing where the source address changes
 * and where the path stops.
 */
import type { Answer, PathView, Verdict } from "../model/answer.ts";
import { sortFindings } from "../model/answer.ts";
import type { Finding } from "../model/types.ts";
import { VERDICT_LABEL } from "../model/verdict.ts";

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

const WIDTH = 100;

/** Wraps prose at word boundaries to `width` columns, each line prefixed with `indent`. */
export function wrap(text: string, indent: string, width = WIDTH): string {
  const out: string[] = [];
  for (const para of text.split("\n")) {
    let line = "";
    for (const word of para.split(/\s+/).filter(Boolean)) {
      if (line && indent.length + line.length + 1 + word.length > width) {
        out.push(indent + line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    out.push(indent + line);
  }
  return out.join("\n");
}

function severityLabel(f: Finding, p: Paint): string {
  if (f.severity === "error") return p.red(p.bold("ERROR  "));
  if (f.severity === "warning") return p.yellow(p.bold("WARN   "));
  return p.cyan("INFO   ");
}

/** One finding: severity and title, id and subject, explanation, evidence, next steps. */
export function renderFinding(f: Finding, p: Paint): string {
  const lines = [
    `${severityLabel(f, p)}${p.bold(f.title)}`,
    `       ${p.dim(`${f.id} · ${f.subject}`)}`,
  ];
  lines.push(wrap(f.explanation, "       "));
  if (f.evidence.length > 0) {
    lines.push("       evidence:");
    const width = Math.min(52, Math.max(...f.evidence.map((e) => `${e.file}:${e.line}`.length)));
    for (const e of f.evidence) {
      const at = `${e.file}:${e.line}`.padEnd(width);
      const text =
        e.text === undefined ? "" : `  ${p.dim(truncate(e.text.trim(), WIDTH - width - 11))}`;
      lines.push(`         ${at}${text}`);
    }
  }
  if (f.next.length > 0) {
    lines.push("       next:");
    for (const n of f.next) lines.push(`         ${n}`);
  }
  return lines.join("\n");
}

function truncate(s: string, n: number): string {
  if (n < 8) return "";
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

/** One path as a column of hops joined by arrows; the source address shown where it changes. */
export function renderPath(path: PathView, p: Paint): string {
  const head = `${path.from} → ${path.to}${path.port === undefined ? "" : `:${path.port}`}${
    path.protocol ? ` (${path.protocol})` : ""
  }`;
  const lines = [p.bold(head)];
  const atWidth = Math.min(34, Math.max(...path.hops.map((h) => h.at.length)));
  path.hops.forEach((h, i) => {
    const mark =
      h.state === "stops"
        ? p.red("✗")
        : h.state === "changes"
          ? p.yellow("↺")
          : h.state === "unknown"
            ? "?"
            : p.green("│");
    const src = h.source ? `  src ${h.source}` : "";
    const ev = h.evidence ? p.dim(`  [${h.evidence.file}:${h.evidence.line}]`) : "";
    lines.push(`  ${mark} ${h.at.padEnd(atWidth)}  ${h.label}${src}${ev}`);
    if (i < path.hops.length - 1 && h.state !== "stops") lines.push(`  ${p.dim("↓")}`);
  });
  lines.push(`  ${p.bold("⇒")} ${path.verdict}`);
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

export function renderText(answer: Answer, p: Paint = PLAIN): string {
  const out: string[] = [paintVerdict(answer.verdict, p)];
  const findings = sortFindings(answer.findings);
  const counts = ["error", "warning", "info"]
    .map((s) => [s, findings.filter((f) => f.severity === s).length] as const)
    .filter(([, n]) => n > 0)
    .map(([s, n]) => `${n} ${s}${n === 1 ? "" : "s"}`);
  out.push(
    `${p.bold(`podpath ${answer.question}`)}${answer.snapshot ? ` ${answer.snapshot}` : ""}: ${
      counts.length ? counts.join(", ") : "no findings"
    }`,
  );
  for (const f of findings) out.push("", renderFinding(f, p));
  if (answer.paths.length > 0) {
    out.push("", p.bold("Paths"));
    for (const path of answer.paths) out.push("", renderPath(path, p));
  }
  if (answer.missing.length > 0) {
    out.push("", p.bold("Evidence that would decide more"));
    for (const m of answer.missing) {
      out.push(wrap(`${m.file}: ${m.would_decide}`, "  ").replace(/^ {2}/, "  - "));
      if (m.command) out.push(`      $ ${m.command}`);
    }
  }
  const problems = answer.diagnostics.filter((d) => d.severity !== "info");
  if (problems.length > 0) {
    out.push("", p.bold("Problems reading the snapshot (the rest was used)"));
    for (const d of problems.slice(0, 50)) {
      const at = d.source ? `${d.source.file}:${d.source.line}: ` : "";
      out.push(wrap(`${at}${d.message}`, "  ").replace(/^ {2}/, "  - "));
    }
    if (problems.length > 50) out.push(`  … and ${problems.length - 50} more (-o json lists all)`);
  }
  return `${out.join("\n")}\n`;
}
