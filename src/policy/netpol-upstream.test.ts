/**
 * The connectivity listing against every plain connlist golden of the netpol-analyzer repository
 * whose manifests stay within Kubernetes NetworkPolicy semantics (fixtures/README.md): 96 folders,
 * exact text; and every such explain golden (15 folders): allowed connections and the exact
 * policies and rules cited for each pair.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import { readKubeObjects } from "../evidence/kube-objects.ts";
import { connectivityList, renderConnlist } from "./connlist.ts";
import { buildPolicyWorld, type PolicyWorld } from "./policy-world.ts";
import { explainMismatches } from "./test-helpers/netpol-golden.ts";

interface Pack {
  commit: string;
  dirs: Record<string, { files: Record<string, string>; golden: string }>;
  explain: Record<string, { files: Record<string, string>; golden: string }>;
  excluded: Record<string, string[]>;
  contents: Record<string, string>;
}

const pack = JSON.parse(
  gunzipSync(
    readFileSync(join(import.meta.dirname, "fixtures", "netpol-analyzer-upstream.json.gz")),
  ).toString("utf8"),
) as Pack;

const UNSUPPORTED = new Set([
  "Ingress",
  "Route",
  "UserDefinedNetwork",
  "ClusterUserDefinedNetwork",
  "NetworkAttachmentDefinition",
  "MultiNetworkPolicy",
  "VirtualMachine",
  "VirtualMachineInstance",
]);

const lines = (t: string) =>
  t
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .sort();

describe(`netpol-analyzer connlist goldens (np-guard/netpol-analyzer@${pack.commit.slice(0, 8)})`, () => {
  it("runs every folder except those with kinds outside NetworkPolicy semantics", () => {
    assert.equal(Object.keys(pack.dirs).length, 96);
    for (const [dir, kinds] of Object.entries(pack.excluded)) {
      assert.ok(kinds.length > 0 && kinds.every((k) => UNSUPPORTED.has(k)), dir);
    }
  });
  for (const [dir, entry] of Object.entries(pack.dirs).sort()) {
    it(dir, () => {
      const objects = Object.entries(entry.files)
        .sort()
        .flatMap(([path, key]) => readKubeObjects(pack.contents[key]!, path).value);
      for (const o of objects) assert.ok(!UNSUPPORTED.has(o.kind), `${dir} holds ${o.kind}`);
      const world = buildPolicyWorld(objects).value;
      assert.deepEqual(
        lines(renderConnlist(connectivityList(world))),
        lines(pack.contents[entry.golden]!),
      );
    });
  }
});

function worldOf(files: Record<string, string>): PolicyWorld {
  const objects = Object.entries(files)
    .sort()
    .flatMap(([path, key]) => readKubeObjects(pack.contents[key]!, path).value);
  for (const o of objects) assert.ok(!UNSUPPORTED.has(o.kind), `holds ${o.kind}`);
  return buildPolicyWorld(objects).value;
}

describe("netpol-analyzer explain goldens: verdicts and citations", () => {
  it("has the 15 folders within NetworkPolicy semantics", () => {
    assert.equal(Object.keys(pack.explain).length, 15);
  });
  for (const [dir, entry] of Object.entries(pack.explain).sort()) {
    it(dir, () => {
      assert.deepEqual(explainMismatches(worldOf(entry.files), pack.contents[entry.golden]!), []);
    });
  }
});
