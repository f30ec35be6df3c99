/**
 * Differential test of the whole-path evaluator against the kernel: seeded random node
 * configurations (lab/path-gen.ts: raw, mangle, nat, filter, `ip rule`, routes in several tables)
 * loaded into a sandbox node (lab/path-sandbox.ts), flows from a pod and from the node sent for
 * real, and for every flow the kernel's verdict (delivered, forwarded out of which interface with
 * which source and destination, rejected with which ICMP type, silent) must be podpath's answer
 * on the node's snapshot files, or one of its branches. A definite different answer fails, with
 * the seed, the flow and the case.
 *
 * Reproduce: PODPATH_PATH_DIFF_SEED=<seed> PODPATH_PATH_DIFF_SETS=1 node scripts/test.mjs path-differential
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, it } from "node:test";
import { nodePathEvaluator } from "../path/node-path.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { kernelSkip } from "./kernel-guard.ts";
import { outcomeTest } from "./path-agreement.ts";
import { parsePacket } from "./path-capture.ts";
import { pathPacketOf, writeNodeSnapshot } from "./path-diff-node.ts";
import { laterOfPassed, runDifferential } from "./path-diff-run.ts";
import {
  generateEstablishedFlows,
  generatePathCase,
  generatePathFlows,
  laterPacketsOf,
  type PathFlow,
} from "./path-gen.ts";
import { withObservers, withoutObservers } from "./path-observers.ts";
import { createPathSandbox, type KernelPathVerdict, type NodeFiles } from "./path-sandbox.ts";

const BASE_SEED = Number(process.env["PODPATH_PATH_DIFF_SEED"] ?? 20261202);
const SETS = Number(process.env["PODPATH_PATH_DIFF_SETS"] ?? 60);
const FLOWS_PER_SET = 10;
/** Per set, UDP flows sent as a later packet of an established connection (path-gen). */
const ESTABLISHED_PER_SET = 3;
/** How far a passed flow's source port moves when it is sent again as a later packet. */
const SHIFT = FLOWS_PER_SET + ESTABLISHED_PER_SET;

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function writeSnapshot(dir: string, files: NodeFiles) {
  writeNodeSnapshot(dir, {
    "iptables-save.txt": files.iptablesSave,
    "ip-rule.txt": files.ipRule,
    "ip-route.txt": files.ipRoute,
    "ip-addr.txt": files.ipAddr,
  });
}

function evaluate(dir: string, flows: readonly PathFlow[]) {
  const node = loadSnapshot(openSnapshot(dir)).nodes.get("n1");
  assert.ok(node?.iptables && node.routes && node.ipRules, "the snapshot holds the node's files");
  const ev = nodePathEvaluator(node);
  assert.ok(ev);
  return flows.map((f) => ev.evaluate(pathPacketOf(f)).outcomes);
}

describe("path-sandbox helpers", () => {
  it("adds the observers first in every built-in chain and strips them from a save", () => {
    const c = generatePathCase(7);
    const text = withObservers(c.restore, generatePathFlows(7, 3), 4);
    assert.match(text, /\*security\n/);
    const lines = text.split("\n");
    const filterAt = lines.indexOf("*filter");
    const firstFilter = lines.findIndex((l, n) => n > filterAt && l.startsWith("-A "));
    assert.match(lines[firstFilter] ?? "", /podpath-observer/);
    assert.equal(withoutObservers(text).includes("podpath-observer"), false);
    assert.equal(withoutObservers(text).includes("*security"), false);
  });

  it("reads an ICMP error's type, code and the packet it quotes", () => {
    // 10.244.0.1 > 10.244.0.5 ICMP 3/10 quoting UDP 10.244.0.5:20001 > 8.8.8.8:53
    const hex =
      "4500003800004000400100000af400010af40005030a0000000000004500001c0000400040110000" +
      "0af4000508080808" +
      "4e210035000800000";
    const b = (hex.match(/../g) ?? []).map((x) => Number.parseInt(x, 16));
    const p = parsePacket(b);
    assert.equal(p?.icmpType, 3);
    assert.equal(p?.icmpCode, 10);
    assert.deepEqual(p?.inner, { proto: 17, src: "10.244.0.5", dst: "8.8.8.8", sport: 20001 });
  });
});

describe("whole-path evaluator vs kernel (differential)", { skip: kernelSkip() }, () => {
  it(`agrees with the kernel on ${SETS} node configurations x ${FLOWS_PER_SET} flows from seed ${BASE_SEED}`, async (t) => {
    const { tally, ms, check } = await runDifferential({
      create: createPathSandbox,
      tmpPrefix: "podpath-path-diff-",
      dirs,
      test: outcomeTest,
      baseSeed: BASE_SEED,
      sets: SETS,
      set: async (sb, seed, dir, tally) => {
        const c = generatePathCase(seed);
        const flows = [
          ...generatePathFlows(seed, FLOWS_PER_SET),
          ...generateEstablishedFlows(seed, ESTABLISHED_PER_SET, FLOWS_PER_SET),
        ];
        // every later packet a passed UDP flow may be asked again as, counted from the start
        const again = laterPacketsOf(flows, SHIFT);
        const err = await sb.load(c, [...flows, ...again]);
        if (err !== undefined) throw new Error(`seed ${seed}: the kernel refused the case: ${err}`);
        const files = await sb.nodeFiles();
        writeSnapshot(dir, files);
        const context = {
          env: "PODPATH_PATH_DIFF",
          seed,
          ipRuleLabel: "ip rule",
          ipRule: files.ipRule,
          routes: c.routes,
          rulesLabel: "rules",
          rules: files.iptablesSave.split("\n").filter((l) => /^[*:-]/.test(l)),
        };
        const compare = (flows: readonly PathFlow[], observed: readonly KernelPathVerdict[]) => {
          const outcomes = evaluate(dir, flows);
          tally.compare(flows, observed, (_, i) => outcomes[i]!, context);
        };
        const observed = await sb.observe(flows);
        compare(flows, observed);
        // the UDP flows the kernel let through, again as later packets of their connections
        const later = laterOfPassed(flows, observed, again, SHIFT);
        if (later.length > 0) compare(later, await sb.observe(later));
      },
    });
    const { total, established, decided, failures } = tally;
    t.diagnostic(
      `${total} cases (${established} later packets of established connections), ${decided} decided by podpath, ${failures.length} disagreements, ${ms} ms`,
    );
    t.diagnostic(tally.leftOut());
    await check();
    assert.ok(total >= SETS * FLOWS_PER_SET);
    assert.ok(established >= SETS / 5, `only ${established} established cases`);
    assert.ok(decided >= total * 0.8, `only ${decided} of ${total} cases were decided`);
  });
});
