/**
 * @module report/markdown-escape — text from input made inert in Markdown (CommonMark and GFM, as
 * GitHub, GitLab and ticket systems render it): punctuation that opens emphasis, links, images,
 * code, HTML, entities, tables or strikethrough is backslash-escaped; a line that would open a
 * block (heading, quote, list, thematic break, setext underline, indented code) is escaped at its
 * start; code spans and fences are longer than any backtick run inside them. Written by hand: the
 * registry's Markdown escapers cover inline punctuation only, not line starts or fences.
 */
import { terminalSafe } from "./terminal-safe.ts";

/**
 * Inline punctuation that can start a construct: emphasis, code, links and images, HTML, entities,
 * tables, strikethrough, math (`$`, GitHub).
 */
const INLINE = /[\\`*_[\]<>|&~$]/g;

/** A line that would open a block: `#`, `>`, `-` `+` `*` `=` `_` `~` `|`, `1.` `1)`. */
const BLOCK_START = /^(?:[#>+\-*=_~|]|\d{1,9}[.)])/;

/**
 * `s` as inline Markdown text: each construct's punctuation escaped, newlines shown as `\n`
 * (inline text is one line), control characters shown visibly.
 *
 * @example
 * mdInline("[x](javascript:alert(1))") // "\\[x\\](javascript:alert(1))"
 */
export function mdInline(s: string): string {
  return terminalSafe(s).replace(INLINE, "\\$&");
}

/**
 * A line that would open a block keeps being text: its leading whitespace is dropped (four spaces
 * would open indented code) and its first character escaped.
 */
export function mdLineStart(line: string): string {
  const t = line.replace(/^[ \t]+/, "");
  const m = BLOCK_START.exec(t);
  if (!m) return t;
  // `1.` escapes its dot, every other opener its first character
  return /^\d/.test(m[0]) ? `${m[0].slice(0, -1)}\\${t.slice(m[0].length - 1)}` : `\\${t}`;
}

/**
 * Prose from input, kept line by line: every line escaped inline and at its start, lines joined by
 * a hard break (`\` at the end), blank lines kept as paragraph breaks.
 */
export function mdLines(s: string): string {
  const paragraphs = terminalSafe(s, { keepLayout: true })
    .replace(/\t/g, " ")
    .split(/\n[ \t]*\n/)
    .map((p) =>
      p
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => mdLineStart(l.replace(INLINE, "\\$&")))
        .join("\\\n"),
    )
    .filter((p) => p !== "");
  return paragraphs.join("\n\n");
}

/** A table cell: inline text with no pipe left to end the cell. */
export function mdCell(s: string): string {
  return mdInline(s);
}

/** The longest run of backticks in `s`. */
export function longestBacktickRun(s: string): number {
  let longest = 0;
  for (const m of s.matchAll(/`+/g)) longest = Math.max(longest, m[0].length);
  return longest;
}

/**
 * An inline code span that holds any text: newlines become spaces, control characters are shown,
 * the fence is longer than any backtick run, padded with a space when the text starts or ends
 * with a backtick or a space. `inTable`: pipes escaped (GFM ends a cell at a pipe even in code).
 */
export function codeSpan(s: string, inTable = false): string {
  let flat = terminalSafe(s.replace(/\s*\n\s*/g, " "), { keepLayout: false });
  if (inTable) flat = flat.replace(/\|/g, "\\|");
  const run = longestBacktickRun(flat);
  if (run === 0 && flat.trim() !== "") return `\`${flat}\``;
  const fence = "`".repeat(run + 1);
  return `${fence} ${flat} ${fence}`;
}

/**
 * A fenced code block that holds any text: control characters shown (tab and newline kept), the
 * fence longer than any backtick run in the text; `lang` is podpath's own word.
 */
export function codeFence(text: string, lang = ""): string {
  const body = terminalSafe(text, { keepLayout: true }).replace(/\n$/, "");
  const fence = "`".repeat(Math.max(3, longestBacktickRun(body) + 1));
  return `${fence}${lang}\n${body}\n${fence}`;
}

/** Text inside raw HTML in Markdown (a `<summary>`), where backslash escapes do not apply. */
export function mdHtmlText(s: string): string {
  return terminalSafe(s).replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );
}
