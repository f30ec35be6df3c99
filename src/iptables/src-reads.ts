/**
 * @module iptables/src-reads — while an evaluation is watched, every test the rules make of the
 * packet's source address and source port, with the value it read: `-s`/`--ctorigsrc` blocks,
 * `--sport`/`--sports`/`--ports` ranges, and reads that depend on the exact address (addrtype
 * `--src-type`, `-m set … src`, NETMAP). Two packets that differ only in source address and port
 * and answer every logged test alike go through the same evaluation: path/answer-cache reuses
 * one's answer for the other on that ground.
 *
 * The log is flat (two parallel arrays: the test, the value it read) and the tests are made once,
 * when a rule is compiled: a watched evaluation allocates nothing per test, and a log can be
 * emptied and written again for the next packet.
 */
import type { PortsSpec } from "./dump.ts";

/** One test of the packet's source, made once per predicate. */
export type SrcTest =
  /** Whether the source address lies in [start, end]. */
  | { readonly kind: "range"; readonly start: bigint; readonly end: bigint }
  /** Whether the source port lies in the spec's ranges (or is unknown). */
  | { readonly kind: "sport"; readonly spec: PortsSpec }
  /** Something that turns on the exact address (its text, its type, a set's members). */
  | { readonly kind: "exact" };

/** The test of {@link SrcTest} "exact": one object for every predicate that makes it. */
export const EXACT_SRC: SrcTest = { kind: "exact" };

/** The reads of one watched evaluation: test `i` read `seen[i]` (an address, or a port). */
export class SrcReadLog {
  readonly tests: SrcTest[] = [];
  readonly seen: (bigint | number | undefined)[] = [];
  /** How many reads are logged (the arrays are reused past it). */
  length = 0;
  /** Set when the source was read in a way the log cannot replay: the answer is not reusable. */
  opaque = false;
  /** The log this one interrupted. */
  outer: SrcReadLog | undefined = undefined;

  add(test: SrcTest, seen: bigint | number | undefined): void {
    const n = this.length;
    this.tests[n] = test;
    this.seen[n] = seen;
    this.length = n + 1;
  }

  /** The reads from `from` on, as a log of their own (to replay with {@link addAll}). */
  slice(from: number): SrcReadLog {
    const out = new SrcReadLog();
    for (let i = from; i < this.length; i++) out.add(this.tests[i]!, this.seen[i]);
    return out;
  }

  /** Logs every read of `other` after this log's own. */
  addAll(other: SrcReadLog): void {
    for (let i = 0; i < other.length; i++) this.add(other.tests[i]!, other.seen[i]);
  }
}

/**
 * The log being written, when an evaluation is watched (one holder object: a property load
 * costs the predicates less than an imported binding, which tsx reads through a getter).
 */
export const SRC_READS: { log: SrcReadLog | undefined } = { log: undefined };

/**
 * Starts watching: the reads from now on go into `into` (emptied first; a new log when `into` is
 * itself being written further out) or a new log, returned.
 * A log already being written (an evaluation inside a watched one) is marked opaque: its reads
 * go elsewhere meanwhile.
 */
export function watchSrcReads(into?: SrcReadLog): SrcReadLog {
  const outer = SRC_READS.log;
  if (outer !== undefined) outer.opaque = true;
  let free = into !== undefined;
  for (let l = outer; l !== undefined && free; l = l.outer) if (l === into) free = false;
  const log = free ? into! : new SrcReadLog();
  log.length = 0;
  log.opaque = false;
  log.outer = outer;
  SRC_READS.log = log;
  return log;
}

/** Stops watching `log`: the log it interrupted, if any, is written again. */
export function unwatchSrcReads(log: SrcReadLog): void {
  SRC_READS.log = log.outer;
  log.outer = undefined;
}

/** Whether the port lies in the spec's ranges; "unknown" when the flow's port is not given. */
export function sportAnswer(spec: PortsSpec, port: number | undefined): boolean | "unknown" {
  if (port === undefined) return "unknown";
  for (const r of spec.ranges) if (port >= r.from && port <= r.to) return true;
  return false;
}
