/**
 * Fuzz: `verifyChange` and `planMasquerade` on damaged copies of the example replica pair
 * (truncated dumps and captures, garbage bytes, garbage YAML, files dropped). Neither may throw;
 * the damage shows up as diagnostics (a plan may refuse with its own PlanError, which the CLI
 * turns into exit 2), and the answers render.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { PlanError, planMasquerade } from "./plan.ts";
import { memorySnapshot } from "./plan-fixtures.test.ts";
import { renderMasqueradePlanText, renderMasqueradePlanYaml } from "./plan-render.ts";
import { verifyChange } from "./proof.ts";
import { renderChangeRecordMarkdown, renderChangeRecordText } from "./proof-render.ts";

const ROOT = join(import.meta.dirname, "../../..");

function readTree(dir: string): Record<string, Uint8Array> {
  const out: Record<string, Uint8Array> = {};
  for (const f of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    const abs = join(dir, f);
    try {
      // a copy: a Buffer's slice is a view, and damage must not reach the originals
      out[relative(dir, abs).split(sep).join("/")] = new Uint8Array(readFileSync(abs));
    } catch {
      // a folder
    }
  }
  delete out["README.md"];
  return out;
}

const BEFORE = readTree(join(ROOT, "examples/snat-exception-list"));
const AFTER = readTree(join(ROOT, "examples/snat-exception-list-allowlisted"));

const GARBAGE_YAML = [
  "{{{",
  "- [a, b\n",
  "kind: ConfigMap\nmetadata: 7\ndata: [1]\n",
  "apiVersion: v1\nkind: List\nitems: {a: 1}\n",
  "a: &x [*x, *x]\n",
  "kind: RemoteSite\nname: x\nprefixes: [not-a-cidr]\nallowlists: 3\n",
  "\u0000\u0001\u0002",
];

type Damage =
  | { kind: "truncate"; file: number; at: number }
  | { kind: "garbage"; file: number; bytes: Uint8Array }
  | { kind: "yaml"; file: number; text: number }
  | { kind: "drop"; file: number }
  | { kind: "flip"; file: number; at: number; value: number };

const damage: fc.Arbitrary<Damage> = fc.oneof(
  fc.record({ kind: fc.constant("truncate" as const), file: fc.nat(), at: fc.nat() }),
  fc.record({
    kind: fc.constant("garbage" as const),
    file: fc.nat(),
    bytes: fc.uint8Array({ maxLength: 300 }),
  }),
  fc.record({
    kind: fc.constant("yaml" as const),
    file: fc.nat(),
    text: fc.nat({ max: GARBAGE_YAML.length - 1 }),
  }),
  fc.record({ kind: fc.constant("drop" as const), file: fc.nat() }),
  fc.record({
    kind: fc.constant("flip" as const),
    file: fc.nat(),
    at: fc.nat(),
    value: fc.integer({ min: 0, max: 255 }),
  }),
);

function apply(
  files: Record<string, Uint8Array>,
  list: readonly Damage[],
): Record<string, Uint8Array> {
  const out = { ...files };
  for (const d of list) {
    const names = Object.keys(out).sort();
    if (names.length === 0) break;
    const name = names[d.file % names.length]!;
    const data = out[name]!;
    switch (d.kind) {
      case "truncate":
        out[name] = data.slice(0, data.length === 0 ? 0 : d.at % data.length);
        break;
      case "garbage":
        out[name] = d.bytes;
        break;
      case "yaml":
        out[name] = new TextEncoder().encode(GARBAGE_YAML[d.text]!);
        break;
      case "drop":
        delete out[name];
        break;
      case "flip": {
        const copy = data.slice();
        if (copy.length > 0) copy[d.at % copy.length] = d.value;
        out[name] = copy;
        break;
      }
    }
  }
  return out;
}

describe("verify and plan on damaged snapshots", () => {
  it("verifyChange never throws and always renders", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(damage, { minLength: 1, maxLength: 4 }),
        fc.array(damage, { maxLength: 3 }),
        async (db, da) => {
          const before = memorySnapshot("before", apply(BEFORE, db));
          const after = memorySnapshot("after", apply(AFTER, da));
          const r = await verifyChange(before, after);
          assert.equal(typeof r.proof, "string");
          assert.ok(renderChangeRecordMarkdown(r).startsWith("# Change record"));
          renderChangeRecordText(r);
          JSON.stringify(r, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
        },
      ),
      { numRuns: 60 },
    );
  });

  it("planMasquerade never throws except to refuse (PlanError), and always renders", () => {
    let planned = 0;
    fc.assert(
      fc.property(fc.array(damage, { minLength: 1, maxLength: 4 }), (list) => {
        const snap = memorySnapshot("before", apply(BEFORE, list));
        for (const strategy of ["narrow", "keep-pod-identity"] as const) {
          try {
            const p = planMasquerade(snap, { strategy });
            planned++;
            renderMasqueradePlanText(p);
            renderMasqueradePlanYaml(p);
          } catch (e) {
            if (!(e instanceof PlanError)) throw e;
            assert.match(e.message, /pod range|destination|--dest/);
          }
        }
      }),
      { numRuns: 80 },
    );
    assert.ok(planned > 0, "some damaged snapshots still give a plan");
  });

  it("a truncated dump is a diagnostic naming the file, and the record is still written", async () => {
    const files = { ...AFTER };
    const dump = files["nodes/gke-lab-default-0/iptables-save.txt"]!;
    // cut inside the agent chain's RETURN rule: a partial line, and no COMMIT
    const cut = Buffer.from(dump).indexOf("-d 10.4.0.0/14") + 8;
    files["nodes/gke-lab-default-0/iptables-save.txt"] = dump.slice(0, cut);
    const after = memorySnapshot("after", files);
    assert.ok(
      after.diagnostics.some((d) => d.source?.file === "nodes/gke-lab-default-0/iptables-save.txt"),
      JSON.stringify(after.diagnostics),
    );
    const r = await verifyChange(memorySnapshot("before", BEFORE), after);
    assert.ok(r.proof.startsWith("tcp 10.4.0.5 → 10.20.30.40:5432"));
  });
});
