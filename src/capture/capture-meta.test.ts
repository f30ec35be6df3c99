import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseCaptureMeta } from "./capture-meta.ts";

describe("parseCaptureMeta", () => {
  it("reads point and phase, keeping the point as written and its line", () => {
    const r = parseCaptureMeta(
      "# node capture\npoint: node/gke-a-1\nphase: after\n",
      "captures/n.yaml",
    );
    assert.deepEqual(r.diagnostics, []);
    assert.deepEqual(r.value.point, { kind: "node", name: "gke-a-1" });
    assert.equal(r.value.pointText, "node/gke-a-1");
    assert.equal(r.value.phase, "after");
    assert.equal(r.value.source.line, 2);
  });

  it("reports a bad point with its line and still returns a value", () => {
    const r = parseCaptureMeta("point: somewhere\n", "c.yaml");
    assert.equal(r.value.point, undefined);
    assert.ok(r.diagnostics.some((d) => /point/.test(d.message) && d.source?.line === 1));
  });

  it("reads every point form", () => {
    const point = (text: string) => parseCaptureMeta(`point: ${text}\n`, "c.yaml").value.point;
    assert.deepEqual(point("pod/default/web-1"), {
      kind: "pod",
      namespace: "default",
      name: "web-1",
    });
    assert.deepEqual(point("remote/onprem-dc1"), { kind: "remote", site: "onprem-dc1" });
    assert.deepEqual(point("client"), { kind: "client" });
    assert.equal(point("node/"), undefined);
  });
});
