/**
 * End-to-end benchmark, as the user waits for it: the built CLI (`node dist/cli/main.js diagnose`,
 * run `npm run build` first, which bundles it) on a snapshot whose node carries a 10k-service
 * kube-proxy dump (made by bench/generators/gen-iptables.py), against the real
 * `iptables-restore --test` of the same dump in a lab namespace, interleaved run by run; and
 * start-up alone (`diagnose` of a snapshot with one empty List). Both are whole processes timed
 * from outside (wall clock, and the children's CPU). Also counts the modules each loads (ES
 * modules through a module hook, CommonJS ones from the require cache), which start-up mostly
 * consists of.
 *
 * Goal: diagnose at least 3x faster than iptables-restore --test, end to end (ratio of pairs,
 * median). Prints PASS/MISS, and the load average before and after (other work on the machine
 * shows in every figure but the ratio); exits non-zero only when it could not measure.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createLab, labUnavailableReason, type Namespace } from "../src/lab/netns.ts";

const ROOT = join(import.meta.dirname, "..");
const CLI = join(ROOT, "dist/cli/main.js");
const GEN = join(ROOT, "bench", "generators", "gen-iptables.py");
const RUNS = 9;
const GOAL = 3;

interface Timing {
  wallMs: number;
  cpuMs: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** A command timed by /usr/bin/time (wall, user+sys), its output discarded; `codes` expected. */
function timed(argv: string[], codes = [0, 1]): Timing {
  const r = spawnSync("/usr/bin/time", ["-f", "TIME %e %U %S", ...argv], {
    encoding: "utf8",
    maxBuffer: 256 << 20,
    timeout: 300_000,
  });
  const m = /TIME ([0-9.]+) ([0-9.]+) ([0-9.]+)\s*$/.exec(r.stderr);
  if (!m || !codes.includes(r.status ?? -1))
    throw new Error(`${argv.join(" ")} failed (${r.status}): ${r.stderr.slice(-400)}`);
  return { wallMs: Number(m[1]) * 1000, cpuMs: (Number(m[2]) + Number(m[3])) * 1000 };
}

/** A module hook that writes the path of every module loaded to $PODPATH_BENCH_MODULES. */
const HOOKS = `import { appendFileSync } from "node:fs";
export async function load(url, context, next) {
  if (url.startsWith("file:")) appendFileSync(process.env.PODPATH_BENCH_MODULES, url + "\\n");
  return next(url, context);
}`;
const PRELOAD = (hooks: string) => `import { register, createRequire } from "node:module";
import { appendFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
register(${JSON.stringify(hooks)});
const cache = createRequire(import.meta.url).cache;
process.on("exit", () => appendFileSync(process.env.PODPATH_BENCH_MODULES,
  Object.keys(cache).map((f) => pathToFileURL(f).href + "\\n").join("")));`;

/** How many modules a CLI run loads (each counted once), and how many of them are podpath's. */
function modulesLoaded(dir: string, args: string[], codes: number[]): { all: number; own: number } {
  const hooks = join(dir, "count-hooks.mjs");
  const preload = join(dir, "count-preload.mjs");
  const list = join(dir, "modules.txt");
  writeFileSync(hooks, HOOKS);
  writeFileSync(preload, PRELOAD(pathToFileURL(hooks).href));
  writeFileSync(list, "");
  const r = spawnSync(process.execPath, ["--import", preload, CLI, ...args], {
    env: { ...process.env, PODPATH_BENCH_MODULES: list },
    encoding: "utf8",
    maxBuffer: 256 << 20,
  });
  if (!codes.includes(r.status ?? -1))
    throw new Error(
      `module count: ${args.join(" ")} failed (${r.status}): ${r.stderr.slice(-400)}`,
    );
  const files = new Set(
    readFileSync(list, "utf8")
      .split("\n")
      .filter((u) => u.startsWith("file:"))
      .map((u) => fileURLToPath(u)),
  );
  files.delete(preload);
  const dist = join(ROOT, "dist");
  return { all: files.size, own: [...files].filter((f) => f.startsWith(dist)).length };
}

async function restoreOnce(ns: Namespace, file: string): Promise<Timing> {
  const r = await ns.exec(
    ["/usr/bin/time", "-f", "TIME %e %U %S", "iptables-restore", "--test", file],
    {
      timeoutMs: 300_000,
    },
  );
  const m = /TIME ([0-9.]+) ([0-9.]+) ([0-9.]+)\s*$/.exec(r.stderr);
  if (r.code !== 0 || !m)
    throw new Error(`iptables-restore --test failed: ${r.stderr.slice(0, 400)}`);
  return { wallMs: Number(m[1]) * 1000, cpuMs: (Number(m[2]) + Number(m[3])) * 1000 };
}

async function main(): Promise<number> {
  if (!existsSync(CLI)) {
    console.error("diagnose-e2e: dist/cli/main.js is missing; run npm run build first");
    return 1;
  }
  // `npm run build` bundles the CLI (scripts/bundle-cli.mjs); tsc alone leaves one module a file
  if (!readFileSync(CLI, "utf8").includes("../cli-chunks/")) {
    console.log(
      "diagnose-e2e: dist/cli/main.js is tsc's output, not the bundle (run npm run build): measured as it is",
    );
  }
  const dir = mkdtempSync(join(tmpdir(), "podpath-bench-e2e-"));
  const unavailable = labUnavailableReason();
  const lab = unavailable ? undefined : await createLab({ prefix: "ppe" });
  try {
    const snap = join(dir, "snap");
    mkdirSync(join(snap, "nodes/n1"), { recursive: true });
    const dump = join(snap, "nodes/n1/iptables-save.txt");
    const g = spawnSync("python3", [GEN, "--services", "10000", "-o", dump], { encoding: "utf8" });
    if (g.status !== 0) throw new Error(`gen-iptables.py failed: ${g.stderr}`);
    const empty = join(dir, "empty");
    mkdirSync(join(empty, "cluster"), { recursive: true });
    writeFileSync(
      join(empty, "cluster/empty.json"),
      '{"apiVersion":"v1","kind":"List","items":[]}\n',
    );

    const load = () =>
      loadavg()
        .map((x) => x.toFixed(2))
        .join(" ");
    const loadBefore = load();
    const ns = lab ? await lab.addNamespace("e2e") : undefined;
    if (!ns) console.log(`iptables-restore not measured: ${unavailable}`);
    const start: Timing[] = [];
    const pp: Timing[] = [];
    const ref: Timing[] = [];
    timed([process.execPath, CLI, "diagnose", snap, "-o", "json"]); // warm the page cache
    for (let i = 0; i < RUNS; i++) {
      // an empty List is "nothing in it" (exit 2), after the command's modules are loaded
      start.push(timed([process.execPath, CLI, "diagnose", empty, "-o", "json"], [2]));
      pp.push(timed([process.execPath, CLI, "diagnose", snap, "-o", "json"]));
      if (ns) ref.push(await restoreOnce(ns, dump));
    }
    console.log(`load average (1, 5, 15 min): ${loadBefore} before, ${load()} after`);
    const ms = (ts: Timing[], k: keyof Timing) => `${median(ts.map((t) => t[k])).toFixed(0)} ms`;
    const mods = (m: { all: number; own: number }) => `${m.all} modules (${m.own} of podpath's)`;
    const startMods = modulesLoaded(dir, ["diagnose", empty, "-o", "json"], [2]);
    const ppMods = modulesLoaded(dir, ["diagnose", snap, "-o", "json"], [0, 1]);
    console.log(
      `start-up (diagnose of one empty List): ${ms(start, "wallMs")} wall, ${ms(start, "cpuMs")} cpu, ${mods(startMods)}`,
    );
    console.log(
      `diagnose, 10k-service node: ${ms(pp, "wallMs")} wall, ${ms(pp, "cpuMs")} cpu, ${mods(ppMods)}`,
    );
    if (ref.length > 0) {
      console.log(
        `iptables-restore --test, same dump: ${ms(ref, "wallMs")} wall, ${ms(ref, "cpuMs")} cpu`,
      );
      const wall = median(ref.map((r, i) => r.wallMs / pp[i]!.wallMs));
      const cpu = median(ref.map((r, i) => r.cpuMs / pp[i]!.cpuMs));
      console.log(
        `diagnose end to end is ${wall.toFixed(2)}x faster (wall), ${cpu.toFixed(2)}x (cpu), median of pairs: ${wall >= GOAL ? "PASS" : "MISS"} (goal >= ${GOAL}x)`,
      );
    }
    return 0;
  } catch (e) {
    console.error(`diagnose-e2e benchmark could not measure: ${(e as Error).message}`);
    return 1;
  } finally {
    await lab?.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exit(await main());
