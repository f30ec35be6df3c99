/**
 * The masquerade model on the committed example: built once per snapshot object, holding what the
 * readers read from that snapshot, its diagnostics in reading order.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadSnapshot } from "../../snapshot/load.ts";
import { readSites } from "../../snapshot/sites.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { clusterFacts } from "./facts.ts";
import { readAgentIntent } from "./intent.ts";
import { masqueradeModel } from "./model.ts";

const EXAMPLE = new URL("../../../examples/snat-exception-list/", import.meta.url).pathname;
const load = () => loadSnapshot(openSnapshot(EXAMPLE));

describe("masqueradeModel", () => {
  it("is built once per snapshot object, and again for another", () => {
    const snap = load();
    const m = masqueradeModel(snap);
    assert.equal(masqueradeModel(snap), m);
    assert.equal(m.coverage, m.coverage, "coverage is worked out once");
    const other = masqueradeModel(load());
    assert.notEqual(other, m);
    assert.deepEqual(other.intent.config, m.intent.config);
  });

  it("holds what the readers read from the snapshot", () => {
    const snap = load();
    const m = masqueradeModel(snap);
    const intent = readAgentIntent(snap.objects);
    const facts = clusterFacts(snap.objects);
    assert.deepEqual(m.intent.config, intent.config);
    assert.ok(m.intent.configMap, "the example has the agent's ConfigMap");
    assert.deepEqual(
      m.facts.nodes.map((n) => n.name),
      facts.nodes.map((n) => n.name),
    );
    assert.ok(m.farSites.sites.length > 0, "the example describes its far side");
    assert.equal(m.farSites, readSites(snap));
    assert.deepEqual(m.diagnostics, [
      ...intent.diagnostics,
      ...facts.diagnostics,
      ...readSites(snap).diagnostics,
    ]);
    assert.deepEqual(
      m.coverage.nodes.map((n) => n.node),
      facts.nodes.map((n) => n.name),
    );
  });
});
