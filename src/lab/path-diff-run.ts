/**
 * @module lab/path-diff-run — the run loop of a whole-path differential suite (IPv4 or IPv6,
 * iptables or nftables): the sandbox made, one snapshot folder, each seed's set run in turn
 * until five disagreements, the sandbox destroyed whatever happens, then the root namespace
 * checked unchanged and no disagreement allowed; and which flows the kernel let through, to be
 * sent again as later packets of their connections.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type OutcomeTest, PathDiffTally } from "./path-diff-tally.ts";
import type { PathFlow } from "./path-gen.ts";
import type { KernelPathVerdict } from "./path-verdict.ts";
import { rootNamespaceHash } from "./root-state.ts";

export interface DifferentialRun<S> {
  /** Makes the sandbox (destroyed at the end). */
  readonly create: () => Promise<S & { destroy(): Promise<void> }>;
  /** The snapshot folder's name prefix; the folder is added to `dirs` (for the caller to remove). */
  readonly tmpPrefix: string;
  readonly dirs: string[];
  readonly test: OutcomeTest;
  readonly baseSeed: number;
  readonly sets: number;
  /** Runs one seed's set: loads it, writes the snapshot to `dir`, compares into `tally`. */
  readonly set: (sb: S, seed: number, dir: string, tally: PathDiffTally) => Promise<void>;
}

/** Runs every set; the tally and how long the sets took (ms), once the run's checks passed. */
export async function runDifferential<S>(
  run: DifferentialRun<S>,
): Promise<{ tally: PathDiffTally; ms: number; check: () => Promise<void> }> {
  const rootBefore = await rootNamespaceHash();
  const sb = await run.create();
  const dir = mkdtempSync(join(tmpdir(), run.tmpPrefix));
  run.dirs.push(dir);
  const tally = new PathDiffTally(run.test);
  const started = Date.now();
  try {
    for (let k = 0; k < run.sets && tally.failures.length < 5; k++) {
      await run.set(sb, run.baseSeed + k, dir, tally);
    }
  } finally {
    await sb.destroy();
  }
  const ms = Date.now() - started;
  /** The root namespace unchanged, and no disagreement. */
  const check = async () => {
    assert.equal(await rootNamespaceHash(), rootBefore, "the root namespace changed");
    assert.deepEqual(tally.failures, [], `\n${tally.failures.join("\n\n")}`);
  };
  return { tally, ms, check };
}

/**
 * The later packets (`again`, each a flow's source port plus `shift`) of the flows that are not
 * themselves later packets and that the kernel let through (forwarded or delivered).
 */
export function laterOfPassed(
  flows: readonly PathFlow[],
  observed: readonly KernelPathVerdict[],
  again: readonly PathFlow[],
  shift: number,
): PathFlow[] {
  const passed = flows.filter((f, i) => {
    const v = observed[i]!.kind;
    return !f.established && (v === "forwarded" || v === "delivered");
  });
  return again.filter((a) => passed.some((f) => f.sport === a.sport! - shift));
}
