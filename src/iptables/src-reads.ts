/**
 * @module iptables/src-reads — while an evaluation is watched, every test the rules make of the
 * packet's source address and source port, with the value it read: `-s`/`--ctorigsrc` blocks,
 * `--sport`/`--sports`/`--ports` ranges, and reads that depend on the exact address (addrtype
 * `--src-type`, `-m set … src`, NETMAP). Two packets that differ only in source address and port
 * and answer every logged test alike go through the same evaluation: path/answer-cache reuses
 * one's answer for the other on that ground.
 */
import type { PortsSpec } from "./dump.ts";

/** One test of the packet's source, and the value it was made on. */
export type SrcRead =
  /** Whether the source address lies in [start, end]. */
  | { readonly kind: "range"; readonly start: bigint; readonly end: bigint; readonly seen: bigint }
  /** Whether the source port lies in the spec's ranges (or is unknown). */
  | { readonly kind: "sport"; readonly spec: PortsSpec; readonly seen: number | undefined }
  /** Something that turns on the exact address (its text, its type, a set's members). */
  | { readonly kind: "exact"; readonly seen: bigint };

/** The reads of one watched evaluation. */
export interface SrcReadLog {
  readonly reads: SrcRead[];
  /** Set when the source was read in a way the log cannot replay: the answer is not reusable. */
  opaque: boolean;
  /** The log this one interrupted. */
  readonly outer?: SrcReadLog | undefined;
}

/**
 * The log being written, when an evaluation is watched (one holder object: a property load
 * costs the predicates less than an imported binding, which tsx reads through a getter).
 */
export const SRC_READS: { log: SrcReadLog | undefined } = { log: undefined };

/**
 * Starts watching: the reads from now on go into the returned log. A log already being written
 * (an evaluation inside a watched one) is marked opaque: its reads go elsewhere meanwhile.
 */
export function watchSrcReads(): SrcReadLog {
  const outer = SRC_READS.log;
  if (outer !== undefined) outer.opaque = true;
  const log: SrcReadLog = { reads: [], opaque: false, outer };
  SRC_READS.log = log;
  return log;
}

/** Stops watching `log`: the log it interrupted, if any, is written again. */
export function unwatchSrcReads(log: SrcReadLog): void {
  SRC_READS.log = log.outer;
}

/** Whether the port lies in the spec's ranges; "unknown" when the flow's port is not given. */
export function sportAnswer(spec: PortsSpec, port: number | undefined): boolean | "unknown" {
  if (port === undefined) return "unknown";
  for (const r of spec.ranges) if (port >= r.from && port <= r.to) return true;
  return false;
}
