// Runs every *.test.ts under src/ and test/ with node:test (via tsx).
// Node 20's `--test` without paths skips .ts files and would pass with zero tests, so the files are
// listed here explicitly, and the run fails when none are found.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";

const args = process.argv.slice(2);
const filters = args.filter((a) => !a.startsWith("-"));
const flags = args.filter((a) => a.startsWith("-"));
const files = ["src", "test"]
  .filter(existsSync)
  .flatMap((dir) =>
    readdirSync(dir, { recursive: true, encoding: "utf8" })
      .filter((f) => f.endsWith(".test.ts"))
      .map((f) => `${dir}/${f}`),
  )
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error("no test files found");
  process.exit(1);
}
const reporter = process.env.CI ? "tap" : "spec";
const r = spawnSync(
  process.execPath,
  [
    "--import",
    "tsx",
    "--test",
    `--test-reporter=${reporter}`,
    "--test-concurrency=2",
    ...flags,
    ...files,
  ],
  { stdio: "inherit" },
);
process.exit(r.status ?? 1);
