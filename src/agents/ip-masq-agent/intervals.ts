/**
 * @module agents/ip-masq-agent/intervals — the agent's `--to-ports` port intervals
 * (pkg/interval): parsing with its error texts, sizes and rendering. Intervals are kept as
 * written: not sorted, merged, deduplicated or range-checked, exactly as the agent keeps them.
 */
import { goQuote } from "./go-quote.ts";

export interface PortInterval {
  readonly first: number;
  readonly last: number;
}

/** Interval.Size: the number of ports, 0 when last < first. */
export function intervalSize(i: PortInterval): number {
  return i.last < i.first ? 0 : i.last - i.first + 1;
}

/** Intervals.Size. */
export function intervalsSize(list: readonly PortInterval[] | null): number {
  let n = 0;
  for (const i of list ?? []) n += intervalSize(i);
  return n;
}

/** Interval.String: `42-44`, `42`, or empty when the interval is not valid. */
export function formatInterval(i: PortInterval): string {
  if (i.first < 0 || i.last < i.first) return "";
  if (i.first === i.last) return String(i.first);
  return `${i.first}-${i.last}`;
}

const INT64_MAX = (1n << 63n) - 1n;
const INT64_MIN = -(1n << 63n);

/** strconv.Atoi with its error text. */
export function goAtoi(s: string): { value: number } | { error: string } {
  const syntax = { error: `strconv.Atoi: parsing ${goQuote(s)}: invalid syntax` };
  if (!/^[+-]?[0-9]+$/.test(s)) return syntax;
  const v = BigInt(s);
  if (v > INT64_MAX || v < INT64_MIN) {
    return { error: `strconv.Atoi: parsing ${goQuote(s)}: value out of range` };
  }
  return { value: Number(v) };
}

/** interval.ParseInterval: `42`, `42-44`; errors exactly as the agent words them. */
export function parseInterval(s: string): { interval: PortInterval } | { error: string } {
  const p = s.split("-");
  if (p.length > 2) return { error: `invalid interval ${goQuote(s)}` };
  const first = goAtoi(p[0]!);
  if ("error" in first) return first;
  if (p.length === 1) return { interval: { first: first.value, last: first.value } };
  const last = goAtoi(p[1]!);
  if ("error" in last) return last;
  if (first.value > last.value) return { error: `first is greater than last in ${goQuote(s)}` };
  return { interval: { first: first.value, last: last.value } };
}

/** interval.ParseIntervals: comma-separated intervals, in the order written. */
export function parseIntervals(s: string): { intervals: PortInterval[] } | { error: string } {
  const out: PortInterval[] = [];
  for (const part of s.split(",")) {
    const r = parseInterval(part);
    if ("error" in r) return r;
    out.push(r.interval);
  }
  return { intervals: out };
}
