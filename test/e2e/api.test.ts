/**
 * The public API as a user imports it: the built package entry, no internal paths.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";

const ENTRY = join(import.meta.dirname, "../../dist/index.js");
const EXAMPLE = join(import.meta.dirname, "../../examples/snat-exception-list");

describe("podpath as a library", () => {
  it("opens, loads and diagnoses a snapshot, and renders the answer", async () => {
    const api = (await import(ENTRY)) as typeof import("../../src/index.ts");
    const snap = api.loadSnapshot(api.openSnapshot(EXAMPLE));
    const answer = await api.diagnose(snap);
    assert.ok(answer.findings.some((f) => f.id === "masq/exempt-destination"));
    const json = JSON.parse(api.renderJson(answer)) as { schemaVersion: number };
    assert.equal(json.schemaVersion, 1);
    assert.match(api.renderText(answer), /masq\/exempt-destination/);
  });
  it("plans the narrow fix with the agent's own validation", async () => {
    const api = (await import(ENTRY)) as typeof import("../../src/index.ts");
    const snap = api.loadSnapshot(api.openSnapshot(EXAMPLE));
    const plan = api.planMasquerade(snap, { strategy: "narrow" });
    assert.equal(plan.narrow?.validationError, undefined);
    const dest = api.parseIp("10.20.30.40");
    const list = (plan.narrow?.newList ?? []).map((k) => api.parseCidr(k.cidr));
    assert.ok(list.length > 0 && list.every((c) => !api.contains(c, dest)));
  });
});
