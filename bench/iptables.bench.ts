/**
 * iptables benchmark: podpath's iptables-save read + parse + nat compile against the real
 * `iptables-restore --test` on the same kube-proxy-sized dumps (1k / 10k / 30k service ports, made
 * by bench/generators/gen-iptables.py into a temporary directory), measured in the same run and
 * interleaved so both see the same machine load; then nat flow evaluations per second on the 10k
 * table. Prints PASS/MISS per goal; exits non-zero only when it could not measure.
 *
 * Goals: parse+compile >= 3x faster than iptables-restore at 10k; 30k time <= 3.3x the 10k time;
 * >= 100,000 flow evaluations per second on the 10k table. Ratios are taken pair by pair (a run
 * of one next to a run of the other) and their median is judged, so that the machine's speed
 * drifting during the run moves both sides of a ratio alike.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { compileNat } from "../src/iptables/nat-eval.ts";
import type { Flow } from "../src/iptables/nat-trace.ts";
import { parseIptablesSave } from "../src/iptables/save-parser.ts";
import { ruleCount } from "../src/iptables/saved-chain.ts";
import { createLab, labUnavailableReason, type Namespace } from "../src/lab/netns.ts";
import { formatIp, type Ip, parseIp } from "../src/net/cidr.ts";
import { readTextFile } from "../src/snapshot/source.ts";

const GEN = join(import.meta.dirname, "generators", "gen-iptables.py");
const SIZES = [1000, 10000, 30000] as const;
const RUNS: Record<number, number> = { 1000: 5, 10000: 5, 30000: 3 };
/** 10k / 30k pairs for the growth ratio. */
const GROWTH_PAIRS = 7;

interface Timing {
  wallMs: number;
  cpuMs: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const fmtMs = (ms: number) => `${ms.toFixed(0)} ms`;
const rate = (n: number, ms: number) => `${Math.round(n / (ms / 1000)).toLocaleString("en-US")}/s`;

function podpathOnce(file: string): Timing & { rules: number } {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  // read as a snapshot's files are read (snapshot/source), then parsed and compiled
  const { value } = parseIptablesSave(readTextFile(file), file);
  compileNat(value);
  const wallMs = performance.now() - t0;
  const cu = process.cpuUsage(c0);
  // counted without building the rules (building half a million of them here would leave the
  // next measured run their garbage to collect)
  let rules = 0;
  for (const t of value.tables.values()) for (const c of t.chains.values()) rules += ruleCount(c);
  return { wallMs, cpuMs: (cu.user + cu.system) / 1000, rules };
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
    throw new Error(`iptables-restore --test ${file} failed: ${r.stderr.slice(0, 400)}`);
  return { wallMs: Number(m[1]) * 1000, cpuMs: (Number(m[2]) + Number(m[3])) * 1000 };
}

function flowsFor(file: string): Flow[] {
  // Service VIPs and ports as kube-proxy wrote them, plus external and pod destinations
  const text = readFileSync(file, "utf8");
  const vips: { ip: Ip; port: number; proto: string }[] = [];
  for (const m of text.matchAll(
    /^-A KUBE-SERVICES -d ([0-9.]+)\/32 -p (tcp|udp) .*?--dport ([0-9]+)/gm,
  )) {
    vips.push({ ip: parseIp(m[1]!), proto: m[2]!, port: Number(m[3]) });
    if (vips.length >= 2000) break;
  }
  const flows: Flow[] = [];
  let seed = 7;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  for (let i = 0; i < 2000; i++) {
    const src = parseIp(`10.4.1.${2 + rnd(250)}`);
    const kind = rnd(10);
    if (kind < 5 && vips.length > 0) {
      const v = vips[rnd(vips.length)]!;
      flows.push({
        src,
        dst: v.ip,
        proto: v.proto,
        sport: 30000 + rnd(30000),
        dport: v.port,
        origin: "pod",
        outIface: "eth0",
      });
    } else if (kind < 8) {
      const dst = parseIp(
        `${[35, 8, 142, 10, 172, 192][rnd(6)]}.${rnd(256)}.${rnd(256)}.${1 + rnd(250)}`,
      );
      flows.push({
        src,
        dst,
        proto: "tcp",
        sport: 30000 + rnd(30000),
        dport: 443,
        origin: "pod",
        outIface: "eth0",
      });
    } else {
      const dst = parseIp(`10.${4 + rnd(4)}.${rnd(256)}.${2 + rnd(250)}`);
      flows.push({
        src,
        dst,
        proto: "tcp",
        sport: 30000 + rnd(30000),
        dport: 8080,
        origin: "pod",
        outIface: "eth0",
      });
    }
  }
  return flows;
}

async function main(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "podpath-bench-ipt-"));
  const unavailable = labUnavailableReason();
  const lab = unavailable ? undefined : await createLab({ prefix: "ppb" });
  try {
    const ns = lab ? await lab.addNamespace("ipt") : undefined;
    const version = spawnSync("iptables-restore", ["--version"], {
      encoding: "utf8",
    }).stdout.trim();
    console.log(
      `reference: ${version || "iptables-restore"} --test in namespace ${ns?.name ?? "(none)"}`,
    );
    if (!ns) console.log(`iptables-restore not measured: ${unavailable}`);
    const results: Record<
      number,
      {
        rules: number;
        bytes: number;
        pp: Timing;
        ref?: Timing;
        pairWall?: number;
        pairCpu?: number;
      }
    > = {};
    for (const n of SIZES) {
      const file = join(dir, `iptables-${n}.txt`);
      const g = spawnSync("python3", [GEN, "--services", String(n), "-o", file], {
        encoding: "utf8",
      });
      if (g.status !== 0 || !existsSync(file))
        throw new Error(`gen-iptables.py failed: ${g.stderr}`);
      const pp: Timing[] = [];
      const ref: Timing[] = [];
      let rules = 0;
      for (let i = 0; i < RUNS[n]!; i++) {
        const t = podpathOnce(file);
        rules = t.rules;
        pp.push(t);
        if (ns) ref.push(await restoreOnce(ns, file));
      }
      const summary = (ts: Timing[]): Timing => ({
        wallMs: median(ts.map((t) => t.wallMs)),
        cpuMs: median(ts.map((t) => t.cpuMs)),
      });
      results[n] = {
        rules,
        bytes: statSync(file).size,
        pp: summary(pp),
        ...(ref.length
          ? {
              ref: summary(ref),
              pairWall: median(ref.map((r, i) => r.wallMs / pp[i]!.wallMs)),
              pairCpu: median(ref.map((r, i) => r.cpuMs / pp[i]!.cpuMs)),
            }
          : {}),
      };
      const r = results[n]!;
      console.log(
        `${String(n).padStart(6)} service ports, ${r.rules.toLocaleString("en-US")} rules, ${(r.bytes / 1e6).toFixed(1)} MB: ` +
          `podpath ${fmtMs(r.pp.wallMs)} (${rate(r.rules, r.pp.wallMs)}, cpu ${fmtMs(r.pp.cpuMs)})` +
          (r.ref
            ? ` | iptables-restore --test ${fmtMs(r.ref.wallMs)} (${rate(r.rules, r.ref.wallMs)}, cpu ${fmtMs(r.ref.cpuMs)})` +
              ` | ratio ${r.pairWall!.toFixed(2)}x wall, ${r.pairCpu!.toFixed(2)}x cpu (median of pairs)`
            : ""),
      );
    }
    const r10 = results[10000]!;
    const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
    if (r10.ref) {
      console.log(
        `goal 1: >= 3x faster than iptables-restore at 10k: ${r10.pairWall!.toFixed(2)}x wall ${verdict(r10.pairWall! >= 3)}, ` +
          `${r10.pairCpu!.toFixed(2)}x cpu ${verdict(r10.pairCpu! >= 3)}`,
      );
    } else console.log("goal 1: not measured (needs root for the namespace)");
    // growth: 10k and 30k in turn, the ratio pair by pair
    const wall: number[] = [];
    const cpu: number[] = [];
    const at10: Timing[] = [];
    const at30: Timing[] = [];
    for (let i = 0; i < GROWTH_PAIRS; i++) {
      const a = podpathOnce(join(dir, "iptables-10000.txt"));
      const b = podpathOnce(join(dir, "iptables-30000.txt"));
      at10.push(a);
      at30.push(b);
      wall.push(b.wallMs / a.wallMs);
      cpu.push(b.cpuMs / a.cpuMs);
    }
    const growth = median(wall);
    const growthCpu = median(cpu);
    console.log(
      `goal 2: 30k time <= 3.3x the 10k time: ${growth.toFixed(2)}x wall ${verdict(growth <= 3.3)}, ` +
        `${growthCpu.toFixed(2)}x cpu ${verdict(growthCpu <= 3.3)} ` +
        `(median of ${GROWTH_PAIRS} pairs, ${fmtMs(median(at10.map((t) => t.wallMs)))} and ${fmtMs(median(at30.map((t) => t.wallMs)))}; ` +
        `pairs ${Math.min(...wall).toFixed(2)}x to ${Math.max(...wall).toFixed(2)}x)`,
    );

    const file10 = join(dir, "iptables-10000.txt");
    const dump = parseIptablesSave(readFileSync(file10, "utf8"), file10).value;
    const nat = compileNat(dump, {
      localAddresses: [parseIp("10.128.0.20")],
      interfaces: [{ name: "eth0", primary: parseIp("10.128.0.20") }],
      nodeInternalIp: parseIp("10.128.0.20"),
    });
    const flows = flowsFor(file10);
    const decisions = new Map<string, number>();
    for (const f of flows) {
      const d = nat.evaluate(f).decision;
      decisions.set(d, (decisions.get(d) ?? 0) + 1);
    }
    let n = 0;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    while (performance.now() - t0 < 3000) {
      for (const f of flows) nat.evaluate(f);
      n += flows.length;
    }
    const ms = performance.now() - t0;
    const cu = process.cpuUsage(c0);
    const perSec = n / (ms / 1000);
    const perCpuSec = n / ((cu.user + cu.system) / 1e6);
    console.log(
      `goal 3: >= 100,000 flow evaluations/s on the 10k table: ${Math.round(perSec).toLocaleString("en-US")}/s wall, ` +
        `${Math.round(perCpuSec).toLocaleString("en-US")}/s per CPU second ` +
        `(${flows.length} flows: ${[...decisions].map(([k, v]) => `${v} ${k}`).join(", ")}; e.g. ${formatIp(flows[0]!.dst)}) ` +
        `${verdict(perSec >= 100_000)} wall, ${verdict(perCpuSec >= 100_000)} cpu`,
    );
    console.log(
      `load average at the end: ${loadavg()
        .map((x) => x.toFixed(1))
        .join(" ")} on ${cpus().length} CPUs`,
    );
    return 0;
  } finally {
    await lab?.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : String(e));
    process.exitCode = 1;
  },
);
