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
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseIp } from "../net/cidr.ts";
import { compileNftPath } from "../path/nft-path.ts";
import { pathContextOf } from "../path/node-path.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { kernelSkip } from "./kernel-guard.ts";
import { mustExec as must, type Namespace } from "./netns.ts";
import { kernelWords, outcomeTest, podpathWords } from "./path-agreement.ts";
import {
  generateEstablishedFlows,
  generatePathCase,
  generatePathFlows,
  laterPacketsOf,
  type PathFlow,
} from "./path-gen.ts";
import { createPathSandbox, type KernelPathVerdict, withObservers } from "./path-sandbox.ts";
import { rootNamespaceHash } from "./root-state.ts";

const BASE_SEED = Number(process.env["PODPATH_NFT_PATH_DIFF_SEED"] ?? 20261202);
const SETS = Number(process.env["PODPATH_NFT_PATH_DIFF_SETS"] ?? 60);
const FLOWS_PER_SET = 10;
/** Per set, UDP flows sent as a later packet of an established connection (path-gen). */
const ESTABLISHED_PER_SET = 3;
/** How far a passed flow's source port moves when it is sent again as a later packet. */
const SHIFT = FLOWS_PER_SET + ESTABLISHED_PER_SET;
const OBSERVER = "podpath-observer";

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The restore text without its security table (the sandbox's counters stay in iptables). */
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
export function listingWithoutSandbox(listing: string): string {
  const out: string[] = [];
  let skip = false;
  for (const l of listing.split("\n")) {
    if (/^table ip security \{/.test(l)) skip = true;
    if (!skip && !l.includes(OBSERVER)) out.push(l);
    if (skip && l === "}") skip = false;
  }
  return out.join("\n");
}

/**
 * Replaces the node's iptables tables (raw, mangle, nat, filter) with the nftables translation
 * of the same rules, loaded with `nft -f`; the security table (the sandbox's counters) stays.
 */
async function loadAsNft(node: Namespace, restoreWithObservers: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "podpath-nft-tr-"));
  dirs.push(dir);
  const file = join(dir, "rules.txt");
  // `-p udp -m udp` with no option of the udp match: iptables-translate 1.8.9 drops the protocol
  // with the empty match (nft then refuses a DNAT to a port); `-p udp` alone says the same
  const rules = withoutSecurity(restoreWithObservers).replace(/ -m (tcp|udp)(?= -j | -m |$)/gm, "");
  writeFileSync(file, rules);
  const tr = await node.exec(["iptables-restore-translate", "-f", file]);
  if (tr.code !== 0) throw new Error(`iptables-restore-translate: ${tr.stderr}`);
  const drop = ["raw", "mangle", "nat", "filter"].map((t) => `delete table ip ${t}`).join("\n");
  await must(node, ["nft", "-f", "-"], `${drop}\n`);
  // iptables-translate 1.8.9 writes `tcp flags rst / rst`, which nft 1.0.6 does not parse (only
  // the observers' TCP-reset rules use it): the form nft reads, with the same meaning
  const text = tr.stdout.replace(/tcp flags (\w+) \/ (\w+)/g, "tcp flags & $2 == $1");
  const r = await node.exec(["nft", "-f", "-"], { input: text });
  if (r.code !== 0) throw new Error(`nft -f refused the translation: ${r.stderr}\n${text}`);
  return text;
}

describe("nftables whole-path evaluator vs kernel (differential)", { skip: kernelSkip() }, () => {
  it(`agrees with the kernel on ${SETS} nftables node configurations x ${FLOWS_PER_SET} flows from seed ${BASE_SEED}`, async (t) => {
    const rootBefore = await rootNamespaceHash();
    const sb = await createPathSandbox();
    const node = sb.lab.namespaces.find((n) => n.role === "node");
    assert.ok(node, "the sandbox has a node namespace");
    const dir = mkdtempSync(join(tmpdir(), "podpath-nft-path-diff-"));
    dirs.push(dir);
    const n1 = join(dir, "nodes", "n1");
    mkdirSync(n1, { recursive: true });
    const failures: string[] = [];
    let decided = 0;
    let total = 0;
    let established = 0;
    const notEstablished = new Map<string, number>();
    const undecidedWhy = new Map<string, number>();
    const started = Date.now();
    try {
      for (let k = 0; k < SETS && failures.length < 5; k++) {
        const seed = BASE_SEED + k;
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
        await loadAsNft(node, withObservers(c.restore, [...flows, ...again]));
        const [listing, rule, route, addr] = await Promise.all([
          must(node, ["nft", "list", "ruleset"]),
          must(node, ["ip", "rule"]),
          must(node, ["ip", "route", "show", "table", "all"]),
          must(node, ["ip", "addr"]),
        ]);
        const ruleset = listingWithoutSandbox(listing);
        const ipRule = rule
          .split("\n")
          .filter((l) => !["1", "2"].includes(l.split(":")[0] ?? ""))
          .join("\n");
        writeFileSync(join(n1, "nft-ruleset.txt"), ruleset);
        writeFileSync(join(n1, "ip-rule.txt"), ipRule);
        writeFileSync(join(n1, "ip-route.txt"), route);
        writeFileSync(join(n1, "ip-addr.txt"), addr);
        const observed = await sb.observe(flows);
        const snap = loadSnapshot(openSnapshot(dir)).nodes.get("n1");
        assert.ok(snap?.nftables && snap.routes && snap.ipRules, "the snapshot holds the node");
        const ev = compileNftPath(snap.nftables, pathContextOf(snap, undefined));
        const compare = (flows: readonly PathFlow[], observed: readonly KernelPathVerdict[]) => {
          for (const [i, f] of flows.entries()) {
            const v = observed[i]!;
            if (v.kind === "not-established") {
              // the kernel never held the connection established: no established packet to compare
              notEstablished.set(v.why, (notEstablished.get(v.why) ?? 0) + 1);
              continue;
            }
            total++;
            if (f.established) established++;
            const kw = kernelWords(v);
            const r = ev.evaluate({
              src: parseIp(f.src),
              dst: parseIp(f.dst),
              proto: f.proto,
              ...(f.sport !== undefined ? { sport: f.sport } : {}),
              ...(f.dport !== undefined ? { dport: f.dport } : {}),
              origin: f.origin,
              ...(f.established ? { ctstate: "ESTABLISHED" as const } : {}),
            });
            const tests = r.outcomes.map((o) => outcomeTest(o, f));
            if (tests.every((x) => x !== undefined)) decided++;
            for (const o of r.outcomes) {
              if (o.verdict.kind !== "undecided") continue;
              const why = o.verdict.reason.replace(/\d+/g, "N");
              undecidedWhy.set(why, (undecidedWhy.get(why) ?? 0) + 1);
            }
            if (tests.some((x) => x === undefined || x(kw))) continue;
            failures.push(
              [
                `seed ${seed} (PODPATH_NFT_PATH_DIFF_SEED=${seed} PODPATH_NFT_PATH_DIFF_SETS=1), flow ${JSON.stringify(f)}`,
                `  kernel:  ${kw}`,
                `  podpath: ${podpathWords(r.outcomes)}`,
                "  ip rule:",
                ...ipRule.split("\n").map((l) => `    ${l}`),
                "  routes:",
                ...c.routes.map((l) => `    ${l}`),
                "  nft list ruleset:",
                ...ruleset.split("\n").map((l) => `    ${l}`),
              ].join("\n"),
            );
          }
        };
        compare(flows, observed);
        // the UDP flows the kernel let through, again as later packets of their connections
        const passed = flows.filter((f, i) => {
          const v = observed[i]!.kind;
          return !f.established && (v === "forwarded" || v === "delivered");
        });
        const later = again.filter((a) => passed.some((f) => f.sport === a.sport! - SHIFT));
        if (later.length > 0) compare(later, await sb.observe(later));
      }
    } finally {
      await sb.destroy();
    }
    t.diagnostic(
      `${total} cases (${established} later packets of established connections), ${decided} decided by podpath, ${failures.length} disagreements, ${Date.now() - started} ms`,
    );
    t.diagnostic(
      `later packets left out: ${[...notEstablished].map(([w, n]) => `${n}x ${w}`).join("; ") || "none"}`,
    );
    const why = [...undecidedWhy].sort((a, b) => b[1] - a[1]).slice(0, 5);
    t.diagnostic(`undecided outcomes, most often: ${why.map(([w, n]) => `${n}x ${w}`).join("; ")}`);
    assert.equal(await rootNamespaceHash(), rootBefore, "the root namespace changed");
    assert.deepEqual(failures, [], `\n${failures.join("\n\n")}`);
    assert.ok(total >= SETS * FLOWS_PER_SET);
    assert.ok(established >= SETS / 5, `only ${established} established cases`);
  });
});
