/**
 * Runs every benchmark (`bench/*.bench.ts`) one after another, each in its own process, and
 * prints what each measured. Benchmarks compare podpath against a reference tool measured in the
 * same run, so the figures are ratios, not absolute times. `npm run bench -- NAME` runs only
 * the benchmarks whose file name contains NAME.
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const filters = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith(".bench.ts"))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error("no benchmarks found");
  process.exit(1);
}
let failed = 0;
for (const f of files) {
  console.log(`\n== ${f}`);
  const r = spawnSync(process.execPath, ["--import", "tsx", join(here, f)], { stdio: "inherit" });
  if (r.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);
