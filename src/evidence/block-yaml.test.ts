/**
 * @module evidence/block-yaml.test — the fast block-YAML reader against the `yaml` package (through
 * evidence/yaml-source): wherever it answers, values and every cited position must be the same; on
 * kubectl's own output it must answer.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { stringify } from "yaml";
import { readBlockYaml } from "./block-yaml.ts";
import { readYamlSource } from "./yaml-source.ts";

type P = (string | number)[];
function paths(v: unknown, base: P = []): P[] {
  const out: P[] = [base];
  if (Array.isArray(v)) {
    for (const [i, x] of v.entries()) out.push(...paths(x, [...base, i]));
  } else if (v !== null && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...base, k]));
  }
  return out;
}

/** Same values and positions as the full parser; false when the fast reader declined. */
function agrees(text: string): boolean {
  const fast = readBlockYaml(text);
  const full = readYamlSource(text, "f");
  if (!fast) return false;
  assert.deepEqual(
    full.diagnostics.filter((d) => d.severity === "error"),
    [],
    text,
  );
  const docs = full.source.documents.filter((d) => d.value !== null && d.value !== undefined);
  assert.equal(fast.length, docs.length, text);
  const cite = (off: number | undefined) => {
    if (off === undefined) return undefined;
    const r = full.source.refAt(off);
    return [r.line, r.col];
  };
  fast.forEach((doc, n) => {
    const d = docs[n]!;
    assert.deepEqual(doc.value, d.value, text);
    const root = d.doc.contents;
    for (const p of paths(d.value)) {
      const want = full.source.locate(root, p);
      assert.deepEqual(
        cite(doc.locate(p)),
        want ? [want.line, want.col] : undefined,
        `${JSON.stringify(p)}\n${text}`,
      );
      const v = p.reduce<unknown>((o, k) => (o as Record<string | number, unknown>)[k], d.value);
      if (typeof v === "string") {
        for (let k = 1; k <= v.split("\n").length; k++) {
          const w = full.source.locateInString(root, p, k);
          assert.deepEqual(
            cite(doc.locateInString(p, k)),
            w ? [w.line, w.col] : undefined,
            `${JSON.stringify(p)} line ${k}\n${text}`,
          );
        }
      }
    }
  });
  return true;
}

const key = fc.oneof(
  fc.constantFrom(
    "name",
    "labels",
    "app.kubernetes.io/name",
    "k8s-app",
    "a b",
    "x:y",
    "- z",
    "#c",
    "true",
    "1",
    "null",
    "'q'",
    "a: b",
    "",
  ),
  fc.string({ maxLength: 6 }),
);
const leaf = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom(
    "10.0.0.0/8",
    "yes",
    "no",
    "on",
    "0777",
    "1e3",
    "0x1F",
    ".inf",
    "1.5",
    "-",
    "- a",
    "a: b",
    "#x",
    "a #b",
    "",
    " lead",
    "trail ",
    "multi\nline\n",
    "multi\nline",
    "\n\nx\n\n",
    "quote'd",
    'dq"',
    "tab\there",
    "~",
    "Null",
    "TRUE",
  ),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
);
const tree = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: "small" },
    leaf,
    fc.array(tie("node"), { maxLength: 3 }),
    fc.dictionary(key, tie("node"), { maxKeys: 4 }),
  ),
})).node;

describe("readBlockYaml", () => {
  it("agrees with the yaml package on everything it reads (values and positions)", {
    timeout: 120_000,
  }, () => {
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.dictionary(key, tree, { minKeys: 1, maxKeys: 5 }),
        fc.record({
          indentSeq: fc.boolean(),
          lineWidth: fc.constantFrom(0, 40, 80),
          indent: fc.constantFrom(2, 4),
        }),
        (value, opts) => {
          const text = stringify(value, { ...opts, aliasDuplicateObjects: false });
          if (agrees(text)) accepted++;
        },
      ),
      { numRuns: 3000 },
    );
    // The property must not pass by declining everything.
    assert.ok(accepted > 1000, `accepted only ${accepted}`);
  });

  it("agrees on mutated YAML (or declines)", { timeout: 120_000 }, () => {
    const base = readFileSync(
      new URL("fixtures/kube/nodes-daemonset.yaml", import.meta.url),
      "utf8",
    );
    fc.assert(
      fc.property(
        fc.nat(base.length),
        fc.nat(30),
        fc.constantFrom("", " ", "  ", "\n", "- ", ": ", "#", "|", "'", '"', "---\n", "x"),
        (at, del, ins) => {
          const text = base.slice(0, at) + ins + base.slice(Math.min(base.length, at + del));
          const full = readYamlSource(text, "f");
          if (full.diagnostics.some((d) => d.severity === "error")) {
            // Invalid YAML must never be accepted by the fast reader.
            assert.equal(readBlockYaml(text), undefined, text);
            return;
          }
          agrees(text);
        },
      ),
      { numRuns: 3000 },
    );
  });

  it("reads kubectl's own output", () => {
    for (const name of [
      "pods.yaml",
      "ns.yaml",
      "nodes-daemonset.yaml",
      "configmap-ip-masq-agent.yaml",
    ]) {
      const text = readFileSync(new URL(`fixtures/kube/${name}`, import.meta.url), "utf8");
      assert.equal(agrees(text), true, name);
    }
  });

  it("declines what it does not read", () => {
    for (const text of [
      "a: &x 1\nb: *x\n",
      "a: !!str 1\n",
      "a: {b: 1}\n",
      "a: >\n  folded\n",
      "a: 1.5\n",
      "a: b\na: c\n",
      "a:\n\t- b\n",
      "a: 'multi\n  line'\n",
      "a: x # c\n",
      "? a\n: b\n",
      "\ufeffa: b\n",
      "a: b\r\n",
    ]) {
      assert.equal(readBlockYaml(text), undefined, text);
    }
  });
});
