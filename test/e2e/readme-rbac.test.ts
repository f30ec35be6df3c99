/**
 * The README shows the RBAC rules; they must be the ones shipped in deploy/rbac (which the
 * collection tests check against the requests podpath makes).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

const root = join(import.meta.dirname, "../..");
const withoutComments = (t: string) =>
  `${t
    .split("\n")
    .filter((l) => !l.startsWith("#"))
    .join("\n")
    .trim()}\n`;

describe("README RBAC", () => {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  for (const f of ["podpath-reader.yaml", "podpath-node-state.yaml"]) {
    it(`shows deploy/rbac/${f} as shipped`, () => {
      const shipped = withoutComments(readFileSync(join(root, "deploy/rbac", f), "utf8"));
      assert.ok(readme.includes(`\`\`\`yaml\n${shipped}\`\`\``), `README's copy of ${f} differs`);
    });
  }
});
