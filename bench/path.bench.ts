/**
 * Benchmark: whole-path evaluations per second on the 10k-service kube-proxy table (the dump of
 * bench/generators/gen-iptables.py): raw, mangle, nat PREROUTING (the Service's DNAT), the routing
 * decision, filter FORWARD and nat POSTROUTING for every flow, as `diagnose` asks them.
 * Goal: >= 100,000 per second.
 * The reference measured in the same run, in turns with the whole path so that both see the same
 * machine load, is the nat evaluator alone on the same flows (told the interface the route gives,
 * as the whole path tells it): the ratio says what the rest of the path costs on top of nat.
 *
 * What is cached: the whole path reuses an answer (path/answer-cache) for a packet with the same
 * destination, destination port, protocol, incoming interface, origin, mark and state whose source
 * address and source port answer every test the rules made of them (`-s` blocks such as the
 * KUBE-SEP hairpin `-s <endpoint>/32`, `--sport` ranges) as the first packet's did. So that exact
 * repeats do not flatter it, every pass draws FRESH packets: the same destinations (the same
 * Service population), new sources in the node's pod range 10.4.1.0/24 and new source ports.
 * "cold" is one pass over fresh packets with the cache emptied first; "uncached" one pass over
 * fresh packets by an evaluator that keeps no answers (what a miss would cost without the cache's
 * bookkeeping); "warm" is passes over fresh packets with the cache kept, and the goal is judged
 * on it. The answers are checked unchanged:
 * a fingerprint of every outcome of the seeded packets, with and without the cache, must equal
 * the one recorded before the cache existed.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { readIpRoute } from "../src/evidence/ip-route.ts";
import { compileNat } from "../src/iptables/nat-eval.ts";
import type { Flow } from "../src/iptables/nat-trace.ts";
import { parseIptablesSave } from "../src/iptables/save-parser.ts";
import { type Ip, parseIp } from "../src/net/cidr.ts";
import { compilePath } from "../src/path/evaluate-path.ts";
import type { PathEvaluator, PathPacket } from "../src/path/path-types.ts";

const GEN = join(import.meta.dirname, "generators", "gen-iptables.py");
const SERVICES = 10000;
/** Turns of each measurement, and how long one turn runs. */
const ROUNDS = 5;
const ROUND_MS = 600;
/** Fresh packet sets per warm turn (each set: the bench's packets with new sources and ports). */
const WARM_SETS = 30;
/**
 * sha256 (first 16 hex digits) of the JSON of every outcome of the seeded packets, recorded
 * before the whole path reused answers: the answers must not change.
 */
const FINGERPRINT = "66ca55417551ce4a";

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

/** Evaluations per second (wall and CPU) of one run of `once`, which evaluates `n` flows. */
function timed(once: () => void, n: number): Rate {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  once();
  const wallMs = performance.now() - t0;
  const cu = process.cpuUsage(c0);
  return { wall: n / (wallMs / 1000), cpu: n / ((cu.user + cu.system) / 1e6) };
}

function packetsFor(text: string): PathPacket[] {
  const vips: { ip: Ip; port: number; proto: string }[] = [];
  for (const m of text.matchAll(
    /^-A KUBE-SERVICES -d ([0-9.]+)\/32 -p (tcp|udp) .*?--dport ([0-9]+)/gm,
  )) {
    vips.push({ ip: parseIp(m[1]!), proto: m[2]!, port: Number(m[3]) });
    if (vips.length >= 2000) break;
  }
  // mulberry32: a linear congruential generator's bits repeat with short periods, and drawing
  // several numbers per packet from one sent nearly every packet to the same few Services
  let seed = 7;
  const rnd = (n: number) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
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

/** The packets with fresh sources (in the node's pod range) and source ports, the same destinations. */
function freshen(packets: readonly PathPacket[], seed: number): PathPacket[] {
  let x = seed;
  const rnd = (n: number) => {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    return (x >>> 7) % n;
  };
  return packets.map((p) => ({
    ...p,
    src: parseIp(`10.4.1.${2 + rnd(250)}`),
    sport: 1024 + rnd(64000),
  }));
}

/** The fingerprint of every outcome of the packets. */
function fingerprint(ev: PathEvaluator, packets: readonly PathPacket[]): string {
  const h = createHash("sha256");
  for (const p of packets) {
    h.update(
      JSON.stringify(ev.evaluate(p).outcomes, (_k, v) => (typeof v === "bigint" ? String(v) : v)),
    );
  }
  return h.digest("hex").slice(0, 16);
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
    // a fixed file name: the answers cite it, and the fingerprint must not depend on the folder
    const dump = parseIptablesSave(text, `iptables-${SERVICES}.txt`).value;
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
    const fpCached = fingerprint(path, packets);
    const uncached = compilePath(dump, { ...ctx, routing: { routes }, reuseAnswers: false });
    const fpFresh = fingerprint(uncached, packets);
    // how many go to a Service (the generator's random draws decide it, not a fixed half)
    const vipSet = new Set(
      [...text.matchAll(/^-A KUBE-SERVICES -d ([0-9.]+)\/32 /gm)].map((m) => parseIp(m[1]!).value),
    );
    const toServices = packets.filter((p) => vipSet.has(p.dst.value)).length;
    // the cache's reuse turns on how many destinations the packets share
    const destinations = new Set(packets.map((p) => `${p.dst.value}/${p.proto}/${p.dport}`)).size;
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
    const coldRates: Rate[] = [];
    const natRates: Rate[] = [];
    const uncachedRates: Rate[] = [];
    let seed = 1;
    for (let i = 0; i < ROUNDS; i++) {
      // cold: the cache emptied, one pass over packets never seen
      const coldSet = freshen(packets, seed++);
      path.forgetAnswers();
      coldRates.push(
        timed(() => {
          for (const p of coldSet) path.evaluate(p);
        }, coldSet.length),
      );
      // uncached: every packet evaluated afresh (reuseAnswers: false), the same kind of pass
      const uncachedSet = freshen(packets, seed++);
      uncachedRates.push(
        timed(() => {
          for (const p of uncachedSet) uncached.evaluate(p);
        }, uncachedSet.length),
      );
      // warm: the cache kept, every pass over new packets
      const sets = Array.from({ length: WARM_SETS }, () => freshen(packets, seed++));
      wholeRates.push(
        timed(() => {
          for (const set of sets) for (const p of set) path.evaluate(p);
        }, WARM_SETS * packets.length),
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
    const coldSec = median(coldRates.map((r) => r.wall));
    const coldCpu = median(coldRates.map((r) => r.cpu));
    const uncachedSec = median(uncachedRates.map((r) => r.wall));
    const uncachedCpu = median(uncachedRates.map((r) => r.cpu));
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
      "cached: a whole-path answer per (destination, destination port, protocol, interface, origin, mark, state) " +
        "and the answers its source and source port gave the rules' tests of them; every pass draws fresh " +
        `sources and source ports (${path.keptAnswers} answers kept at the end)`,
    );
    console.log(
      `cold (cache emptied, ${packets.length} packets never seen): ${fmt(coldSec)}/s wall, ${fmt(coldCpu)}/s per CPU second`,
    );
    console.log(
      `uncached (reuseAnswers: false, ${packets.length} packets never seen): ${fmt(uncachedSec)}/s wall, ${fmt(uncachedCpu)}/s per CPU second`,
    );
    const fpOk = fpCached === FINGERPRINT && fpFresh === FINGERPRINT;
    console.log(
      `answers unchanged: fingerprint ${fpCached} with the cache, ${fpFresh} without, recorded ${FINGERPRINT} ${ok(fpOk)}`,
    );
    console.log(
      `goal: >= 100,000 whole-path evaluations/s (warm, fresh packets) on the ${SERVICES / 1000}k table: ${fmt(perSec)}/s wall, ` +
        `${fmt(perCpu)}/s per CPU second (${packets.length} packets, ${toServices} to Service ClusterIPs, ${destinations} distinct destinations; outcomes: ` +
        `${[...verdicts].map(([k, v]) => `${v} ${k}`).join(", ")}) ${ok(perSec >= 100_000)} wall, ${ok(perCpu >= 100_000)} cpu`,
    );
    console.log(
      `load average at the end: ${loadavg()
        .map((x) => x.toFixed(1))
        .join(" ")} on ${cpus().length} CPUs`,
    );
    return fpOk ? 0 : 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = main();
