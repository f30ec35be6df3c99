/**
 * scripts/check-cycles.mjs (run by `npm run check`): passes on the project, and fails, naming the
 * files, on a tree whose folders import each other in a cycle.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const SCRIPT = join(import.meta.dirname, "../../scripts/check-cycles.mjs");
const tmp = mkdtempSync(join(tmpdir(), "pp-cycles-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

function run(src?: string) {
  return spawnSync(process.execPath, [SCRIPT], {
    encoding: "utf8",
    env: { ...process.env, ...(src ? { PODPATH_CYCLES_SRC: src } : {}) },
  });
}

describe("check-cycles", () => {
  it("finds no cycle between the project's folders", () => {
    const r = run();
    assert.equal(r.status, 0, r.stderr);
  });

  it("names the cycle and the imports that make it", () => {
    const src = join(tmp, "src");
    for (const d of ["a", "b", "cases/x"]) mkdirSync(join(src, d), { recursive: true });
    writeFileSync(
      join(src, "a/one.ts"),
      'import { two } from "../b/two.ts";\nexport const one = two;\n',
    );
    writeFileSync(
      join(src, "b/two.ts"),
      'export { one } from "../a/one.ts";\nexport const two = 2;\n',
    );
    writeFileSync(join(src, "cases/x/c.ts"), 'import { one } from "../../a/one.ts";\n');
    const r = run(src);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /import cycle between folders: a, b/);
    assert.match(r.stderr, /a -> b: a\/one\.ts imports \.\.\/b\/two\.ts/);
    assert.doesNotMatch(r.stderr, /cases\/x/);
  });
});
