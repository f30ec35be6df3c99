/** @module evidence/capture-meta.test — captures/<name>.yaml. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readCaptureMeta } from "./capture-meta.ts";

describe("readCaptureMeta", () => {
  it("reads every kind of point", () => {
    const cases: [string, unknown][] = [
      ["node/gke-c1-default-pool-3f2a-1", { kind: "node", node: "gke-c1-default-pool-3f2a-1" }],
      ["pod/vpn/openvpn-0", { kind: "pod", namespace: "vpn", pod: "openvpn-0" }],
      ["remote/onprem-dc1", { kind: "remote", site: "onprem-dc1" }],
      ["client", { kind: "client" }],
    ];
    for (const [point, want] of cases) {
      const { value, diagnostics } = readCaptureMeta(
        `point: ${point}\nphase: before\n`,
        "captures/a.yaml",
      );
      assert.deepEqual(diagnostics, []);
      assert.deepEqual(value?.point, want);
      assert.equal(value?.phase, "before");
      assert.equal(value?.pointSource.line, 1);
    }
  });

  it("keeps time and command", () => {
    const { value } = readCaptureMeta(
      "point: node/n1\nphase: after\ntime: 2026-11-29T14:05:00Z\ncommand: tcpdump -ni any host 10.20.30.40 -w after.pcap\n",
      "c.yaml",
    );
    assert.equal(value?.time, "2026-11-29T14:05:00Z");
    assert.match(value?.command ?? "", /^tcpdump/);
  });

  it("rejects a bad point with its line and what was expected", () => {
    const { value, diagnostics } = readCaptureMeta(
      "phase: after\npoint: pod/only-one-part\n",
      "bad.yaml",
    );
    assert.equal(value, undefined);
    assert.equal(diagnostics[0]?.source?.line, 2);
    assert.match(
      diagnostics[0]!.message,
      /expected node\/<name>, pod\/<namespace>\/<name>, remote\/<site> or client/,
    );
  });

  it("drops a bad phase or time but keeps the point; unknown keys are warnings", () => {
    const { value, diagnostics } = readCaptureMeta(
      "point: client\nphase: during\ntime: yesterday\niface: any\n",
      "w.yaml",
    );
    assert.deepEqual(value?.point, { kind: "client" });
    assert.equal(value?.phase, undefined);
    assert.equal(value?.time, undefined);
    assert.deepEqual(diagnostics.map((d) => [d.code, d.source?.line]).sort(), [
      ["CAPTURE_META", 2],
      ["CAPTURE_META", 3],
      ["UNKNOWN_KEY", 4],
    ]);
  });

  it("reports an empty file and broken YAML", () => {
    assert.equal(readCaptureMeta("", "e.yaml").diagnostics[0]?.code, "CAPTURE_META");
    const broken = readCaptureMeta("point: [client\n", "b.yaml");
    assert.equal(broken.value, undefined);
    assert.equal(broken.diagnostics[0]?.code, "YAML_SYNTAX");
  });
});
