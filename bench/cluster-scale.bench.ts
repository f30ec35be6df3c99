/**
 * Cluster-scale benchmark: loading a snapshot whose cluster/pods.json is `kubectl get pods -A -o
 * json` of 50k and 500k pods (made by ./gen-cluster.ts, ~5.5 KB a pod as kubectl indents it), and
 * snapshots of 500 and 5,000 nodes (a Node List and four files per node), each in a child process
 * of its own (bench/load-snapshot-child.ts) whose peak resident memory is the load's alone. The
 * pods' child runs with `--max-old-space-size` set to the README's budget (1.5x the file): running
 * out of it fails the goal.
 *
 * Goals: peak memory, above what loading an empty List takes (podpath's code, ~90 MB), under 1.5x
 * the largest file; time and memory grow linearly (500k/50k and
 * 5000/500 at most 12x, linear being 10x). Prints PASS/MISS per goal; exits non-zero only when it
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

    const pods: { n: number; bytes: number; r: Load }[] = [];
    for (const n of [50_000, 500_000].map((x) => Math.round(x * SCALE))) {
      const dir = join(tmp, `pods-${n}`);
      mkdirSync(join(dir, "cluster"), { recursive: true });
      const file = join(dir, "cluster/pods.json");
      writePodList(file, n);
      const bytes = statSync(file).size;
      // the budget: 1.5x the file, above what podpath itself takes (its code, ~64 MB of heap)
      const r = load(dir, 64 + Math.ceil((bytes * BUDGET) / 1048576));
      rmSync(dir, { recursive: true, force: true });
      if (r.objects !== n) throw new Error(`${n} pods: read ${r.objects} (${r.firstError})`);
      // podpath's own code and heap (the baseline) come on top of the budget
      const ratio = (r.peakRssBytes - base.peakRssBytes) / bytes;
      console.log(
        `pods List ${n.toLocaleString("en-US")} (${mb(bytes)}): ${(r.ms / 1000).toFixed(1)} s, peak ${mb(r.peakRssBytes)}, above the baseline ${ratio.toFixed(2)}x the file  ${verdict(ratio <= BUDGET)} (goal <= ${BUDGET}x)`,
      );
      pods.push({ n, bytes, r });
    }
    const [p1, p2] = pods as [(typeof pods)[0], (typeof pods)[0]];
    const pt = p2.r.ms / p1.r.ms;
    const pm = (p2.r.peakRssBytes - base.peakRssBytes) / (p1.r.peakRssBytes - base.peakRssBytes);
    console.log(
      `pods growth ${p2.n}/${p1.n}: time ${pt.toFixed(1)}x ${verdict(pt <= LINEAR_MAX)}, memory above the baseline ${pm.toFixed(1)}x ${verdict(pm <= LINEAR_MAX)} (linear = 10x)`,
    );

    const nodes: { n: number; r: Load }[] = [];
    for (const n of [500, 5000].map((x) => Math.round(x * SCALE))) {
      const dir = join(tmp, `nodes-${n}`);
      writeNodesSnapshot(dir, n);
      const r = load(dir);
      rmSync(dir, { recursive: true, force: true });
      if (r.nodes !== n) throw new Error(`${n} nodes: read ${r.nodes} (${r.firstError})`);
      console.log(
        `snapshot of ${n.toLocaleString("en-US")} nodes (${4 * n + 1} files): ${(r.ms / 1000).toFixed(1)} s, peak ${mb(r.peakRssBytes)}, ${((r.peakRssBytes - base.peakRssBytes) / n / 1024).toFixed(0)} KB/node above the baseline`,
      );
      nodes.push({ n, r });
    }
    const [n1, n2] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
    const nt = n2.r.ms / n1.r.ms;
    const nm = (n2.r.peakRssBytes - base.peakRssBytes) / (n1.r.peakRssBytes - base.peakRssBytes);
    console.log(
      `nodes growth ${n2.n}/${n1.n}: time ${nt.toFixed(1)}x ${verdict(nt <= LINEAR_MAX)}, memory above the baseline ${nm.toFixed(1)}x ${verdict(nm <= LINEAR_MAX)} (linear = 10x)`,
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
