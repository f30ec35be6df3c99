/**
 * Child of the cluster-scale benchmark: loads one snapshot (as `diagnose` does before it asks
 * anything) and prints, as one JSON line, the time taken, what was read and this process's peak
 * resident memory. Run in its own process so the peak is the load's alone.
 *
 *   node --import tsx bench/load-snapshot-child.ts SNAPSHOT_DIR
 */
import { loadSnapshot } from "../src/snapshot/load.ts";
import { openSnapshot } from "../src/snapshot/source.ts";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: load-snapshot-child.ts SNAPSHOT_DIR");
  process.exit(2);
}
const t0 = performance.now();
const snap = loadSnapshot(openSnapshot(dir));
const ms = performance.now() - t0;
const errors = snap.diagnostics.filter((d) => d.severity === "error").length;
console.log(
  JSON.stringify({
    ms: Math.round(ms),
    objects: snap.objects.length,
    nodes: snap.nodes.size,
    errors,
    firstError: snap.diagnostics.find((d) => d.severity === "error")?.message,
    peakRssBytes: process.resourceUsage().maxRSS * 1024,
  }),
);
