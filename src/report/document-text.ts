/**
 * @module report/document-text — a document (report/document) as text a person reads top to
 * bottom: the title in bold, each section's title in bold with its content indented two columns,
 * prose and list items wrapped to the width (100 in files and pipes, the terminal's on a TTY; a
 * code span is never split), code blocks as they are, paths and findings as report/text draws
 * them (wrapped, never cut). Control characters and bidi overrides from input are shown visibly
 * (report/terminal-safe): names and commands stay one line, prose and code keep their lines.
 */
import type { Block, Document, ListItem, Span, Text } from "./document.ts";
import { plainOf, spansOf } from "./document.ts";
import { guardCommand } from "./shell-quote.ts";
import { terminalSafeDeep } from "./terminal-safe.ts";
import { type Paint, PLAIN, renderFinding, renderPath } from "./text.ts";
import { PIPE_WIDTH } from "./wrap.ts";

/** How text is drawn: its colours and its width. */
interface Pen {
  readonly p: Paint;
  readonly width: number;
}

type Segment = { readonly text: string; readonly paint: (s: string) => string };
type Word = Segment[];

function painter(s: Span, p: Paint): (t: string) => string {
  let f = (t: string) => t;
  if (s.tone === "good") f = p.green;
  else if (s.tone === "bad") f = p.red;
  else if (s.tone === "warn") f = p.yellow;
  else if (s.tone === "dim") f = p.dim;
  if (s.strong) {
    const g = f;
    f = (t) => p.bold(g(t));
  }
  return f;
}

/** Words of a text, each a run of painted segments; "\n" forces a line break. */
function words(t: Text, p: Paint): (Word | "\n")[] {
  const out: (Word | "\n")[] = [];
  let current: Word = [];
  const end = () => {
    if (current.length > 0) out.push(current);
    current = [];
  };
  for (const s of spansOf(t)) {
    const paint = painter(s, p);
    if (s.code) {
      current.push({ text: s.text.replace(/\s*\n\s*/g, " "), paint });
      continue;
    }
    for (const part of s.text.split(/(\s+)/)) {
      if (part === "") continue;
      if (/^\s+$/.test(part)) {
        end();
        for (const _ of part.matchAll(/\n/g)) out.push("\n");
      } else current.push({ text: part, paint });
    }
  }
  end();
  return out;
}

const wordLength = (w: Word) => w.reduce((n, s) => n + s.text.length, 0);
const paintWord = (w: Word) => w.map((s) => s.paint(s.text)).join("");

/** Fills lines to the width: the first line starts with `first`, the others with `rest`. */
function fill(t: Text, first: string, rest: string, pen: Pen, out: string[]): void {
  let prefix = first;
  let line = "";
  let length = 0;
  const flush = () => {
    out.push(prefix + line);
    prefix = rest;
    line = "";
    length = 0;
  };
  for (const w of words(t, pen.p)) {
    if (w === "\n") {
      flush();
      continue;
    }
    const n = wordLength(w);
    if (length > 0 && prefix.length + length + 1 + n > pen.width) flush();
    line = length > 0 ? `${line} ${paintWord(w)}` : paintWord(w);
    length += (length > 0 ? 1 : 0) + n;
  }
  if (length > 0 || prefix === first) flush();
}

function inline(t: Text, p: Paint): string {
  return spansOf(t)
    .map((s) => painter(s, p)(s.text))
    .join("");
}

const SPACED_BEFORE = new Set<Block["kind"]>([
  "section",
  "heading",
  "path",
  "finding",
  "table",
  "code",
]);
const SPACED_AFTER = new Set<Block["kind"]>(["section", "path", "finding", "table", "code"]);

function listText(
  items: readonly ListItem[],
  bullets: boolean,
  indent: string,
  pen: Pen,
  out: string[],
) {
  for (const item of items) {
    fill(item.text, `${indent}${bullets ? "- " : "  "}`, `${indent}  `, pen, out);
    if (item.items) listText(item.items, bullets, `${indent}  `, pen, out);
  }
}

function indented(text: string, indent: string): string[] {
  return text.split("\n").map((l) => (l === "" ? "" : indent + l));
}

function blockText(b: Block, indent: string, pen: Pen, out: string[]): void {
  const { p } = pen;
  switch (b.kind) {
    case "heading":
      out.push(indent + p.bold(b.text));
      return;
    case "paragraph":
      fill(b.text, indent, indent, pen, out);
      return;
    case "list":
      listText(b.items, b.bullets !== false, indent, pen, out);
      return;
    case "fields": {
      const width = Math.max(0, ...b.rows.map((r) => r.key.length)) + 2;
      for (const r of b.rows) out.push(`${indent}${r.key.padEnd(width)}${inline(r.value, p)}`);
      return;
    }
    case "table": {
      const rows = [b.columns.map((c) => c as Text), ...b.rows];
      const widths = b.columns.map((_, i) =>
        Math.max(...rows.map((r) => plainOf(r[i] ?? "").length)),
      );
      rows.forEach((r, ri) => {
        const cells = b.columns.map((_, i) => {
          const t = r[i] ?? "";
          const shown = ri === 0 ? p.bold(plainOf(t)) : inline(t, p);
          const pad = i === b.columns.length - 1 ? 0 : widths[i]! - plainOf(t).length;
          return shown + " ".repeat(Math.max(0, pad));
        });
        out.push(`${indent}${cells.join("  ")}`.trimEnd());
      });
      return;
    }
    case "code":
      out.push(...indented(b.text.replace(/\n$/, ""), indent));
      return;
    case "path":
      out.push(...indented(renderPath(b.path, p, pen.width - indent.length), indent));
      return;
    case "finding":
      out.push(
        ...indented(renderFinding(b.finding, p, { width: pen.width - indent.length }), indent),
      );
      return;
    case "section":
      out.push(indent + p.bold(b.title));
      blocksText(b.blocks, `${indent}  `, pen, out);
      return;
  }
}

function blocksText(blocks: readonly Block[], indent: string, pen: Pen, out: string[]): void {
  let prev: Block | undefined;
  for (const b of blocks) {
    // a heading keeps what it heads right under it
    const spaced = SPACED_AFTER.has(prev?.kind ?? "heading") || SPACED_BEFORE.has(b.kind);
    if (prev && prev.kind !== "heading" && spaced) out.push("");
    blockText(b, indent, pen, out);
    prev = b;
  }
}

/**
 * The document as text, one trailing newline; `p` colours it (PLAIN: no colour); prose wraps to
 * `width` (report/wrap textWidth).
 */
export function renderDocumentText(input: Document, p: Paint = PLAIN, width = PIPE_WIDTH): string {
  const doc = terminalSafeDeep(input, { command: guardCommand });
  const out: string[] = [];
  if (doc.title !== undefined) {
    out.push(p.bold(doc.title));
    if (doc.blocks.length > 0) out.push("");
  }
  blocksText(doc.blocks, "", { p, width }, out);
  return `${out.join("\n")}\n`;
}
