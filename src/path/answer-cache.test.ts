/**
 * The whole path's reused answers (path/answer-cache) equal the answers made afresh: every
 * differential case's rule set (lab/path-gen: raw, mangle, nat, filter, `ip rule` with `from` and
 * port selectors, routes in several tables) with its flows, the same flows from other sources and
 * source ports, of unknown connection state, and a kube-proxy table from the bench's generator with
 * packets from its own endpoints (the KUBE-SEP hairpin `-s <endpoint>/32`) and from other pods.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { readIpRoute } from "../evidence/ip-route.ts";
import { readIpRule } from "../evidence/ip-rule.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import { unwatchSrcReads, watchSrcReads } from "../iptables/src-reads.ts";
import { pathPacketOf } from "../lab/path-diff-node.ts";
import {
  generateEstablishedFlows,
  generatePathCase,
  generatePathFlows,
  laterPacketsOf,
  PATH_NET,
} from "../lab/path-gen.ts";
import { parseIp } from "../net/cidr.ts";
import { type CachingPathEvaluator, compilePath, type PathContext } from "./evaluate-path.ts";
import type { PathPacket } from "./path-types.ts";

const SETS = 60;
const BASE_SEED = 20261202;

const BASE_ROUTES = [
  `default via ${PATH_NET.eth0.gateway} dev eth0`,
  "10.244.0.0/24 dev pod0 proto kernel scope link src 10.244.0.1",
  "192.168.10.0/24 dev eth0 proto kernel scope link src 192.168.10.2",
  "192.168.20.0/24 dev eth1 proto kernel scope link src 192.168.20.2",
  `default via ${PATH_NET.eth1.gateway} dev eth1 table 100`,
  "local 10.244.0.1 dev pod0 table local proto kernel scope host src 10.244.0.1",
  "local 192.168.10.2 dev eth0 table local proto kernel scope host src 192.168.10.2",
  "local 192.168.20.2 dev eth1 table local proto kernel scope host src 192.168.20.2",
  "local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1",
];

/** Other sources (pods, one of them in the cases' /30 and /32 blocks) and ports for a packet. */
const OTHER_SOURCES = ["10.244.0.4", "10.244.0.6", "10.244.0.7", "10.244.0.200", "10.244.1.3"];

function caseEvaluators(seed: number): {
  cached: CachingPathEvaluator;
  fresh: CachingPathEvaluator;
} {
  const c = generatePathCase(seed);
  const dump = parseIptablesSave(c.restore, "iptables-save.txt").value;
  const routeText = [...BASE_ROUTES, ...c.routes.map((r) => r.replace(/ table main$/, ""))].join(
    "\n",
  );
  const ruleText = [
    "0:\tfrom all lookup local",
    ...c.ipRules.map((r) => {
      const m = /^priority (\d+) (.*)$/.exec(r)!;
      const sel = m[2]!;
      return `${m[1]}:\t${/^(from|not)/.test(sel) ? sel : `from all ${sel}`}`;
    }),
    "32766:\tfrom all lookup main",
    "32767:\tfrom all lookup default",
  ].join("\n");
  const routes = readIpRoute(`${routeText}\n`, "ip-route.txt").value;
  const rules = readIpRule(`${ruleText}\n`, "ip-rule.txt").value;
  const node = ["10.244.0.1", "192.168.10.2", "192.168.20.2"].map((a) => parseIp(a));
  const ctx: PathContext = {
    localAddresses: node,
    interfaces: [
      { name: "eth0", primary: node[1]! },
      { name: "eth1", primary: node[2]! },
      { name: "pod0", primary: node[0]! },
    ],
    routing: { routes, rules },
  };
  return {
    cached: compilePath(dump, ctx),
    fresh: compilePath(dump, { ...ctx, reuseAnswers: false }),
  };
}

/** Each packet, and the same from other sources and ports, of a known and an unknown state. */
function variants(packets: readonly PathPacket[]): PathPacket[] {
  const out: PathPacket[] = [];
  for (const p of packets) {
    out.push(p);
    if (p.origin !== "pod") continue;
    OTHER_SOURCES.forEach((s, i) => {
      out.push({
        ...p,
        src: parseIp(s),
        ...(p.sport !== undefined ? { sport: p.sport + 97 * (i + 1) } : {}),
      });
    });
    out.push({ ...p, ctstate: "unknown" });
    if (p.sport !== undefined) out.push({ ...p, sport: 443 });
  }
  return out;
}

/** Every packet asked of both evaluators, twice over (the second pass reuses answers). */
function assertSame(
  cached: CachingPathEvaluator,
  fresh: CachingPathEvaluator,
  packets: readonly PathPacket[],
  what: string,
): void {
  for (const pass of [1, 2]) {
    for (const p of packets) {
      assert.deepStrictEqual(cached.evaluate(p), fresh.evaluate(p), `${what}, pass ${pass}`);
    }
  }
}

describe("path/answer-cache", () => {
  it("gives every differential case's flows, from any source and port, the answers made afresh", () => {
    let asked = 0;
    let kept = 0;
    for (let i = 0; i < SETS; i++) {
      const seed = BASE_SEED + i;
      const { cached, fresh } = caseEvaluators(seed);
      const flows = [...generatePathFlows(seed, 10), ...generateEstablishedFlows(seed, 3, 10)];
      const packets = variants([...flows, ...laterPacketsOf(flows, 13)].map(pathPacketOf));
      assertSame(cached, fresh, packets, `seed ${seed}`);
      asked += packets.length * 2;
      kept += cached.keptAnswers;
      assert.equal(fresh.keptAnswers, 0);
    }
    // answers were reused, not only made: fewer kept than asked
    assert.ok(kept > 0 && kept < asked / 4, `${kept} answers kept for ${asked} packets`);
  });

  it("gives a kube-proxy table's Service flows the answers made afresh, from endpoints and other pods", () => {
    const gen = join(import.meta.dirname, "..", "..", "bench", "generators", "gen-iptables.py");
    const dir = mkdtempSync(join(tmpdir(), "podpath-answer-cache-"));
    try {
      const file = join(dir, "iptables.txt");
      const g = spawnSync("python3", [gen, "--services", "300", "-o", file], { encoding: "utf8" });
      assert.equal(g.status, 0, g.stderr);
      const text = readFileSync(file, "utf8");
      const dump = parseIptablesSave(text, "iptables-300.txt").value;
      const routes = readIpRoute(
        "default via 10.128.0.1 dev eth0\n10.128.0.0/20 dev eth0 scope link src 10.128.0.20\n10.4.0.0/14 dev cbr0 scope link\n",
        "ip-route.txt",
      ).value;
      const nodeIp = parseIp("10.128.0.20");
      const ctx: PathContext = {
        localAddresses: [nodeIp],
        interfaces: [{ name: "eth0", primary: nodeIp }],
        nodeInternalIp: nodeIp,
        routing: { routes },
      };
      const cached = compilePath(dump, ctx);
      const fresh = compilePath(dump, { ...ctx, reuseAnswers: false });
      const vips = [
        ...text.matchAll(/^-A KUBE-SERVICES -d ([0-9.]+)\/32 -p (tcp|udp) .*?--dport ([0-9]+)/gm),
      ].map((m) => ({ ip: parseIp(m[1]!), proto: m[2]!, port: Number(m[3]) }));
      // the endpoints' own addresses: their packets meet the hairpin -s <endpoint>/32
      const endpoints = [
        ...new Set([...text.matchAll(/^-A KUBE-SEP-\S+ -s ([0-9.]+)\/32/gm)].map((m) => m[1]!)),
      ];
      assert.ok(vips.length > 100 && endpoints.length > 100);
      const sources = [
        ...endpoints.slice(0, 40),
        ...Array.from({ length: 40 }, (_, i) => `10.4.1.${2 + i * 6}`),
      ];
      const packets: PathPacket[] = [];
      for (let i = 0; i < 1500; i++) {
        const v = vips[(i * 7919) % vips.length]!;
        packets.push({
          src: parseIp(sources[(i * 31) % sources.length]!),
          sport: 30000 + ((i * 104729) % 30000),
          dst: i % 10 === 9 ? parseIp(`35.1.${i % 256}.9`) : v.ip,
          proto: v.proto,
          dport: v.port,
          origin: "pod",
          inIface: "cbr0",
        });
      }
      assertSame(cached, fresh, packets, "kube-proxy table");
      assert.ok(cached.keptAnswers > 0 && cached.keptAnswers < packets.length);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("logs the source tests only while an evaluation is watched, and a nested watch spoils the outer log", () => {
    const outer = watchSrcReads();
    const inner = watchSrcReads();
    unwatchSrcReads(inner);
    unwatchSrcReads(outer);
    assert.equal(outer.opaque, true);
    assert.equal(inner.opaque, false);
  });
});
