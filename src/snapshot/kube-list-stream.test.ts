import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { pod } from "../../bench/gen-cluster.ts";
import { type KubeObject, readKubeObjects } from "../evidence/kube-objects.ts";
import { bytesSource, streamJsonList } from "./json-list-stream.ts";
import { streamClusterFile } from "./kube-list-stream.ts";
import { openSnapshot } from "./source.ts";

const tmp = mkdtempSync(join(tmpdir(), "pp-kls-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A snapshot folder holding `cluster/<name>` with `text`. */
function snapshotWith(name: string, text: string | Buffer): string {
  const root = mkdtempSync(join(tmp, "s-"));
  mkdirSync(join(root, "cluster"));
  writeFileSync(join(root, "cluster", name), text);
  return root;
}

function rng(seed: number): () => number {
  let s = seed;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 4294967296;
  };
}

const PATHS = [
  [],
  ["metadata", "name"],
  ["metadata", "labels"],
  ["spec", "nodeName"],
  ["spec", "containers", 0, "image"],
  ["status", "podIP"],
  ["status", "podIPs", 0, "ip"],
  ["status", "conditions", 1, "lastProbeTime"],
] as const;

describe("a List streamed item by item", () => {
  it("gives the objects, values and citations the whole-text reader gives (managedFields dropped)", () => {
    const r = rng(3);
    const items = Array.from({ length: 300 }, (_, i) => pod(i, 7, r));
    // kubectl's 4-space form, and the compact form the API returns (one long line)
    for (const text of [
      JSON.stringify({ apiVersion: "v1", items, kind: "List", metadata: {} }, null, 4),
      JSON.stringify({ kind: "PodList", apiVersion: "v1", metadata: {}, items }),
    ]) {
      const whole = readKubeObjects(text, "cluster/pods.json");
      const source = openSnapshot(snapshotWith("pods.json", text));
      const streamed = streamClusterFile(source, "cluster/pods.json", 0);
      assert.ok(streamed, "streamed");
      assert.deepEqual(streamed.diagnostics, whole.diagnostics);
      assert.equal(streamed.value.length, 300);
      for (let i = 0; i < 300; i += 37) {
        const a = whole.value[i]!;
        const b: KubeObject = streamed.value[i]!;
        assert.equal(b.name, a.name);
        assert.equal(b.kind, "Pod");
        assert.deepEqual(b.labels, a.labels);
        const { managedFields: _, ...meta } = a.raw["metadata"] as Record<string, unknown>;
        assert.deepEqual(b.raw, { ...a.raw, metadata: meta });
        for (const p of PATHS.slice(1)) {
          const wa = a.locate(p);
          const wb = b.locate(p);
          assert.equal(wb?.line, wa?.line, `${i} ${p.join(".")}`);
          assert.equal(wb?.col, wa?.col, `${i} ${p.join(".")}`);
        }
        assert.equal(b.source.line, a.source.line);
      }
    }
  });

  it("cites a line inside a string field (a ConfigMap's config block) as the whole reader does", () => {
    const cm = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "ip-masq-agent", namespace: "kube-system" },
      data: { config: "nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 10.20.0.0/16\n" },
    };
    const text = JSON.stringify({ apiVersion: "v1", items: [cm, cm], kind: "List" }, null, 4);
    const whole = readKubeObjects(text, "cluster/cm.json").value[1]!;
    const streamed = streamClusterFile(
      openSnapshot(snapshotWith("cm.json", text)),
      "cluster/cm.json",
      0,
    );
    const b = streamed?.value[1];
    assert.deepEqual(
      b?.locateInString(["data", "config"], 3),
      whole.locateInString(["data", "config"], 3),
    );
  });

  it("items of an API list (PodList) take its kind; a list with a UTF-8 byte-order mark is read", () => {
    const text = `\ufeff${JSON.stringify({ kind: "PodList", apiVersion: "v1", items: [{ metadata: { name: "a" } }] })}`;
    const streamed = streamClusterFile(
      openSnapshot(snapshotWith("p.json", text)),
      "cluster/p.json",
      0,
    );
    assert.equal(streamed?.value[0]?.kind, "Pod");
    assert.equal(streamed?.value[0]?.apiVersion, "v1");
  });

  it("strings with escaped quotes and backslashes across buffer ends do not confuse it", () => {
    const names = ['a\\"b', "c\\\\", '\\\\\\"', "}]{[", "é✓\u2028"];
    const items = names.map((n) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: n },
    }));
    const bytes = Buffer.from(JSON.stringify({ items }));
    // every split of the text into two buffers: a tiny chunked source
    for (let cut = 1; cut < bytes.length; cut += 3) {
      const got: string[] = [];
      const src = bytesSource(bytes);
      const chunked = {
        size: src.size,
        read: (into: Buffer, pos: number) =>
          src.read(into.subarray(0, pos < cut ? cut - pos : 7), pos),
      };
      const r = streamJsonList(chunked, (it) =>
        got.push((it.value as { metadata: { name: string } }).metadata.name),
      );
      assert.equal(r.problem, undefined, `cut ${cut}`);
      assert.deepEqual(got, names, `cut ${cut}`);
    }
  });

  it("a List cut short keeps the items before the cut and names the place", () => {
    const items = Array.from({ length: 50 }, (_, i) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: `c${i}` },
    }));
    const text = JSON.stringify({ apiVersion: "v1", kind: "List", items }, null, 2);
    const cut = text.slice(0, Math.floor(text.length * 0.6));
    const streamed = streamClusterFile(
      openSnapshot(snapshotWith("c.json", cut)),
      "cluster/c.json",
      0,
    );
    assert.ok(streamed);
    assert.ok(streamed.value.length > 20 && streamed.value.length < 50);
    assert.equal(streamed.diagnostics.at(-1)?.code, "JSON_SYNTAX");
    assert.match(streamed.diagnostics.at(-1)?.message ?? "", /cut short/);
  });

  it("an item that is not valid JSON is skipped with its line; the others are read", () => {
    const text =
      '{"kind":"List","items":[\n{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},\n{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name": nope}},\n{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}\n]}\n';
    const streamed = streamClusterFile(
      openSnapshot(snapshotWith("c.json", text)),
      "cluster/c.json",
      0,
    );
    assert.deepEqual(
      streamed?.value.map((o) => o.name),
      ["a", "c"],
    );
    assert.equal(streamed?.diagnostics[0]?.source?.line, 3);
  });

  it("leaves to the whole-text reader what is not a List object (an array, several documents)", () => {
    const arr = streamClusterFile(openSnapshot(snapshotWith("a.json", "[1]")), "cluster/a.json", 0);
    assert.equal(arr, undefined);
    const one = JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } });
    assert.equal(
      streamClusterFile(openSnapshot(snapshotWith("o.json", one)), "cluster/o.json", 0),
      undefined,
    );
  });

  it("reads from an archive's bytes as from a file", () => {
    const text = readFileSync(
      join(
        snapshotWith(
          "x.json",
          JSON.stringify({
            kind: "List",
            items: [{ apiVersion: "v1", kind: "Node", metadata: { name: "n" } }],
          }),
        ),
        "cluster/x.json",
      ),
    );
    const r = streamJsonList(bytesSource(text), () => {});
    assert.equal(r.count, 1);
  });
});
