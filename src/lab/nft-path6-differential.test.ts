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
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseIp } from "../net/cidr.ts";
import { nftPathRuleset, nodePathEvaluator } from "../path/node-path.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { kernelSkip } from "./kernel-guard.ts";
import { mustExec as must, type Namespace } from "./netns.ts";
import { kernelWords, podpathWords } from "./path-agreement.ts";
import { outcomeTest6 } from "./path-agreement6.ts";
import { generatePathCase, generatePathFlows } from "./path-gen.ts";
import { toIpv6Case, toIpv6Flows } from "./path-gen6.ts";
import { createPathSandbox6, withObservers6 } from "./path-sandbox6.ts";
import { rootNamespaceHash } from "./root-state.ts";

const BASE_SEED = Number(process.env["PODPATH_NFT_PATH6_DIFF_SEED"] ?? 20261202);
const SETS = Number(process.env["PODPATH_NFT_PATH6_DIFF_SETS"] ?? 30);
const FLOWS_PER_SET = 10;
const OBSERVER = "podpath-observer";

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The restore text without its security table (the sandbox's counters stay in ip6tables). */
function withoutSecurity(restore: string): string {
  const out: string[] = [];
  let skip = false;
  for (const l of restore.split("\n")) {
    if (l === "*security") skip = true;
    if (!skip) out.push(l);
    if (skip && l === "COMMIT") skip = false;
  }
  return out.join("\n");
}

/** `nft list ruleset` without the observers' rules and the sandbox's security table. */
function listingWithoutSandbox(listing: string): string {
  const out: string[] = [];
  let skip = false;
  for (const l of listing.split("\n")) {
    if (/^table ip6? security \{/.test(l)) skip = true;
    if (!skip && !l.includes(OBSERVER)) out.push(l);
    if (skip && l === "}") skip = false;
  }
  return out.join("\n");
}

/** Replaces the node's ip6tables tables with the nftables translation of the same rules. */
async function loadAsNft6(node: Namespace, restoreWithObservers: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "podpath-nft6-tr-"));
  dirs.push(dir);
  const file = join(dir, "rules.txt");
  // as lab/nft-path-differential: `-p udp -m udp` with no option loses its protocol in translation
  const rules = withoutSecurity(restoreWithObservers).replace(/ -m (tcp|udp)(?= -j | -m |$)/gm, "");
  writeFileSync(file, rules);
  const tr = await node.exec(["ip6tables-restore-translate", "-f", file]);
  if (tr.code !== 0) throw new Error(`ip6tables-restore-translate: ${tr.stderr}`);
  const drop = ["raw", "mangle", "nat", "filter"].map((t) => `delete table ip6 ${t}`).join("\n");
  await must(node, ["nft", "-f", "-"], `${drop}\n`);
  const text = tr.stdout.replace(/tcp flags (\w+) \/ (\w+)/g, "tcp flags & $2 == $1");
  const r = await node.exec(["nft", "-f", "-"], { input: text });
  if (r.code !== 0) throw new Error(`nft -f refused the translation: ${r.stderr}\n${text}`);
}

describe("nftables whole-path evaluator vs kernel over IPv6 (differential)", {
  skip: kernelSkip(),
}, () => {
  it(`agrees with the kernel on ${SETS} IPv6 nftables node configurations x ${FLOWS_PER_SET} flows from seed ${BASE_SEED}`, async (t) => {
    const rootBefore = await rootNamespaceHash();
    const sb = await createPathSandbox6();
    const node = sb.lab.namespaces.find((n) => n.role === "node");
    assert.ok(node, "the sandbox has a node namespace");
    const dir = mkdtempSync(join(tmpdir(), "podpath-nft-path6-diff-"));
    dirs.push(dir);
    const n1 = join(dir, "nodes", "n1");
    mkdirSync(n1, { recursive: true });
    const failures: string[] = [];
    let decided = 0;
    let total = 0;
    const started = Date.now();
    try {
      for (let k = 0; k < SETS && failures.length < 5; k++) {
        const seed = BASE_SEED + k;
        const c = toIpv6Case(generatePathCase(seed));
        const flows = toIpv6Flows(generatePathFlows(seed, FLOWS_PER_SET));
        // the tables nft made last time go first: ip6tables-restore then starts from nothing
        await must(node, ["nft", "flush", "ruleset"]);
        const err = await sb.load(c, flows);
        if (err !== undefined) throw new Error(`seed ${seed}: the kernel refused the case: ${err}`);
        await loadAsNft6(node, withObservers6(c.restore, flows));
        // ip6tables-save cannot list every translated rule: the listing is what podpath reads
        const [listing, rule, route, addr] = await Promise.all([
          must(node, ["nft", "list", "ruleset"]),
          must(node, ["ip", "-6", "rule"]),
          must(node, ["ip", "-6", "route", "show", "table", "all"]),
          must(node, ["ip", "addr"]),
        ]);
        const ip6Rule = rule
          .split("\n")
          .filter((l) => !["1", "2"].includes(l.split(":")[0] ?? ""))
          .join("\n");
        writeFileSync(join(n1, "nft-ruleset.txt"), listingWithoutSandbox(listing));
        writeFileSync(join(n1, "ip6-rule.txt"), ip6Rule);
        writeFileSync(join(n1, "ip6-route.txt"), route);
        writeFileSync(join(n1, "ip-addr.txt"), addr);
        const observed = await sb.observe(flows);
        const snap = loadSnapshot(openSnapshot(dir)).nodes.get("n1");
        assert.ok(snap?.nftables && snap.routes6 && snap.ipRules6, "the snapshot holds the node");
        assert.ok(nftPathRuleset(snap, 6), "the node's path is read from its listing");
        const ev = nodePathEvaluator(snap);
        assert.ok(ev);
        for (const [i, f] of flows.entries()) {
          total++;
          const kw = kernelWords(observed[i]!);
          const r = ev.evaluate({
            src: parseIp(f.src),
            dst: parseIp(f.dst),
            proto: f.proto,
            ...(f.sport !== undefined ? { sport: f.sport } : {}),
            ...(f.dport !== undefined ? { dport: f.dport } : {}),
            origin: f.origin,
          });
          const tests = r.outcomes.map((o) => outcomeTest6(o, f));
          if (tests.every((x) => x !== undefined)) decided++;
          if (tests.some((x) => x === undefined || x(kw))) continue;
          failures.push(
            [
              `seed ${seed} (PODPATH_NFT_PATH6_DIFF_SEED=${seed} PODPATH_NFT_PATH6_DIFF_SETS=1), flow ${JSON.stringify(f)}`,
              `  kernel:  ${kw}`,
              `  podpath: ${podpathWords(r.outcomes)}`,
              "  ip -6 rule:",
              ...ip6Rule.split("\n").map((l) => `    ${l}`),
              "  routes:",
              ...c.routes.map((l) => `    ${l}`),
              "  listing:",
              ...listingWithoutSandbox(listing)
                .split("\n")
                .map((l) => `    ${l}`),
            ].join("\n"),
          );
        }
      }
    } finally {
      await sb.destroy();
    }
    t.diagnostic(
      `${total} IPv6 nftables cases, ${decided} decided by podpath, ${failures.length} disagreements, ${Date.now() - started} ms`,
    );
    assert.equal(await rootNamespaceHash(), rootBefore, "the root namespace changed");
    assert.deepEqual(failures, [], `\n${failures.join("\n\n")}`);
    assert.ok(total >= SETS * FLOWS_PER_SET);
    assert.ok(decided >= total * 0.8, `only ${decided} of ${total} cases were decided`);
  });
});
