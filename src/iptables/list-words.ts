/**
 * @module iptables/list-words — the words of an `iptables -L` line with their places in it, so a
 * reader can take columns word by word and still cut free text (a comment) out of the line as it
 * was printed.
 */

/** One word: `line.slice(start, end)`. */
export interface Word {
  readonly text: string;
  readonly start: number;
  readonly end: number;
}

/** The words of `line[from..]`, split on spaces and tabs. */
export function wordsOf(line: string, from = 0): Word[] {
  const out: Word[] = [];
  const n = line.length;
  let i = from;
  while (i < n) {
    let c = line.charCodeAt(i);
    while (i < n && (c === 32 || c === 9)) c = line.charCodeAt(++i);
    if (i >= n) break;
    const start = i;
    while (i < n && c !== 32 && c !== 9) c = line.charCodeAt(++i);
    out.push({ text: line.slice(start, i), start, end: i });
  }
  return out;
}
