/**
 * The verify question walks the registry: each pair of snapshots gets the records of the cases
 * that have something to compare in it, and no other.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { allIntended, verifySnapshots } from "./verify.ts";

const at = (rel: string) =>
  loadSnapshot(openSnapshot(new URL(`../../${rel}/`, import.meta.url).pathname));
const VPN = "src/cases/vpn/testdata/vpn-lab";

describe("verifySnapshots", () => {
  it("VPN snapshots: the VPN record only", async () => {
    const r = await verifySnapshots(at(`${VPN}/forwarding-off`), at(`${VPN}/fixed`));
    assert.deepEqual(
      r.map((x) => [x.case, x.verdict]),
      [["vpn", "intended"]],
    );
    assert.ok(allIntended(r));
    // the record's document rendered as text: the proof whole on the line under its label
    assert.ok(r[0]!.text.includes(`- Proof:\n  ${r[0]!.proofLine}\n`), r[0]!.text);
    assert.equal(r[0]!.document.title, "Change record: VPN pod forwarding");
  });

  it("the masquerade examples: the masquerade record only", async () => {
    const r = await verifySnapshots(
      at("examples/snat-exception-list"),
      at("examples/snat-exception-list-allowlisted"),
    );
    assert.deepEqual(
      r.map((x) => [x.case, x.verdict]),
      [["masquerade", "intended"]],
    );
  });

  it("a record that did not do what it intended makes the whole change not intended", async () => {
    const r = await verifySnapshots(at(`${VPN}/fixed`), at(`${VPN}/forwarding-off`));
    assert.equal(r.length, 1);
    assert.equal(allIntended(r), false);
    assert.equal(allIntended([]), false);
  });
});
