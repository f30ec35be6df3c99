/**
 * Benchmark: whole-path evaluations per second on the 10k-service kube-proxy table (the shared
 * generator's dump): raw, mangle, nat PREROUTING (the Service's DNAT), the routing decision, filter
 * FORWARD and nat POSTROUTING for every flow, as `diagnose` asks them. Goal: >= 100,000 per second.
 * The reference measured in the same run, in turns with the whole path so that both see the same
 * machine load, is the nat evaluator alone on the same flows (told the interface the route gives,
 * as the whole path tells it): the ratio says what the rest of the path costs on top of nat.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { readIpRoute } from "../src/evidence/ip-route.ts";
import { compileNat } from "../src/iptables/nat-eval.ts";
import type { Flow } from "../src/iptables/nat-trace.ts";
import { parseIptablesSave } from "../src/iptables/save-parser.ts";
import { type Ip, parseIp } from "../src/net/cidr.ts";
import { compilePath } from "../src/path/evaluate-path.ts";
import type { PathPacket } from "../src/path/path-types.ts";

const GEN = join(import.meta.dirname, "..", "..", "shared", "bench", "gen-iptables.py");
const SERVICES = 10000;
/** Turns of each measurement, and how long one turn runs. */
const ROUNDS = 5;
const ROUND_MS = 600;

interface Rate {
  readonly wall: number;
  readonly cpu: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Evaluations per second (wall and CPU) of `once`, which evaluates `n` flows, for `ms`. */
function measure(once: () => void, n: number, ms: number): Rate {
  let done = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    once();
    done += n;
  }
  const wallMs = performance.now() - t0;
  const cu = process.cpuUsage(c0);
  return { wall: done / (wallMs / 1000), cpu: done / ((cu.user + cu.system) / 1e6) };
}

function packetsFor(text: string): PathPacket[] {
  const vips: { ip: Ip; port: number; proto: string }[] = [];
  for (const m of text.matchAll(
    /^-A KUBE-SERVICES -d ([0-9.]+)\/32 -p (tcp|udp) .*?--dport ([0-9]+)/gm,
  )) {
    vips.push({ ip: parseIp(m[1]!), proto: m[2]!, port: Number(m[3]) });
    if (vips.length >= 2000) break;
  }
  let seed = 7;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const out: PathPacket[] = [];
  for (let i = 0; i < 2000; i++) {
    const src = parseIp(`10.4.1.${2 + rnd(250)}`);
    const base = { src, sport: 30000 + rnd(30000), origin: "pod" as const, inIface: "cbr0" };
    if (rnd(2) === 0 && vips.length > 0) {
      const v = vips[rnd(vips.length)]!;
      out.push({ ...base, dst: v.ip, proto: v.proto, dport: v.port });
    } else {
      const dst = parseIp(`${[35, 8, 142][rnd(3)]}.${rnd(256)}.${rnd(256)}.${1 + rnd(250)}`);
      out.push({ ...base, dst, proto: "tcp", dport: 443 });
    }
  }
  return out;
}

function main(): number {
  const dir = mkdtempSync(join(tmpdir(), "podpath-bench-path-"));
  try {
    const file = join(dir, `iptables-${SERVICES}.txt`);
    const g = spawnSync("python3", [GEN, "--services", String(SERVICES), "-o", file], {
      encoding: "utf8",
    });
    if (g.status !== 0 || !existsSync(file)) {
      console.error(`the generator failed: ${g.stderr}`);
      return 1;
    }
    const text = readFileSync(file, "utf8");
    const dump = parseIptablesSave(text, file).value;
    const routes = readIpRoute(
      "default via 10.128.0.1 dev eth0\n10.128.0.0/20 dev eth0 scope link src 10.128.0.20\n10.4.0.0/14 dev cbr0 scope link\n",
      "ip-route.txt",
    ).value;
    const ctx = {
      localAddresses: [parseIp("10.128.0.20")],
      interfaces: [{ name: "eth0", primary: parseIp("10.128.0.20") }],
      nodeInternalIp: parseIp("10.128.0.20"),
    };
    const path = compilePath(dump, { ...ctx, routing: { routes } });
    const nat = compileNat(dump, ctx);
    const packets = packetsFor(text);
    // how many go to a Service (the generator's random draws decide it, not a fixed half)
    const vipSet = new Set(
      [...text.matchAll(/^-A KUBE-SERVICES -d ([0-9.]+)\/32 /gm)].map((m) => parseIp(m[1]!).value),
    );
    const toServices = packets.filter((p) => vipSet.has(p.dst.value)).length;
    // every flow of the bench leaves by eth0 (the default route and the endpoints' /14 via it)
    const flows: Flow[] = packets.map((p) => ({
      src: p.src,
      dst: p.dst,
      proto: p.proto,
      ...(p.sport !== undefined ? { sport: p.sport } : {}),
      ...(p.dport !== undefined ? { dport: p.dport } : {}),
      origin: "pod",
      inIface: "cbr0",
      mark: 0,
      outIface: "eth0",
    }));
    const verdicts = new Map<string, number>();
    for (const p of packets) {
      for (const o of path.evaluate(p).outcomes)
        verdicts.set(o.verdict.kind, (verdicts.get(o.verdict.kind) ?? 0) + 1);
    }
    for (const f of flows) nat.evaluate(f);
    const wholeRates: Rate[] = [];
    const natRates: Rate[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      wholeRates.push(
        measure(
          () => {
            for (const p of packets) path.evaluate(p);
          },
          packets.length,
          ROUND_MS,
        ),
      );
      natRates.push(
        measure(
          () => {
            for (const f of flows) nat.evaluate(f);
          },
          flows.length,
          ROUND_MS,
        ),
      );
    }
    const perSec = median(wholeRates.map((r) => r.wall));
    const perCpu = median(wholeRates.map((r) => r.cpu));
    const natSec = median(natRates.map((r) => r.wall));
    const natCpu = median(natRates.map((r) => r.cpu));
    const ratio = median(wholeRates.map((r, i) => natRates[i]!.cpu / r.cpu));
    const fmt = (x: number) => Math.round(x).toLocaleString("en-US");
    const ok = (b: boolean) => (b ? "PASS" : "FAIL");
    console.log(
      `nat evaluator alone (reference): ${fmt(natSec)}/s wall, ${fmt(natCpu)}/s per CPU second; ` +
        `the whole path costs ${ratio.toFixed(2)}x the nat evaluation (per CPU second, median of ${ROUNDS} turns)`,
    );
    console.log(
      `goal: >= 100,000 whole-path evaluations/s on the ${SERVICES / 1000}k table: ${fmt(perSec)}/s wall, ` +
        `${fmt(perCpu)}/s per CPU second (${packets.length} packets, ${toServices} to Service ClusterIPs; outcomes: ` +
        `${[...verdicts].map(([k, v]) => `${v} ${k}`).join(", ")}) ${ok(perSec >= 100_000)} wall, ${ok(perCpu >= 100_000)} cpu`,
    );
    console.log(
      `load average at the end: ${loadavg()
        .map((x) => x.toFixed(1))
        .join(" ")} on ${cpus().length} CPUs`,
    );
    return 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = main();
