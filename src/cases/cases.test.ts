/**
 * The case contract, checked on the source: every finding id is decided (`id: "…"` in a finding)
 * in exactly one file, and that file lies in the folder of the case that owns the id.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { describe, it } from "node:test";
import { FINDING_IDS } from "../model/types.ts";
import { CASE_ENTRIES, caseOf, loadCases } from "./index.ts";

const SRC = join(import.meta.dirname, "..");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !f.includes("test-helpers"))
    .map((f) => join(dir, f));
}

/** For each id, the files (relative to src/) that decide it. */
function deciders(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(/\bid: "([a-z]+\/[a-z-]+)"/g)) {
      const list = out.get(m[1]!) ?? [];
      const rel = relative(SRC, file).split(sep).join("/");
      if (!list.includes(rel)) list.push(rel);
      out.set(m[1]!, list);
    }
  }
  return out;
}

describe("the case registry", () => {
  const found = deciders();

  it("has every finding id decided in exactly one file, in its case's folder", () => {
    for (const id of FINDING_IDS) {
      const files = found.get(id) ?? [];
      assert.equal(
        files.length,
        1,
        `${id} is decided in ${files.length} files: ${files.join(", ")}`,
      );
      assert.ok(
        files[0]!.startsWith(`cases/${caseOf(id).name}/`),
        `${id} is decided in ${files[0]}, outside cases/${caseOf(id).name}/`,
      );
    }
  });

  it("knows every id that a file decides", () => {
    for (const id of found.keys()) {
      assert.ok((FINDING_IDS as readonly string[]).includes(id), `${id} is not in FINDING_IDS`);
    }
  });

  it("names each case after its folder", () => {
    const folders = readdirSync(join(SRC, "cases"), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
    for (const c of CASE_ENTRIES) assert.ok(folders.includes(c.name), c.name);
  });

  it("lists each case under its own name and ids, and loads it", async () => {
    const cases = await loadCases();
    assert.equal(cases.length, CASE_ENTRIES.length);
    CASE_ENTRIES.forEach((e, i) => {
      assert.equal(cases[i]!.name, e.name);
      assert.deepEqual(cases[i]!.findingIds, e.findingIds);
    });
  });
});
