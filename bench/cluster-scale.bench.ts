/**
 * Cluster-scale benchmark: loading a snapshot whose cluster/pods.json is `kubectl get pods -A -o
 * json` of 50k and 500k pods (made by ./gen-cluster.ts, ~5.5 KB a pod as kubectl indents it), and
 * snapshots of 500 and 5,000 nodes (a Node List and four files per node), each in a child process
 * of its own (bench/load-snapshot-child.ts) whose peak resident memory is the load's alone. The
 * pods' child runs with `--max-old-space-size` set to the README's budget (1.5x the file): running
 * out of it fails the goal.
 *
 * Goals: peak memory, above what loading an empty List takes (podpath's code, ~90 MB), under 1.5x
 * the largest file; time and memory grow linearly (500k/50k and 5000/500 at most 12x, linear
 * being 10x), each size loaded in turn with the other (small-large-small-large-small) and compared
 * by its mean time, so that the machine's drift during the run is not counted as growth. Prints PASS/MISS per goal; exits non-zero only when it
 * could not measure. `PODPATH_BENCH_SCALE=0.1` runs a tenth of every size (a quick check).
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeNodesSnapshot, writePodList } from "./gen-cluster.ts";

const SCALE = Number(process.env["PODPATH_BENCH_SCALE"] ?? "1");
const CHILD = join(import.meta.dirname, "load-snapshot-child.ts");
/** The README's budget: peak memory under 1.5x the largest file. */
const BUDGET = 1.5;
/** A linear growth is 10x for 10x the input; this much is still called linear. */
const LINEAR_MAX = 12;
/** A child that takes longer has hung: a failure, not a wait. */
const TIMEOUT_MS = 30 * 60_000;

interface Load {
  ms: number;
  objects: number;
  nodes: number;
  errors: number;
  firstError?: string;
  peakRssBytes: number;
}

const mb = (b: number) => `${(b / 1048576).toFixed(0)} MB`;
/** The order of the loads: each large one between two small ones. */
const ALTERNATE = (small: number, large: number) => [small, large, small, large, small];
const meanMs = (runs: readonly Load[]) => runs.reduce((a, r) => a + r.ms, 0) / runs.length;
/** The highest peak of the runs (the budget holds for every one). */
const peak = (runs: readonly Load[]) => Math.max(...runs.map((r) => r.peakRssBytes));
const seconds = (runs: readonly Load[]) =>
  `${(meanMs(runs) / 1000).toFixed(1)} s (${runs.map((r) => (r.ms / 1000).toFixed(1)).join(", ")})`;
const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");

function load(dir: string, heapMb?: number): Load {
  const args = [
    ...(heapMb ? [`--max-old-space-size=${heapMb}`] : []),
    "--import",
    "tsx",
    CHILD,
    dir,
  ];
  const r = spawnSync(process.execPath, args, {
    encoding: "utf8",
    timeout: TIMEOUT_MS,
    killSignal: "SIGKILL",
    maxBuffer: 1 << 20,
  });
  if (r.error || r.status !== 0) {
    throw new Error(
      `loading ${dir} failed (${r.error?.message ?? `exit ${r.status}, signal ${r.signal}`}): ${r.stderr.slice(-600)}`,
    );
  }
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Load;
}

function main(): number {
  const tmp = mkdtempSync(join(tmpdir(), "podpath-bench-cluster-"));
  try {
    const empty = join(tmp, "empty");
    mkdirSync(join(empty, "cluster"), { recursive: true });
    writePodList(join(empty, "cluster/pods.json"), 0);
    const base = load(empty);
    console.log(`baseline (a child that loads an empty List): peak ${mb(base.peakRssBytes)}`);

    // The small and the large input are loaded in turn, small-large-small-large-small, and the
    // growth is the mean time of the large loads over the mean of the small ones around them: the
    // speed of a shared machine drifts by a third within minutes (the same 50k-pod load measured
    // 2.1 s and 3.8 s a quarter of an hour apart), which one run of each would count as growth.
    const [small, large] = [50_000, 500_000].map((x) => Math.round(x * SCALE)) as [number, number];
    const pods = new Map<number, { bytes: number; dir: string; runs: Load[] }>();
    for (const n of [small, large]) {
      const dir = join(tmp, `pods-${n}`);
      mkdirSync(join(dir, "cluster"), { recursive: true });
      const file = join(dir, "cluster/pods.json");
      writePodList(file, n);
      pods.set(n, { bytes: statSync(file).size, dir, runs: [] });
    }
    for (const n of ALTERNATE(small, large)) {
      const p = pods.get(n)!;
      // the budget: 1.5x the file, above what podpath itself takes (its code, ~64 MB of heap)
      const r = load(p.dir, 64 + Math.ceil((p.bytes * BUDGET) / 1048576));
      if (r.objects !== n) throw new Error(`${n} pods: read ${r.objects} (${r.firstError})`);
      p.runs.push(r);
    }
    for (const [n, p] of pods) {
      rmSync(p.dir, { recursive: true, force: true });
      // podpath's own code and heap (the baseline) come on top of the budget
      const ratio = (peak(p.runs) - base.peakRssBytes) / p.bytes;
      console.log(
        `pods List ${n.toLocaleString("en-US")} (${mb(p.bytes)}): ${seconds(p.runs)}, peak ${mb(peak(p.runs))}, above the baseline ${ratio.toFixed(2)}x the file  ${verdict(ratio <= BUDGET)} (goal <= ${BUDGET}x)`,
      );
    }
    const [p1, p2] = [pods.get(small)!, pods.get(large)!];
    const pt = meanMs(p2.runs) / meanMs(p1.runs);
    const pm = (peak(p2.runs) - base.peakRssBytes) / (peak(p1.runs) - base.peakRssBytes);
    console.log(
      `pods growth ${large}/${small}: time ${pt.toFixed(1)}x ${verdict(pt <= LINEAR_MAX)} (mean of the loads), memory above the baseline ${pm.toFixed(1)}x ${verdict(pm <= LINEAR_MAX)} (linear = 10x)`,
    );

    const [fewer, more] = [500, 5000].map((x) => Math.round(x * SCALE)) as [number, number];
    const nodes = new Map<number, { dir: string; runs: Load[] }>();
    for (const n of [fewer, more]) {
      const dir = join(tmp, `nodes-${n}`);
      writeNodesSnapshot(dir, n);
      nodes.set(n, { dir, runs: [] });
    }
    for (const n of ALTERNATE(fewer, more)) {
      const s = nodes.get(n)!;
      const r = load(s.dir);
      if (r.nodes !== n) throw new Error(`${n} nodes: read ${r.nodes} (${r.firstError})`);
      s.runs.push(r);
    }
    for (const [n, s] of nodes) {
      rmSync(s.dir, { recursive: true, force: true });
      console.log(
        `snapshot of ${n.toLocaleString("en-US")} nodes (${4 * n + 1} files): ${seconds(s.runs)}, peak ${mb(peak(s.runs))}, ${((peak(s.runs) - base.peakRssBytes) / n / 1024).toFixed(0)} KB/node above the baseline`,
      );
    }
    const [n1, n2] = [nodes.get(fewer)!, nodes.get(more)!];
    const nt = meanMs(n2.runs) / meanMs(n1.runs);
    const nm = (peak(n2.runs) - base.peakRssBytes) / (peak(n1.runs) - base.peakRssBytes);
    console.log(
      `nodes growth ${more}/${fewer}: time ${nt.toFixed(1)}x ${verdict(nt <= LINEAR_MAX)} (mean of the loads), memory above the baseline ${nm.toFixed(1)}x ${verdict(nm <= LINEAR_MAX)} (linear = 10x)`,
    );
    return 0;
  } catch (e) {
    console.error(`cluster-scale benchmark could not measure: ${(e as Error).message}`);
    return 1;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

process.exit(main());
