/**
 * Differential test of the nat evaluator against the kernel: seeded random nat rule sets
 * (lab/nat-gen.ts) loaded into a sandbox node, random flows sent through it, and for every flow
 * the evaluator's answer must match conntrack's translation, or be an explicit "cannot decide".
 * On a disagreement the test prints the seed, the flow and the rule set minimised on the kernel.
 *
 * Reproduce: PODPATH_DIFF_SEED=<seed> PODPATH_DIFF_SETS=1 node scripts/test.mjs differential
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compileNat } from "../iptables/nat-eval.ts";
import { renderRule } from "../iptables/render.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import { kernelSkip } from "./kernel-guard.ts";
import {
  GEN_IN_IFACE,
  GEN_NODE_IP,
  GEN_OUT_IFACE,
  type GenFlow,
  type GenRuleSet,
  generateFlows,
  generateRuleSet,
  renderRuleSet,
} from "./nat-gen.ts";
import { createNatSandbox, type NatSandbox } from "./nat-sandbox.ts";
import { sandboxContext, sandboxFlow } from "./replay.ts";
import { rootNamespaceHash } from "./root-state.ts";
import { type Agreement, compareTranslation } from "./translation.ts";

const BASE_SEED = Number(process.env["PODPATH_DIFF_SEED"] ?? 20261129);
const SETS = Number(process.env["PODPATH_DIFF_SETS"] ?? 60);
const FLOWS_PER_SET = 10;

const ctx = sandboxContext(GEN_NODE_IP, GEN_IN_IFACE, GEN_OUT_IFACE);

function predict(set: Pick<GenRuleSet, "chains" | "rules">, flows: readonly GenFlow[]) {
  const { value } = parseIptablesSave(renderRuleSet(set), "generated");
  const nat = compileNat(value, ctx);
  return flows.map((f) => nat.evaluate(sandboxFlow(f, GEN_IN_IFACE, GEN_OUT_IFACE)));
}

async function judge(
  sb: NatSandbox,
  set: Pick<GenRuleSet, "chains" | "rules">,
  flows: readonly GenFlow[],
): Promise<Agreement[]> {
  const err = await sb.loadNat(renderRuleSet(set));
  if (err !== undefined) throw new Error(`the kernel refused a generated rule set: ${err}`);
  const observed = await sb.observe(flows);
  const traces = predict(set, flows);
  return traces.map((t, i) => compareTranslation(t, observed[i] ?? { error: "missing" }));
}

/** Removes rules one at a time while the flow still disagrees (checked on the kernel each time). */
async function minimise(sb: NatSandbox, set: GenRuleSet, flow: GenFlow) {
  let rules = [...set.rules];
  for (let i = rules.length - 1; i >= 0; i--) {
    const candidate = { chains: set.chains, rules: rules.filter((_, j) => j !== i) };
    const [a] = await judge(sb, candidate, [flow]);
    if (a?.agree === false) rules = candidate.rules;
  }
  const text = renderRuleSet({ chains: set.chains, rules });
  const { value } = parseIptablesSave(text, "minimised");
  const nat = value.tables.get("nat");
  const rendered = [...(nat?.chains.values() ?? [])].flatMap((c) =>
    c.rules.map((r) => renderRule(r)),
  );
  const [final] = await judge(sb, { chains: set.chains, rules }, [flow]);
  return { rendered, final };
}

describe("nat evaluator vs kernel (differential)", { skip: kernelSkip() }, () => {
  it(`agrees with conntrack on ${SETS} rule sets x ${FLOWS_PER_SET} flows from seed ${BASE_SEED}`, async (t) => {
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
        const set = generateRuleSet(seed);
        const flows = generateFlows(seed, FLOWS_PER_SET);
        const verdicts = await judge(sb, set, flows);
        for (const [i, v] of verdicts.entries()) {
          total++;
          if (v.agree !== undefined) decided++;
          if (v.agree !== false) continue;
          const flow = flows[i]!;
          const { rendered, final } = await minimise(sb, set, flow);
          failures.push(
            [
              `seed ${seed} (PODPATH_DIFF_SEED=${seed} PODPATH_DIFF_SETS=1), flow ${JSON.stringify(flow)}`,
              `  evaluator: ${final?.predicted ?? v.predicted}`,
              `  kernel:    ${final?.observed ?? v.observed}`,
              "  minimal rule set:",
              ...rendered.map((r) => `    ${r}`),
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
    assert.ok(total >= SETS * FLOWS_PER_SET || failures.length > 0);
    // the evaluator must decide most generated cases, or the comparison proves little
    assert.ok(decided >= total * 0.8, `only ${decided} of ${total} cases were decided`);
  });
});
