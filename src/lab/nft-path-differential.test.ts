/**
 * Differential test of the nftables whole-path evaluator (path/nft-path) against the kernel: the
 * seeded node configurations of lab/path-gen.ts rendered as nftables by the real
 * `iptables-restore-translate`, loaded with `nft -f` into the path sandbox's node, listed back with
 * `nft list ruleset` (what podpath reads, as a user pastes it), flows sent for real; the kernel's
 * verdict must be podpath's answer or one of its branches. The sandbox's own observers (and its
 * security table, which counts deliveries) are left out of the listing podpath reads.
 *
 * Reproduce: PODPATH_NFT_PATH_DIFF_SEED=<seed> PODPATH_NFT_PATH_DIFF_SETS=1 node scripts/test.mjs nft-path-differential
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, it } from "node:test";
import { compileNftPath } from "../path/nft-path.ts";
import { pathContextOf } from "../path/node-path.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { kernelSkip } from "./kernel-guard.ts";
import { mustExec as must } from "./netns.ts";
import { outcomeTest } from "./path-agreement.ts";
import { pathPacketOf, writeNodeSnapshot } from "./path-diff-node.ts";
import { laterOfPassed, runDifferential } from "./path-diff-run.ts";
import {
  generateEstablishedFlows,
  generatePathCase,
  generatePathFlows,
  laterPacketsOf,
  type PathFlow,
} from "./path-gen.ts";
import { loadAsNft } from "./path-nft-load.ts";
import { ipRuleWithoutObservers, listingWithoutSandbox, withObservers } from "./path-observers.ts";
import { createPathSandbox, type KernelPathVerdict } from "./path-sandbox.ts";

const BASE_SEED = Number(process.env["PODPATH_NFT_PATH_DIFF_SEED"] ?? 20261202);
const SETS = Number(process.env["PODPATH_NFT_PATH_DIFF_SETS"] ?? 60);
const FLOWS_PER_SET = 10;
/** Per set, UDP flows sent as a later packet of an established connection (path-gen). */
const ESTABLISHED_PER_SET = 3;
/** How far a passed flow's source port moves when it is sent again as a later packet. */
const SHIFT = FLOWS_PER_SET + ESTABLISHED_PER_SET;

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("nftables whole-path evaluator vs kernel (differential)", { skip: kernelSkip() }, () => {
  it(`agrees with the kernel on ${SETS} nftables node configurations x ${FLOWS_PER_SET} flows from seed ${BASE_SEED}`, async (t) => {
    const { tally, ms, check } = await runDifferential({
      create: createPathSandbox,
      tmpPrefix: "podpath-nft-path-diff-",
      dirs,
      test: outcomeTest,
      baseSeed: BASE_SEED,
      sets: SETS,
      set: async (sb, seed, dir, tally) => {
        const node = sb.lab.namespaces.find((n) => n.role === "node");
        assert.ok(node, "the sandbox has a node namespace");
        const c = generatePathCase(seed);
        const flows = [
          ...generatePathFlows(seed, FLOWS_PER_SET),
          ...generateEstablishedFlows(seed, ESTABLISHED_PER_SET, FLOWS_PER_SET),
        ];
        // every later packet a passed UDP flow may be asked again as, counted from the start
        const again = laterPacketsOf(flows, SHIFT);
        // the tables nft made last time go first: iptables-restore then starts from nothing
        await must(node, ["nft", "flush", "ruleset"]);
        const err = await sb.load(c, [...flows, ...again]);
        if (err !== undefined) throw new Error(`seed ${seed}: the kernel refused the case: ${err}`);
        await loadAsNft(node, withObservers(c.restore, [...flows, ...again], 4), 4, dirs);
        const [listing, rule, route, addr] = await Promise.all([
          must(node, ["nft", "list", "ruleset"]),
          must(node, ["ip", "rule"]),
          must(node, ["ip", "route", "show", "table", "all"]),
          must(node, ["ip", "addr"]),
        ]);
        const ruleset = listingWithoutSandbox(listing, 4);
        const ipRule = ipRuleWithoutObservers(rule);
        writeNodeSnapshot(dir, {
          "nft-ruleset.txt": ruleset,
          "ip-rule.txt": ipRule,
          "ip-route.txt": route,
          "ip-addr.txt": addr,
        });
        const observed = await sb.observe(flows);
        const snap = loadSnapshot(openSnapshot(dir)).nodes.get("n1");
        assert.ok(snap?.nftables && snap.routes && snap.ipRules, "the snapshot holds the node");
        const ev = compileNftPath(snap.nftables, pathContextOf(snap, undefined));
        const compare = (flows: readonly PathFlow[], observed: readonly KernelPathVerdict[]) =>
          tally.compare(flows, observed, (f) => ev.evaluate(pathPacketOf(f)).outcomes, {
            env: "PODPATH_NFT_PATH_DIFF",
            seed,
            ipRuleLabel: "ip rule",
            ipRule,
            routes: c.routes,
            rulesLabel: "nft list ruleset",
            rules: ruleset.split("\n"),
          });
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
    t.diagnostic(tally.undecided());
    await check();
    assert.ok(total >= SETS * FLOWS_PER_SET);
    assert.ok(established >= SETS / 5, `only ${established} established cases`);
  });
});
