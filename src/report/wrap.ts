/**
 * @module report/wrap — text fitted to a width without losing a character: words fill lines up to
 * the width, the first line after one prefix and the rest after another (a hanging indent); a word
 * longer than the room left stands alone on its line, whole. Nothing is ever cut: a rule's
 * `-j RETURN` stays on the page whatever the width. Pure.
 */

/** The width when stdout is not a terminal (a file, a pipe), and the narrowest a terminal gets. */
export const PIPE_WIDTH = 100;
export const MIN_WIDTH = 40;

/** The width text is wrapped to: the terminal's columns on a TTY, PIPE_WIDTH otherwise. */
export function textWidth(isTTY: boolean, columns: number | undefined): number {
  if (!isTTY || columns === undefined || !Number.isFinite(columns)) return PIPE_WIDTH;
  return Math.max(MIN_WIDTH, Math.floor(columns));
}

/** A word and how it is painted (colour applied after the line is measured). */
export interface PaintedWord {
  readonly text: string;
  readonly paint?: (s: string) => string;
}

/** Plain words of a text, each painted with `paint`. */
export function paintedWords(text: string, paint?: (s: string) => string): PaintedWord[] {
  return text
    .split(/\s+/)
    .filter((w) => w.length > 0)
    .map((w) => (paint ? { text: w, paint } : { text: w }));
}

/** Columns a string takes on a terminal: its length without colour escapes. */
export function visibleLength(s: string): number {
  return s.replace(/\x1b\[[0-9;]*m/g, "").length;
}

/**
 * Lines of `words` filled to `width`: the first after `first`, the others after `rest` (prefixes
 * may be coloured: they are measured without their escapes).
 */
export function fillWords(
  words: readonly PaintedWord[],
  first: string,
  rest: string,
  width: number,
): string[] {
  const out: string[] = [];
  let prefix = first;
  let line = "";
  let length = 0;
  for (const w of words) {
    if (length > 0 && visibleLength(prefix) + length + 1 + w.text.length > width) {
      out.push(prefix + line);
      prefix = rest;
      line = "";
      length = 0;
    }
    const shown = w.paint ? w.paint(w.text) : w.text;
    line = length > 0 ? `${line} ${shown}` : shown;
    length += (length > 0 ? 1 : 0) + w.text.length;
  }
  if (length > 0 || out.length === 0) out.push(prefix + line);
  return out;
}

/**
 * Prose wrapped at word boundaries to `width`, each line after `indent`; "\n" starts a new
 * paragraph; a paragraph that is a list item (`- …`) hangs two columns further.
 */
export function wrap(text: string, indent: string, width = PIPE_WIDTH): string {
  const out: string[] = [];
  for (const para of text.split("\n")) {
    const rest = /^\s*- /.test(para) ? `${indent}  ` : indent;
    out.push(...fillWords(paintedWords(para), indent, rest, width));
  }
  return out.join("\n");
}
