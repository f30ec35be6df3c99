/**
 * @module evidence/json-source — positions inside valid JSON text, found on demand. `kubectl get
 * -o json` output is read with `JSON.parse` (about a hundred times faster than a YAML parser that
 * keeps positions); a field's line is found only when asked, by scanning the one container that
 * holds it. Each scanned container's member offsets are kept, so walking a List's items is linear.
 */
import type { SourceRef } from "../model/types.ts";
import { lineAt } from "./text-lines.ts";

export type JsonPath = readonly (string | number)[];

/** Where a value starts, and where its key starts when it is an object member. */
export interface JsonSpot {
  readonly value: number;
  readonly key?: number;
}

interface Members {
  readonly keys?: Map<string, JsonSpot>;
  readonly items?: number[];
}

/** The offset of the first non-whitespace character at or after `i`. */
function skipWs(text: string, i: number): number {
  let j = i;
  while (j < text.length) {
    const c = text.charCodeAt(j);
    if (c !== 32 && c !== 10 && c !== 13 && c !== 9) break;
    j++;
  }
  return j;
}

/** The offset after the string whose opening quote is at `i`. */
function stringEnd(text: string, i: number): number {
  // i is at the opening quote; returns the offset after the closing one
  let j = i + 1;
  for (;;) {
    const q = text.indexOf('"', j);
    if (q < 0) return text.length;
    let back = 0;
    for (let k = q - 1; text.charCodeAt(k) === 92; k--) back++;
    if (back % 2 === 0) return q + 1;
    j = q + 1;
  }
}

/** The offset after the value that starts at `i`. */
function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return stringEnd(text, i);
  if (c !== "{" && c !== "[") {
    let j = i;
    while (j < text.length && !",]} \t\r\n".includes(text[j]!)) j++;
    return Math.max(j, i + 1);
  }
  let depth = 0;
  let j = i;
  while (j < text.length) {
    const ch = text[j]!;
    if (ch === '"') {
      j = stringEnd(text, j);
      continue;
    }
    if (ch === "{" || ch === "[") depth++;
    else if (ch === "}" || ch === "]") {
      depth--;
      if (depth === 0) return j + 1;
    }
    j++;
  }
  return text.length;
}

/** The offsets of the items or members of the container at `start`, kept in `cache`. */
function membersOf(text: string, start: number, cache: Map<number, Members>): Members {
  const hit = cache.get(start);
  if (hit) return hit;
  let out: Members = {};
  if (text[start] === "[") {
    const items: number[] = [];
    let j = skipWs(text, start + 1);
    while (j < text.length && text[j] !== "]") {
      items.push(j);
      j = skipWs(text, valueEnd(text, j));
      if (text[j] === ",") j = skipWs(text, j + 1);
      else break;
    }
    out = { items };
  } else if (text[start] === "{") {
    const keys = new Map<string, JsonSpot>();
    let j = skipWs(text, start + 1);
    while (j < text.length && text[j] === '"') {
      const keyEnd = stringEnd(text, j);
      const key = JSON.parse(text.slice(j, keyEnd)) as string;
      let v = skipWs(text, keyEnd);
      if (text[v] !== ":") break;
      v = skipWs(text, v + 1);
      // JSON.parse keeps the last of duplicate keys; so does this.
      keys.set(key, { value: v, key: j });
      j = skipWs(text, valueEnd(text, v));
      if (text[j] === ",") j = skipWs(text, j + 1);
      else break;
    }
    out = { keys };
  }
  cache.set(start, out);
  return out;
}

/**
 * A locator over `text`, which must be valid JSON (checked by the caller with `JSON.parse`).
 * `find(path)` gives the offsets of the value at `path` from the root value.
 */
export function jsonLocator(
  text: string,
  rootOffset?: number,
): {
  root: number;
  find(path: JsonPath): JsonSpot | undefined;
} {
  const cache = new Map<number, Members>();
  const members = (start: number): Members => membersOf(text, start, cache);
  const root = skipWs(text, rootOffset ?? 0);
  const find = (path: JsonPath): JsonSpot | undefined => {
    let spot: JsonSpot = { value: root };
    for (const seg of path) {
      const m = members(spot.value);
      const next =
        typeof seg === "number" && m.items
          ? m.items[seg] === undefined
            ? undefined
            : { value: m.items[seg] }
          : m.keys?.get(String(seg));
      if (!next) return undefined;
      spot = next;
    }
    return spot;
  };
  return { root, find };
}

/** Offset just after the `n`-th `\n` escape of the JSON string starting at `from` (its quote). */
export function offsetOfStringLine(text: string, from: number, n: number): number | undefined {
  if (n === 0) return from + 1;
  let seen = 0;
  for (let i = from + 1; i < text.length; i++) {
    const c = text[i];
    if (c === '"') return undefined;
    if (c !== "\\") continue;
    if (text[i + 1] === "n" && ++seen === n) return i + 2;
    i++;
  }
  return undefined;
}

/** Cites offsets of `text` as file lines (1-based line and column, the line's text when short). */
export function offsetCiter(text: string, file: string): (offset: number) => SourceRef {
  const starts = [0];
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  return (offset) => {
    const lo = lineAt(starts, offset) - 1;
    const start = starts[lo]!;
    const end = lo + 1 < starts.length ? starts[lo + 1]! - 1 : text.length;
    const lineText = text
      .slice(start, Math.min(end, start + 501))
      .replace(/\r$/, "")
      .trimEnd();
    const ref = { file, line: lo + 1, col: offset - start + 1 };
    return end - start > 500 ? ref : { ...ref, text: lineText };
  };
}

/**
 * Splits text holding one or more JSON values one after another (`kubectl get ... -o json`
 * outputs appended to one file) into the values and their start offsets. Undefined unless every
 * part is valid JSON.
 */
export function splitJsonStream(text: string): { start: number; value: unknown }[] | undefined {
  const out: { start: number; value: unknown }[] = [];
  let i = 0;
  const skipWs = () => {
    while (i < text.length && " \t\r\n".includes(text[i]!)) i++;
  };
  skipWs();
  while (i < text.length) {
    const open = text[i];
    if (open !== "{" && open !== "[") return undefined;
    const start = i;
    let depth = 0;
    for (; i < text.length; i++) {
      const c = text[i];
      if (c === '"') {
        for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
      } else if (c === "{" || c === "[") depth++;
      else if ((c === "}" || c === "]") && --depth === 0) {
        i++;
        break;
      }
    }
    try {
      out.push({ start, value: JSON.parse(text.slice(start, i)) });
    } catch {
      return undefined;
    }
    skipWs();
  }
  return out.length > 0 ? out : undefined;
}
