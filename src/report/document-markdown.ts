/**
 * @module report/document-markdown — a document (report/document) as Markdown ready to paste
 * into a ticket: the title as `#`, sections as `##` (deeper sections one level more, folded ones
 * as `<details>`), tables with a `|---|` row. Control characters are shown visibly; every text
 * that may hold input is escaped inline and at its line start (report/markdown-escape); a code
 * span or block is fenced with more backticks than any run inside it.
 */
import type { Block, Document, ListItem, Text } from "./document.ts";
import { spansOf } from "./document.ts";
import { findingMarkdown, mdEscape, pathTable } from "./markdown.ts";
import { codeFence, codeSpan, mdHtmlText, mdLineStart } from "./markdown-escape.ts";
import { guardCommand } from "./shell-quote.ts";
import { terminalSafeDeep } from "./terminal-safe.ts";

export { codeFence, codeSpan };

function inline(t: Text, inTable = false): string {
  return spansOf(t)
    .map((s) => {
      // GFM: a pipe inside a table cell ends the cell, even in a code span
      if (s.code) return codeSpan(s.text, inTable);
      const e = mdEscape(s.text);
      return s.strong ? `**${e}**` : e;
    })
    .join("");
}

/**
 * A paragraph or list item that would open another block (`# x` a heading, `- x` `+ x` `> x` a
 * list or quote, `1. x` a numbered list, four spaces code) has that start escaped: it stays text.
 */
function blockStart(md: string): string {
  // `**` is podpath's own strong span; whatever input holds is escaped before this
  return md.startsWith("**") ? md : mdLineStart(md);
}

function listMarkdown(items: readonly ListItem[], indent: string): string[] {
  return items.flatMap((i) => [
    `${indent}- ${blockStart(inline(i.text))}`,
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
        .map(
          (r) =>
            `- ${r.key === "" ? blockStart(inline(r.value)) : `${mdEscape(r.key)}: ${inline(r.value)}`}`,
        )
        .join("\n");
    case "table": {
      const header = `|${b.columns.map((c) => (c === "" ? " " : ` ${mdEscape(c)} `)).join("|")}|`;
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
        // inside raw HTML backslash escapes do not hold: the title is HTML-escaped
        return `<details><summary>${mdHtmlText(b.title)}</summary>\n\n${body}\n\n</details>`;
      const head = `${"#".repeat(Math.min(6, level))} ${mdEscape(b.title)}`;
      return body === "" ? head : `${head}\n\n${body}`;
    }
  }
}

function blocksMarkdown(blocks: readonly Block[], level: number): string {
  return blocks.map((b) => blockMarkdown(b, level)).join("\n\n");
}

/**
 * The document as Markdown, one trailing newline; control characters anywhere in it are shown
 * visibly (report/terminal-safe) before any of it is drawn.
 */
export function renderDocumentMarkdown(input: Document): string {
  const doc = terminalSafeDeep(input, { command: guardCommand });
  const parts: string[] = [];
  if (doc.title !== undefined) parts.push(`# ${mdEscape(doc.title)}`);
  if (doc.blocks.length > 0) parts.push(blocksMarkdown(doc.blocks, 2));
  return `${parts.join("\n\n")}\n`;
}
