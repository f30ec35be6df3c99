/**
 * Differential test of the whole-path evaluator against the kernel over IPv6: each seed's node
 * configuration and flows (lab/path-gen) carried over to IPv6 (lab/path-gen6: ip6tables rules,
 * `ip -6 rule`, `ip -6 route`), loaded into the IPv6 sandbox (lab/path-sandbox6), the flows sent
 * for real over IPv6, and for every flow the kernel's verdict (delivered, forwarded out of which
 * interface with which source and destination, rejected with which ICMPv6 code or a TCP reset,
 * silent) must be podpath's answer on the node's snapshot files (ip6tables-save.txt,
 * ip6-rule.txt, ip6-route.txt, beside the node's IPv4 files), or one of its branches.
 *
 * Reproduce: PODPATH_PATH6_DIFF_SEED=<seed> PODPATH_PATH6_DIFF_SETS=1 node scripts/test.mjs path6-differential
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, it } from "node:test";
import { parseIp } from "../net/cidr.ts";
import { nodePathEvaluator } from "../path/node-path.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { kernelSkip } from "./kernel-guard.ts";
import { outcomeTest6 } from "./path-agreement6.ts";
import { parsePacket6 } from "./path-capture.ts";
import { pathPacketOf, writeNodeSnapshot } from "./path-diff-node.ts";
import { runDifferential } from "./path-diff-run.ts";
import { generatePathCase, generatePathFlows, type PathFlow } from "./path-gen.ts";
import { toIp6tablesRestore, toIpv6Case, toIpv6Flows, toIpv6Text } from "./path-gen6.ts";
import { createPathSandbox6, type NodeFiles6 } from "./path-sandbox6.ts";

const BASE_SEED = Number(process.env["PODPATH_PATH6_DIFF_SEED"] ?? 20261202);
const SETS = Number(process.env["PODPATH_PATH6_DIFF_SETS"] ?? 30);
const FLOWS_PER_SET = 10;

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function writeSnapshot(dir: string, files: NodeFiles6) {
  writeNodeSnapshot(dir, {
    "ip6tables-save.txt": files.ip6tablesSave,
    "ip6-rule.txt": files.ip6Rule,
    "ip6-route.txt": files.ip6Route,
    "ip-addr.txt": files.ipAddr,
    // the node's IPv4 state too: an IPv6 packet must not be answered from it
    "iptables-save.txt": files.iptablesSave,
    "ip-rule.txt": files.ipRule,
    "ip-route.txt": files.ipRoute,
  });
}

function evaluate(dir: string, flows: readonly PathFlow[]) {
  const node = loadSnapshot(openSnapshot(dir)).nodes.get("n1");
  assert.ok(node?.ip6tables && node.routes6 && node.ipRules6, "the snapshot holds the IPv6 files");
  const ev = nodePathEvaluator(node);
  assert.ok(ev);
  return flows.map((f) => ev.evaluate(pathPacketOf(f)).outcomes);
}

describe("path-gen6 and path-sandbox6 helpers", () => {
  it("carries addresses, prefixes, DNAT ports, ICMP and REJECT types over to IPv6", () => {
    assert.equal(toIpv6Text("-s 10.244.0.4/30"), "-s fd00::af4:4/126");
    assert.equal(
      toIpv6Text("-j DNAT --to-destination 10.20.30.40:8080"),
      "-j DNAT --to-destination [fd00::a14:1e28]:8080",
    );
    assert.equal(toIpv6Text("from 10.244.0.6 lookup 100"), "from fd00::af4:6 lookup 100");
    assert.equal(
      toIp6tablesRestore("-A F -p icmp -j REJECT --reject-with icmp-host-prohibited"),
      "-A F -p ipv6-icmp -j REJECT --reject-with icmp6-reject-route",
    );
    const c = toIpv6Case(generatePathCase(7));
    assert.doesNotMatch(c.restore, /\d+\.\d+\.\d+\.\d+/);
    for (const f of toIpv6Flows(generatePathFlows(7, 10))) assert.equal(parseIp(f.dst).family, 6);
  });

  it("reads an ICMPv6 error's type, code and the packet it quotes", () => {
    // fd00::af4:1 > fd00::af4:5 ICMPv6 1/5 quoting UDP fd00::af4:5:20001 > fd00::808:808:53
    const addr = (lo: number[]) => [0xfd, 0, ...Array(10).fill(0), ...lo];
    const v6 = (next: number, src: number[], dst: number[]) => [
      0x60,
      0,
      0,
      0,
      0,
      0x30,
      next,
      64,
      ...addr(src),
      ...addr(dst),
    ];
    const b = [
      ...v6(58, [0x0a, 0xf4, 0, 1], [0x0a, 0xf4, 0, 5]),
      ...[1, 5, 0, 0, 0, 0, 0, 0],
      ...v6(17, [0x0a, 0xf4, 0, 5], [8, 8, 8, 8]),
      ...[0x4e, 0x21, 0, 53, 0, 8, 0, 0],
    ];
    const p = parsePacket6(b);
    assert.equal(p?.icmpType, 1);
    assert.equal(p?.icmpCode, 5);
    assert.deepEqual(p?.inner, {
      proto: 17,
      src: "fd00::af4:5",
      dst: "fd00::808:808",
      sport: 20001,
    });
  });
});

describe("whole-path evaluator vs kernel over IPv6 (differential)", { skip: kernelSkip() }, () => {
  it(`agrees with the kernel on ${SETS} IPv6 node configurations x ${FLOWS_PER_SET} flows from seed ${BASE_SEED}`, async (t) => {
    const { tally, ms, check } = await runDifferential({
      create: createPathSandbox6,
      tmpPrefix: "podpath-path6-diff-",
      dirs,
      test: outcomeTest6,
      baseSeed: BASE_SEED,
      sets: SETS,
      set: async (sb, seed, dir, tally) => {
        const c = toIpv6Case(generatePathCase(seed));
        const flows = toIpv6Flows(generatePathFlows(seed, FLOWS_PER_SET));
        const err = await sb.load(c, flows);
        if (err !== undefined) throw new Error(`seed ${seed}: the kernel refused the case: ${err}`);
        const files = await sb.nodeFiles();
        writeSnapshot(dir, files);
        const observed = await sb.observe(flows);
        const outcomes = evaluate(dir, flows);
        tally.compare(flows, observed, (_, i) => outcomes[i]!, {
          env: "PODPATH_PATH6_DIFF",
          seed,
          ipRuleLabel: "ip -6 rule",
          ipRule: files.ip6Rule,
          routes: c.routes,
          rulesLabel: "rules",
          rules: files.ip6tablesSave.split("\n").filter((l) => /^[*:-]/.test(l)),
        });
      },
    });
    const { total, decided, failures } = tally;
    t.diagnostic(
      `${total} IPv6 cases, ${decided} decided by podpath, ${failures.length} disagreements, ${ms} ms`,
    );
    await check();
    assert.ok(total >= SETS * FLOWS_PER_SET);
    assert.ok(decided >= total * 0.8, `only ${decided} of ${total} cases were decided`);
  });
});
