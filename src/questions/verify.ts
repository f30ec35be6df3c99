/**
 * @module questions/verify — `verify <before> <after>`: asks every case of the registry for its
 * change record and keeps those that apply (a case with nothing to compare in the two snapshots
 * answers nothing). Names no case.
 */
import type { CaseProof, ProofOptions } from "../cases/case.ts";
import { loadCases } from "../cases/index.ts";
import type { Snapshot } from "../snapshot/load.ts";

export type { CaseProof, ProofOptions, ProofVerdict } from "../cases/case.ts";

/** The change records of every case that has something to compare, in registry order. */
export async function verifySnapshots(
  before: Snapshot,
  after: Snapshot,
  opts: ProofOptions = {},
): Promise<CaseProof[]> {
  const cases = await loadCases();
  const records: CaseProof[] = [];
  for (const c of cases) {
    const r = c.proof ? await c.proof(before, after, opts) : undefined;
    if (r) records.push(r);
  }
  return records;
}

/** The change did what it intended only when every record says so (and there is one). */
export function allIntended(records: readonly CaseProof[]): boolean {
  return records.length > 0 && records.every((r) => r.verdict === "intended");
}
