/**
 * Differential test of the nftables whole-path evaluator over IPv6 against the kernel: each
 * seed's IPv6 case (lab/path-gen6) rendered as nftables by the real `ip6tables-restore-translate`,
 * loaded with `nft -f` into the IPv6 sandbox's node (lab/path-sandbox6), listed back with
 * `nft list ruleset`, flows sent for real over IPv6; the kernel's verdict must be podpath's answer
 * (nodePathEvaluator over the listing's ip6 tables, `ip -6 rule`, `ip -6 route`) or one of its
 * branches. The sandbox's observers and its security table are left out of the listing.
 *
 * Reproduce: PODPATH_NFT_PATH6_DIFF_SEED=<seed> PODPATH_NFT_PATH6_DIFF_SETS=1 node scripts/test.mjs nft-path6-differential
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, it } from "node:test";
import { nftPathRuleset, nodePathEvaluator } from "../path/node-path.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { kernelSkip } from "./kernel-guard.ts";
import { mustExec as must } from "./netns.ts";
import { outcomeTest6 } from "./path-agreement6.ts";
import { pathPacketOf, writeNodeSnapshot } from "./path-diff-node.ts";
import { runDifferential } from "./path-diff-run.ts";
import { generatePathCase, generatePathFlows } from "./path-gen.ts";
import { toIpv6Case, toIpv6Flows } from "./path-gen6.ts";
import { loadAsNft } from "./path-nft-load.ts";
import { ipRuleWithoutObservers, listingWithoutSandbox, withObservers } from "./path-observers.ts";
import { createPathSandbox6 } from "./path-sandbox6.ts";

const BASE_SEED = Number(process.env["PODPATH_NFT_PATH6_DIFF_SEED"] ?? 20261202);
const SETS = Number(process.env["PODPATH_NFT_PATH6_DIFF_SETS"] ?? 30);
const FLOWS_PER_SET = 10;

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("nftables whole-path evaluator vs kernel over IPv6 (differential)", {
  skip: kernelSkip(),
}, () => {
  it(`agrees with the kernel on ${SETS} IPv6 nftables node configurations x ${FLOWS_PER_SET} flows from seed ${BASE_SEED}`, async (t) => {
    const { tally, ms, check } = await runDifferential({
      create: createPathSandbox6,
      tmpPrefix: "podpath-nft-path6-diff-",
      dirs,
      test: outcomeTest6,
      baseSeed: BASE_SEED,
      sets: SETS,
      set: async (sb, seed, dir, tally) => {
        const node = sb.lab.namespaces.find((n) => n.role === "node");
        assert.ok(node, "the sandbox has a node namespace");
        const c = toIpv6Case(generatePathCase(seed));
        const flows = toIpv6Flows(generatePathFlows(seed, FLOWS_PER_SET));
        // the tables nft made last time go first: ip6tables-restore then starts from nothing
        await must(node, ["nft", "flush", "ruleset"]);
        const err = await sb.load(c, flows);
        if (err !== undefined) throw new Error(`seed ${seed}: the kernel refused the case: ${err}`);
        await loadAsNft(node, withObservers(c.restore, flows, 6), 6, dirs);
        // ip6tables-save cannot list every translated rule: the listing is what podpath reads
        const [listing, rule, route, addr] = await Promise.all([
          must(node, ["nft", "list", "ruleset"]),
          must(node, ["ip", "-6", "rule"]),
          must(node, ["ip", "-6", "route", "show", "table", "all"]),
          must(node, ["ip", "addr"]),
        ]);
        const ip6Rule = ipRuleWithoutObservers(rule);
        const ruleset = listingWithoutSandbox(listing, 6);
        writeNodeSnapshot(dir, {
          "nft-ruleset.txt": ruleset,
          "ip6-rule.txt": ip6Rule,
          "ip6-route.txt": route,
          "ip-addr.txt": addr,
        });
        const observed = await sb.observe(flows);
        const snap = loadSnapshot(openSnapshot(dir)).nodes.get("n1");
        assert.ok(snap?.nftables && snap.routes6 && snap.ipRules6, "the snapshot holds the node");
        assert.ok(nftPathRuleset(snap, 6), "the node's path is read from its listing");
        const ev = nodePathEvaluator(snap);
        assert.ok(ev);
        tally.compare(flows, observed, (f) => ev.evaluate(pathPacketOf(f)).outcomes, {
          env: "PODPATH_NFT_PATH6_DIFF",
          seed,
          ipRuleLabel: "ip -6 rule",
          ipRule: ip6Rule,
          routes: c.routes,
          rulesLabel: "listing",
          rules: ruleset.split("\n"),
        });
      },
    });
    const { total, decided, failures } = tally;
    t.diagnostic(
      `${total} IPv6 nftables cases, ${decided} decided by podpath, ${failures.length} disagreements, ${ms} ms`,
    );
    await check();
    assert.ok(total >= SETS * FLOWS_PER_SET);
    assert.ok(decided >= total * 0.8, `only ${decided} of ${total} cases were decided`);
  });
});
