/**
 * @module report/html — one self-contained HTML page (inline CSS, no script, no network): the
 * verdict first, the findings with their evidence in `<details>`, and every traced path as an SVG
 * diagram showing where the source address changes and where the path stops. Every interpolation
 * goes through the `html` tag, which escapes it; only this module's own SVG is marked raw.
 */
import type { Answer, PathHop, PathView, Verdict } from "../model/answer.ts";
import type { Finding } from "../model/types.ts";
import { VERDICT_LABEL } from "../model/verdict.ts";
import type { CauseGroup } from "./causality.ts";
import { guardCommand } from "./shell-quote.ts";
import { type Summary, summariseAnswer } from "./summary.ts";
import { terminalSafeDeep } from "./terminal-safe.ts";

/** Text that is already safe HTML (built by {@link html} or {@link raw}). */
export class SafeHtml {
  readonly value: string;
  constructor(value: string) {
    this.value = value;
  }
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Part = SafeHtml | string | number | undefined | null | false | readonly Part[];

function render(p: Part): string {
  if (p === undefined || p === null || p === false) return "";
  if (p instanceof SafeHtml) return p.value;
  if (Array.isArray(p)) return p.map(render).join("");
  return escapeHtml(String(p));
}

/** Escapes every interpolated value; arrays are joined; SafeHtml passes through. */
export function html(strings: TemplateStringsArray, ...values: Part[]): SafeHtml {
  let out = strings[0] ?? "";
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? "");
  });
  return new SafeHtml(out);
}

/** Marks podpath's own generated markup (SVG, CSS) as safe. Never pass input through it. */
export function raw(s: string): SafeHtml {
  return new SafeHtml(s);
}

const STATE_COLOR: Record<PathHop["state"], string> = {
  ok: "#2f7d32",
  changes: "#b26a00",
  stops: "#c62828",
  unknown: "#6b6b6b",
};

const BOX_W = 190;
const BOX_H = 54;
const GAP = 46;

/** A path as boxes left to right, the source address under each, arrows between. */
export function pathSvg(path: PathView): SafeHtml {
  const n = path.hops.length;
  const width = n * BOX_W + (n - 1) * GAP + 20;
  const height = BOX_H + 50;
  const parts: string[] = [];
  path.hops.forEach((h, i) => {
    const x = 10 + i * (BOX_W + GAP);
    const color = STATE_COLOR[h.state];
    const label = h.at.length > 28 ? `${h.at.slice(0, 27)}…` : h.at;
    parts.push(
      html`<g><title>${h.label}</title><rect x="${x}" y="10" width="${BOX_W}" height="${BOX_H}" rx="6" fill="#fff" stroke="${color}" stroke-width="2"/>`
        .value +
        html`<text x="${x + BOX_W / 2}" y="32" text-anchor="middle" font-size="12">${label}</text>`
          .value +
        html`<text x="${x + BOX_W / 2}" y="50" text-anchor="middle" font-size="11" fill="${color}">${
          h.state === "stops"
            ? "stops here"
            : h.state === "changes"
              ? "source rewritten"
              : h.state === "unknown"
                ? "not decided"
                : "passes"
        }</text>`.value +
        (h.source
          ? html`<text x="${x + BOX_W / 2}" y="${BOX_H + 30}" text-anchor="middle" font-size="11" font-family="monospace">src ${h.source}</text>`
              .value
          : "") +
        "</g>",
    );
    if (i < n - 1) {
      const x1 = x + BOX_W + 4;
      const x2 = x + BOX_W + GAP - 6;
      const y = 10 + BOX_H / 2;
      parts.push(
        html`<path d="M ${x1} ${y} C ${x1 + 15} ${y}, ${x2 - 15} ${y}, ${x2} ${y}" stroke="#555" fill="none" stroke-width="1.5" marker-end="url(#arrow)"/>`
          .value,
      );
    }
  });
  return raw(
    `<svg xmlns="http://www.w3.org/2000/svg" role="img" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">` +
      `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>` +
      parts.join("") +
      "</svg>",
  );
}

/** One traced path: its heading, the SVG diagram, its verdict, and its hops folded in a table. */
export function pathHtml(p: PathView): SafeHtml {
  return html`<div class="path"><h3>${p.from} → ${p.to}${p.port === undefined ? "" : `:${p.port}`}${p.protocol ? ` (${p.protocol})` : ""}</h3>${pathSvg(p)}<p>${p.verdict}</p>
<details><summary>Hops</summary><table><tr><th>where</th><th>what</th><th>source</th><th>evidence</th></tr>${p.hops.map(
    (h) =>
      html`<tr><td>${h.at}</td><td>${h.label}</td><td><code>${h.source ?? ""}</code></td><td>${h.evidence ? html`<code>${h.evidence.file}:${h.evidence.line}</code>` : ""}</td></tr>`,
  )}</table></details></div>`;
}

/**
 * One finding as a section: severity and title, id and subject (and the finding it follows from,
 * indented under it), explanation, evidence, next.
 */
export function findingHtml(f: Finding, causedBy?: string): SafeHtml {
  return html`<section class="finding ${f.severity}${causedBy ? " consequence" : ""}">
<h3><span class="sev">${f.severity.toUpperCase()}</span> ${f.title}</h3>
<p class="meta"><code>${f.id}</code> · ${f.subject}${causedBy ? html` · follows from <code>${causedBy}</code>` : ""}</p>
<p class="expl">${f.explanation}</p>
<details open><summary>Evidence (${f.evidence.length})</summary><ul>${f.evidence.map(
    (e) =>
      html`<li><code>${e.file}:${e.line}</code>${e.text ? html` <code class="line">${e.text.trim()}</code>` : ""}</li>`,
  )}</ul></details>
${f.next.length ? html`<details><summary>Next</summary><ul>${f.next.map((n) => html`<li><code>${n}</code></li>`)}</ul></details>` : ""}
</section>`;
}

export const CSS = `body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#222}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}h3{font-size:1rem;margin:.2rem 0}
.finding{border-left:4px solid #999;padding:.4rem .8rem;margin:1rem 0;background:#fafafa}
.finding.consequence{margin-left:1.5rem}.finding.error{border-color:#c62828}.finding.warning{border-color:#b26a00}.finding.info{border-color:#1565c0}
.expl{white-space:pre-line}.sev{font-size:.75rem;font-weight:700;letter-spacing:.05em}.meta{color:#555;margin:.1rem 0}
code{font-family:ui-monospace,monospace;font-size:.85em}code.line{color:#444;background:#eee;padding:0 .3em}
.verdict{font-size:1.05rem;padding:.5rem .8rem;border-left:6px solid #999;background:#fafafa}
.verdict.broken{border-color:#c62828}.verdict.undecided{border-color:#b26a00}.verdict.healthy{border-color:#2f7d32}
.path{overflow-x:auto;margin:1rem 0}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
table{display:block;max-width:100%;overflow-x:auto}body{overflow-wrap:break-word}
.summary{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;margin:.6rem 0}.summary dt{font-weight:bold}.summary dd{margin:0}`;

/** The verdict as the page's first line. */
function verdictHtml(v: Verdict): SafeHtml {
  return html`<p class="verdict ${v.state}"><strong>${VERDICT_LABEL[v.state]}</strong> ${
    v.subject ? `${v.subject}: ` : ""
  }${v.summary}${v.finding ? html` (<code>${v.finding}</code>)` : ""}</p>`;
}

/** Under the verdict: the cause in one sentence, what follows from it, the fix to try first. */
function summaryHtml(s: Summary): SafeHtml | string {
  const rows: [string, SafeHtml | string][] = [];
  if (s.because) rows.push(["cause", s.because]);
  if (s.consequences.length > 0) rows.push(["then", s.consequences.join("; ")]);
  if (s.fix || s.command) {
    rows.push([
      "fix",
      html`${s.fix ?? ""}${s.command ? html`${s.fix ? html`<br>` : ""}<code>$ ${s.command}</code>` : ""}`,
    ]);
  } else if (s.nextStep) rows.push(["next", html`<code>$ ${s.nextStep}</code>`]);
  if (rows.length === 0) return "";
  return html`<dl class="summary">${rows.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`;
}

/** A cause group's findings, cause first, each with the finding it follows from. */
function groupHtml(g: CauseGroup, causedBy?: string): SafeHtml[] {
  return [
    findingHtml(g.finding, causedBy),
    ...g.consequences.flatMap((c) => groupHtml(c, g.finding.id)),
  ];
}

/**
 * diagnose as one HTML page: the verdict (restated from its root cause, report/summary), the cause,
 * what follows from it and the fix to try first, the verdict's path, the findings by cause (each
 * consequence indented under its cause), the other paths, what would decide more.
 */
export function renderHtml(input: Answer): string {
  // control characters shown visibly and unsafe commands refused, as in text and Markdown
  const answer = terminalSafeDeep(input, { command: guardCommand });
  const s = summariseAnswer(answer);
  const { verdict, groups } = s;
  const findings = answer.findings;
  const others = answer.paths.filter((p) => p !== s.path);
  const page = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>podpath ${answer.question}${answer.snapshot ? `: ${answer.snapshot}` : ""}</title>
<style>${raw(CSS)}</style></head><body>
${verdictHtml(verdict)}
<h1>podpath ${answer.question}${answer.snapshot ? html` <code>${answer.snapshot}</code>` : ""}</h1>
<p>${findings.length} finding${findings.length === 1 ? "" : "s"}: ${["error", "warning", "info"]
    .map((s) => [s, findings.filter((f) => f.severity === s).length] as const)
    .map(([s, k]) => `${k} ${s}${k === 1 ? "" : "s"}`)
    .join(", ")}</p>
${summaryHtml(s)}
${s.path ? html`<h2>Path</h2>${pathHtml(s.path)}` : ""}
<h2>Findings</h2>${findings.length ? groups.flatMap((g) => groupHtml(g)) : html`<p>None.</p>`}
${others.length ? html`<h2>${s.path ? "Other paths" : "Paths"}</h2>${others.map(pathHtml)}` : ""}
${
  answer.missing.length
    ? html`<h2>Evidence that would decide more</h2><ul>${answer.missing.map(
        (m) =>
          html`<li><code>${m.file}</code>: ${m.would_decide}${m.command ? html`<br><code>$ ${m.command}</code>` : ""}</li>`,
      )}</ul>`
    : ""
}
${
  answer.diagnostics.some((d) => d.severity !== "info")
    ? html`<h2>Problems reading the snapshot</h2><ul>${answer.diagnostics
        .filter((d) => d.severity !== "info")
        .map(
          (d) =>
            html`<li>${d.source ? html`<code>${d.source.file}:${d.source.line}</code> ` : ""}${d.message}</li>`,
        )}</ul>`
    : ""
}
</body></html>
`;
  return page.value;
}
