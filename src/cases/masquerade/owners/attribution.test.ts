/**
 * Attribution is tested, not assumed (issue 13): on every owner's lab snapshot (each made on a real
 * kernel, see the fixtures' READMEs and examples/eks-exclude-snat-cidrs), the masquerade case's
 * findings and paths
 * - are the same with that owner's knowledge alone as with every owner's (the others' knowledge
 *   takes no part in the decision),
 * - change when that owner's knowledge is removed (its knowledge is what decides),
 * - and that owner's knowledge alone adds nothing on any other owner's snapshot (it never claims a
 *   dump it did not write).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseIp } from "../../../net/cidr.ts";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import type { DiagnoseOptions } from "../../case.ts";
import { explainMasquerade } from "../explain.ts";
import { SOURCE_OWNERS, type SourceOwnerCase } from "./index.ts";

const FIX = join(import.meta.dirname, "../fixtures");
const ONPREM = "10.20.30.40";

/** Each owner's "before" snapshot, where it keeps the pod's address toward the on-prem host. */
const SNAPSHOTS: Record<string, string> = {
  "aws-vpc-cni": join(import.meta.dirname, "../../../../examples/eks-exclude-snat-cidrs"),
  kubenet: join(FIX, "kubenet/before"),
  "bridge-cni": join(FIX, "bridge-cni/before"),
  calico: join(FIX, "calico/before"),
  flannel: join(FIX, "flannel/before"),
  cilium: join(FIX, "cilium/bpf-ip-masq-agent"),
};

const opts: DiagnoseOptions = { dest: { ip: parseIp(ONPREM), text: ONPREM } };

/** What the case decided: each finding's id and title, and each path's source on the wire. */
async function answer(dir: string, owners: readonly SourceOwnerCase[]): Promise<string[]> {
  const r = await explainMasquerade(loadSnapshot(openSnapshot(dir)), opts, owners);
  return [
    ...r.findings.map((f) => `${f.id} ${f.title}`),
    ...r.paths.map(
      (p) =>
        `path ${p.from} → ${p.to}: ${p.sourceOnWire ?? "?"} · ${p.hops.map((h) => h.label).join(" | ")}`,
    ),
  ].sort();
}

describe("every owner's attribution decides its own snapshot and no other", () => {
  it("has a snapshot for every registered owner", () => {
    assert.deepEqual(SOURCE_OWNERS.map((o) => o.id).sort(), Object.keys(SNAPSHOTS).sort());
  });

  for (const owner of SOURCE_OWNERS) {
    const dir = SNAPSHOTS[owner.id]!;
    const others = SOURCE_OWNERS.filter((o) => o !== owner);

    it(`${owner.id}: its knowledge alone gives the whole answer; without it the answer changes`, async () => {
      const all = await answer(dir, SOURCE_OWNERS);
      assert.ok(
        all.some((l) => l.startsWith("masq/exempt-destination ") || l.startsWith("masq/ebpf")),
        all.join("\n"),
      );
      assert.deepEqual(await answer(dir, [owner]), all, "the other owners took part");
      assert.notDeepEqual(await answer(dir, others), all, "the answer does not rest on it");
    });

    it(`${owner.id}: its knowledge alone adds nothing on another owner's snapshot`, async () => {
      for (const [id, other] of Object.entries(SNAPSHOTS)) {
        if (id === owner.id) continue;
        assert.deepEqual(await answer(other, [owner]), await answer(other, []), `on ${id}'s`);
      }
    });
  }
});
