/**
 * @module evidence/text-lines — splitting tool output into numbered lines and citing them, shared by
 * the line-oriented readers (sysctl, ip route, ip addr, conntrack).
 */
import type { SourceRef } from "../model/types.ts";

export interface Line {
  /** 1-based line number in the file. */
  readonly line: number;
  /** The line without its end-of-line characters. */
  readonly text: string;
}

/** Lines longer than this are cited without their text (a report has no use for megabytes). */
const MAX_CITED_TEXT = 500;

/** Splits on LF or CRLF; a final newline does not produce an empty last line. */
export function splitLines(text: string): Line[] {
  const parts = text.split("\n");
  if (parts.length > 0 && parts[parts.length - 1] === "") parts.pop();
  return parts.map((t, i) => ({ line: i + 1, text: t.endsWith("\r") ? t.slice(0, -1) : t }));
}

export function lineRef(file: string, l: Line, col?: number): SourceRef {
  const text = l.text.trimEnd();
  const base = text.length > MAX_CITED_TEXT ? { file, line: l.line } : { file, line: l.line, text };
  return col === undefined ? base : { ...base, col };
}

/** Whitespace-separated tokens of a line. */
export function tokens(text: string): string[] {
  return text.split(/\s+/).filter((t) => t !== "");
}

/** Quotes a piece of input for a message, shortened. */
export function quote(s: string, max = 60): string {
  return JSON.stringify(s.length > max ? `${s.slice(0, max)}…` : s);
}

/** 1-based line of `offset`, by binary search over line start offsets. */
export function lineAt(starts: readonly number[], offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid]! <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo + 1;
}
