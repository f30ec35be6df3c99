/**
 * @module evidence/json-source.test — the on-demand JSON locator against the YAML reader (JSON is
 * YAML): both must cite the same line and column for every field of random JSON documents.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { jsonLocator, offsetCiter, offsetOfStringLine } from "./json-source.ts";
import { readKubeObjects } from "./kube-objects.ts";
import { readYamlSource } from "./yaml-source.ts";

type P = (string | number)[];
function paths(v: unknown, base: P = []): P[] {
  const out: P[] = [base];
  if (Array.isArray(v)) {
    for (const [i, x] of v.entries()) out.push(...paths(x, [...base, i]));
  } else if (v !== null && typeof v === "object")
    for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...base, k]));
  return out;
}

describe("jsonLocator", () => {
  it("cites every field where the YAML reader does", () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 }),
        fc.constantFrom(0, 2, 4),
        (value, indent) => {
          const text = JSON.stringify(value, null, indent);
          const loc = jsonLocator(text);
          const cite = offsetCiter(text, "f");
          const { source } = readYamlSource(text, "f");
          const root = source.documents[0]!.doc.contents;
          for (const p of paths(JSON.parse(text))) {
            const spot = loc.find(p);
            assert.ok(spot, JSON.stringify(p));
            const c = text[spot.value];
            const at =
              (c === "{" || c === "[" || c === "n") && spot.key !== undefined
                ? spot.key
                : spot.value;
            const ours = cite(at);
            const theirs = source.locate(root, p);
            assert.deepEqual(
              [ours.line, ours.col],
              [theirs?.line, theirs?.col],
              `${JSON.stringify(p)} in ${text}`,
            );
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("finds string lines after escaped newlines, and nothing past the end", () => {
    const text = '{"a": "x\\ny\\\\nz\\nw"}';
    const spot = jsonLocator(text).find(["a"])!;
    assert.equal(text.slice(offsetOfStringLine(text, spot.value, 1)!).startsWith("y"), true);
    assert.equal(text.slice(offsetOfStringLine(text, spot.value, 2)!).startsWith("w"), true);
    assert.equal(offsetOfStringLine(text, spot.value, 3), undefined);
  });

  it("reads a large kubectl JSON list in linear time", { timeout: 30_000 }, () => {
    const item = (i: number) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: `p${i}`, namespace: "n", labels: { app: "a" } },
      spec: { nodeName: "n1", containers: [{ name: "c", image: "i" }] },
    });
    const text = JSON.stringify(
      { apiVersion: "v1", kind: "List", items: Array.from({ length: 20_000 }, (_, i) => item(i)) },
      null,
      4,
    );
    const { value, diagnostics } = readKubeObjects(text, "pods.json");
    assert.deepEqual(diagnostics, []);
    assert.equal(value.length, 20_000);
    const last = value[19_999]!;
    assert.equal(last.name, "p19999");
    assert.equal(
      text.split("\n")[last.locate(["spec", "nodeName"])!.line - 1]?.trim(),
      '"nodeName": "n1",',
    );
  });
});
