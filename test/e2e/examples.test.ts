/**
 * The embedded examples answer as the lab variant that made them says: every folder under
 * examples/ comes from a variant in lab-variants.ts (scripts/make-examples.ts), and `podpath
 * diagnose` on it (the built CLI, as a user runs it) gives the variant's findings and none of the
 * ones it rules out, with the exit code DESIGN.md gives for them.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { LAB_VARIANTS } from "./lab-variants.ts";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");

describe("the examples", () => {
  const folders = readdirSync(join(ROOT, "examples"), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name);

  it("each comes from a lab variant, and each variant that names one has it", () => {
    const named = LAB_VARIANTS.flatMap((v) => (v.example ? [v.example] : []));
    for (const f of folders) assert.ok(named.includes(f), `examples/${f} has no lab variant`);
    for (const n of named) assert.ok(folders.includes(n), `variant example ${n} is missing`);
  });

  for (const v of LAB_VARIANTS.filter((x) => x.example !== undefined)) {
    const dir = join(ROOT, "examples", v.example!);
    it(`${v.example}: the findings of variant ${v.name}`, () => {
      assert.ok(existsSync(join(dir, "README.md")), "the example has a README");
      const r = spawnSync(process.execPath, [CLI, "diagnose", dir, "-o", "json"], {
        encoding: "utf8",
      });
      const answer = JSON.parse(r.stdout) as {
        findings: { id: string; severity: string }[];
      };
      const ids = answer.findings.map((f) => f.id);
      for (const id of v.findings.present) assert.ok(ids.includes(id), `${id} in ${ids}`);
      for (const id of v.findings.absent) assert.ok(!ids.includes(id), `${id} not in ${ids}`);
      const broken = answer.findings.some((f) => f.severity === "error");
      assert.equal(r.status, broken ? 1 : 0, r.stderr);
    });
    it(`${v.example}: its README names the command that made it`, () => {
      const readme = readFileSync(join(dir, "README.md"), "utf8");
      assert.ok(
        readme.includes(`podpath lab run ${v.scenario}${v.args.map((a) => ` ${a}`).join("")}`),
      );
    });
  }
});
