/**
 * @module report/document-markdown — a document (report/document) as Markdown ready to paste
 * into a ticket: the title as `#`, sections as `##` (deeper sections one level more, folded ones
 * as `<details>`), tables with a `|---|` row. Every text that may hold input goes through
 * mdEscape; a code span or block is fenced with more backticks than any run inside it.
 */
import type { Block, Document, ListItem, Text } from "./document.ts";
import { spansOf } from "./document.ts";
import { findingMarkdown, mdEscape, pathTable } from "./markdown.ts";

/** The longest run of backticks in `s`. */
function longestBacktickRun(s: string): number {
  return Math.max(0, ...[...s.matchAll(/`+/g)].map((m) => m[0].length));
}

/** An inline code span that holds any text: a fence longer than its backtick runs. */
export function codeSpan(s: string): string {
  const flat = s.replace(/\s*\n\s*/g, " ");
  const run = longestBacktickRun(flat);
  if (run === 0) return `\`${flat}\``;
  const fence = "`".repeat(run + 1);
  return `${fence} ${flat} ${fence}`;
}

/** A fenced code block that holds any text. */
export function codeFence(text: string, lang = ""): string {
  const fence = "`".repeat(Math.max(3, longestBacktickRun(text) + 1));
  return `${fence}${lang}\n${text.replace(/\n$/, "")}\n${fence}`;
}

function inline(t: Text, inTable = false): string {
  return spansOf(t)
    .map((s) => {
      if (s.code) {
        const c = codeSpan(s.text);
        // GFM: a pipe inside a table cell ends the cell, even in a code span
        return inTable ? c.replace(/\|/g, "\\|") : c;
      }
      const e = mdEscape(s.text);
      return s.strong ? `**${e}**` : e;
    })
    .join("");
}

/**
 * A paragraph that would open another block (`# x` a heading, `- x` `+ x` `> x` a list or quote,
 * `1. x` a numbered list) has that first character escaped: it stays a paragraph.
 */
function blockStart(md: string): string {
  const numbered = /^(\d+)([.)])(\s)/.exec(md);
  if (numbered) return `${numbered[1]}\\${md.slice(numbered[1]!.length)}`;
  return /^([#+>=]|-(\s|$)|\*\s)/.test(md) ? `\\${md}` : md;
}

function listMarkdown(items: readonly ListItem[], indent: string): string[] {
  return items.flatMap((i) => [
    `${indent}- ${inline(i.text)}`,
    ...(i.items ? listMarkdown(i.items, `${indent}  `) : []),
  ]);
}

function blockMarkdown(b: Block, level: number): string {
  switch (b.kind) {
    case "heading":
      return `${"#".repeat(Math.min(6, level))} ${mdEscape(b.text)}`;
    case "paragraph":
      return blockStart(inline(b.text));
    case "list":
      return listMarkdown(b.items, "").join("\n");
    case "fields":
      return b.rows
        .map((r) => `- ${r.key === "" ? "" : `${mdEscape(r.key)}: `}${inline(r.value)}`)
        .join("\n");
    case "table": {
      const header = `|${b.columns.map((c) => (c === "" ? " " : ` ${c.replace(/\|/g, "\\|")} `)).join("|")}|`;
      const rule = `|${b.columns.map(() => "---").join("|")}|`;
      const rows = b.rows.map(
        (r) => `|${b.columns.map((_, i) => ` ${inline(r[i] ?? "", true)} `).join("|")}|`,
      );
      return [header, rule, ...rows].join("\n");
    }
    case "code":
      return codeFence(b.text, b.lang);
    case "path":
      return pathTable(b.path);
    case "finding":
      return findingMarkdown(b.finding, level).join("\n").replace(/\n+$/, "");
    case "section": {
      const body = blocksMarkdown(b.blocks, level + 1);
      if (b.collapsed)
        return `<details><summary>${mdEscape(b.title)}</summary>\n\n${body}\n\n</details>`;
      const head = `${"#".repeat(Math.min(6, level))} ${mdEscape(b.title)}`;
      return body === "" ? head : `${head}\n\n${body}`;
    }
  }
}

function blocksMarkdown(blocks: readonly Block[], level: number): string {
  return blocks.map((b) => blockMarkdown(b, level)).join("\n\n");
}

/** The document as Markdown, one trailing newline. */
export function renderDocumentMarkdown(doc: Document): string {
  const parts: string[] = [];
  if (doc.title !== undefined) parts.push(`# ${mdEscape(doc.title)}`);
  if (doc.blocks.length > 0) parts.push(blocksMarkdown(doc.blocks, 2));
  return `${parts.join("\n\n")}\n`;
}
