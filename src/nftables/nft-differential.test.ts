/**
 * Differential test of the nftables reader and evaluator against the kernel: seeded random rule
 * sets (nftables/test-helpers/nft-gen.ts) loaded with `nft -f` into the differential sandbox's node (lab/
 * nat-sandbox.ts), listed back with `nft list table` and read by podpath, random flows sent for
 * real; for every flow the nat answer (and the forward filter's verdict) must match conntrack's
 * translation, or be an explicit "cannot decide".
 *
 * Reproduce: PODPATH_NFT_DIFF_SEED=<seed> PODPATH_NFT_DIFF_SETS=1 node scripts/test.mjs nft-differential
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { NatTrace } from "../iptables/nat-trace.ts";
import { kernelSkip } from "../lab/kernel-guard.ts";
import {
  GEN_IN_IFACE,
  GEN_NODE_IP,
  GEN_OUT_IFACE,
  type GenFlow,
  generateFlows,
} from "../lab/nat-gen.ts";
import { createNatSandbox, type NatSandbox } from "../lab/nat-sandbox.ts";
import { sandboxContext, sandboxFlow } from "../lab/replay.ts";
import { rootNamespaceHash } from "../lab/root-state.ts";
import { type Agreement, compareTranslation } from "../lab/translation.ts";
import { compileNftFilter } from "./filter-eval.ts";
import { compileNftNat } from "./nat-eval.ts";
import { readNftRuleset } from "./read-ruleset.ts";
import {
  generateNftRuleSet,
  NFT_GEN_ENDPOINTS,
  NFT_GEN_SERVICES,
  NFT_GEN_TABLE,
} from "./test-helpers/nft-gen.ts";

const BASE_SEED = Number(process.env["PODPATH_NFT_DIFF_SEED"] ?? 20261202);
const SETS = Number(process.env["PODPATH_NFT_DIFF_SETS"] ?? 60);
const FLOWS_PER_SET = 10;
const ctx = sandboxContext(GEN_NODE_IP, GEN_IN_IFACE, GEN_OUT_IFACE);

/** The set's flows: random ones, one to each Service address, one to each endpoint (placing it). */
function flowsFor(seed: number): GenFlow[] {
  const flows = [...generateFlows(seed, FLOWS_PER_SET)];
  const used = new Set(flows.map((f) => `${f.proto}/${f.src}/${f.sport}`));
  let sport = 40000 + (seed % 1000);
  const add = (f: Omit<GenFlow, "sport">) => {
    while (used.has(`${f.proto}/${f.src}/${sport}`)) sport++;
    used.add(`${f.proto}/${f.src}/${sport}`);
    flows.push({ ...f, sport: sport++ });
  };
  for (const [i, svc] of NFT_GEN_SERVICES.entries()) {
    add({
      proto: i % 2 === 0 ? "tcp" : "udp",
      src: "10.4.0.5",
      dst: svc,
      dport: [53, 80, 443][seed % 3]!,
      local: false,
    });
  }
  for (const ep of NFT_GEN_ENDPOINTS)
    add({ proto: "udp", src: "172.17.0.3", dst: ep, dport: 8080, local: false });
  return flows;
}

/** The nat answer, made "dropped" where the forward filter drops or rejects the packet. */
function withFilter(
  t: NatTrace,
  filter: ReturnType<typeof compileNftFilter>,
  f: GenFlow,
): NatTrace {
  if (f.local) return t;
  const leaves = t.branches ? t.branches.map((b) => b.trace) : [t];
  const verdicts = leaves.map((l) => {
    if (l.decision === "cannot-decide" || l.decision === "dropped" || !l.dstOut) return "n/a";
    const q = sandboxFlow({ ...f, dst: "0.0.0.0" }, GEN_IN_IFACE, GEN_OUT_IFACE);
    const v = filter.verdict(
      { ...q, dst: l.dstOut.ip, ...(l.dstOut.port !== undefined ? { dport: l.dstOut.port } : {}) },
      "forward",
      { dnatted: l.dstOut.how === "dnat" },
    );
    return v.decision;
  });
  if (verdicts.includes("cannot-decide") || verdicts.includes("branches")) {
    return {
      ...t,
      decision: "cannot-decide",
      undecided: {
        chain: "forward",
        ruleIndex: 0,
        rule: { file: "nft", line: 0 },
        reason: "the forward filter is undecided",
      },
    };
  }
  const dropped = verdicts.filter((v) => v === "drop" || v === "reject").length;
  if (dropped === 0) return t;
  if (dropped === leaves.length) return { ...t, decision: "dropped", branches: undefined as never };
  return {
    ...t,
    decision: "cannot-decide",
    undecided: {
      chain: "forward",
      ruleIndex: 0,
      rule: { file: "nft", line: 0 },
      reason: "the filter drops some branches",
    },
  };
}

async function judge(
  sb: NatSandbox,
  seed: number,
): Promise<{ agreements: Agreement[]; flows: GenFlow[]; listing: string }> {
  const set = generateNftRuleSet(seed);
  const load = await sb.node.exec(["nft", "-f", "-"], { input: set.script });
  if (load.code !== 0)
    throw new Error(`the kernel refused rule set ${seed}: ${load.stderr}\n${set.script}`);
  // podpath reads what the kernel lists, not the script it was given
  const listing = (await sb.node.exec(["nft", "-a", "list", "table", "ip", NFT_GEN_TABLE])).stdout;
  const parsed = readNftRuleset(listing, "nft-ruleset.txt");
  const errors = parsed.diagnostics.filter((d) => d.severity !== "info");
  if (errors.length > 0) throw new Error(`seed ${seed}: ${JSON.stringify(errors)}\n${listing}`);
  const nat = compileNftNat(parsed.value, ctx);
  const filter = compileNftFilter(parsed.value, ctx);
  const flows = flowsFor(seed);
  const observed = await sb.observe(flows);
  const agreements = flows.map((f, i) =>
    compareTranslation(
      withFilter(nat.evaluate(sandboxFlow(f, GEN_IN_IFACE, GEN_OUT_IFACE)), filter, f),
      observed[i] ?? { error: "missing" },
    ),
  );
  return { agreements, flows, listing };
}

describe("nftables evaluator vs kernel (differential)", { skip: kernelSkip() }, () => {
  it(`agrees with conntrack on ${SETS} nft rule sets from seed ${BASE_SEED}`, async (t) => {
    const rootBefore = await rootNamespaceHash();
    const sb = await createNatSandbox({
      inIface: GEN_IN_IFACE,
      outIface: GEN_OUT_IFACE,
      nodeIp: GEN_NODE_IP,
    });
    const failures: string[] = [];
    let decided = 0;
    let total = 0;
    try {
      for (let k = 0; k < SETS && failures.length < 3; k++) {
        const seed = BASE_SEED + k;
        const { agreements, flows, listing } = await judge(sb, seed);
        for (const [i, v] of agreements.entries()) {
          total++;
          if (v.agree !== undefined) decided++;
          if (v.agree !== false) continue;
          failures.push(
            [
              `seed ${seed} (PODPATH_NFT_DIFF_SEED=${seed} PODPATH_NFT_DIFF_SETS=1), flow ${JSON.stringify(flows[i])}`,
              `  evaluator: ${v.predicted}`,
              `  kernel:    ${v.observed} (${v.why})`,
              listing,
            ].join("\n"),
          );
        }
      }
    } finally {
      await sb.destroy();
    }
    t.diagnostic(
      `${total} cases, ${decided} decided by the evaluator, ${failures.length} disagreements`,
    );
    assert.equal(await rootNamespaceHash(), rootBefore, "the root namespace changed");
    assert.deepEqual(failures, [], `\n${failures.join("\n\n")}`);
    // at least as many cases per run as the iptables nat differential (60 sets x 10 flows)
    assert.ok(total >= SETS * FLOWS_PER_SET || failures.length > 0);
    assert.ok(decided >= total * 0.8, `only ${decided} of ${total} cases were decided`);
  });
});
