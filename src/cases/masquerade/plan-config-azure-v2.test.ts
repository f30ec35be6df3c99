/**
 * Plan and diagnose on a hand-written AKS snapshot where Azure ip-masq-agent-v2 runs: the list
 * comes from two ConfigMaps merged, the plan edits the user's one (never the `-reconciled` one AKS
 * reconciles) and says which entries stay; the new config merges, as the fork merges it, to the
 * planned list.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { mergeConfigDir } from "../../agents/ip-masq-agent/config-merge.ts";
import { masqueradeModel } from "./model.ts";
import { planMasquerade } from "./plan.ts";
import { clusterFiles, memorySnapshot } from "./plan-fixtures.test.ts";

const AKS = join(import.meta.dirname, "../../agents/ip-masq-agent/fixtures/aks");
// the fixture's user list exempts 10.0.0.0/8, which holds the far site 10.30.0.0/16
function aksSnapshot() {
  const files = clusterFiles(null);
  files["cluster/daemonset.yaml"] = readFileSync(join(AKS, "daemonset.yaml"), "utf8");
  files["cluster/configmaps.yaml"] = readFileSync(join(AKS, "configmaps.yaml"), "utf8");
  return memorySnapshot("aks", files);
}

describe("plan masquerade with Azure ip-masq-agent-v2 (AKS)", () => {
  it("reads the merged list, each entry cited in its own ConfigMap", () => {
    const { intent } = masqueradeModel(aksSnapshot());
    assert.equal(intent.flavour, "azure-v2");
    const at = (intent.config.nonMasqueradeCIDRs ?? []).map((e) => [e.text, e.source?.file]);
    assert.deepEqual(at, [
      ["10.0.0.0/8", "cluster/configmaps.yaml"],
      ["172.20.0.0/16", "cluster/configmaps.yaml"],
      ["10.244.0.0/16", "cluster/configmaps.yaml"],
      ["10.224.0.0/12", "cluster/configmaps.yaml"],
    ]);
  });

  it("edits azure-ip-masq-agent-config key ip-masq-agent, never the reconciled ConfigMap", () => {
    const plan = planMasquerade(aksSnapshot(), { strategy: "narrow" });
    const cm = parse(plan.narrow?.newConfigMap ?? "") as {
      metadata: { name: string };
      data: Record<string, string>;
    };
    assert.equal(cm.metadata.name, "azure-ip-masq-agent-config");
    assert.deepEqual(Object.keys(cm.data), ["ip-masq-agent"]);
    assert.doesNotMatch(plan.narrow?.newConfigMap ?? "", /reconciled/);
    // the reconciled entries are not written to the user's file, and they stay in the merge
    const merged = mergeConfigDir(
      [
        { name: "ip-masq-agent", content: cm.data["ip-masq-agent"]! },
        {
          name: "ip-masq-agent-reconciled",
          content: "nonMasqueradeCIDRs: [10.244.0.0/16, 10.224.0.0/12]",
        },
      ],
      { nomasqAllReservedRanges: false, enableIpv6: false },
    );
    const list = (merged.config.nonMasqueradeCIDRs ?? []).map((e) => e.text);
    assert.ok(!list.includes("10.0.0.0/8"), list.join(","));
    assert.ok(list.includes("10.224.0.0/12"));
    assert.match(cm.data["ip-masq-agent"]!, /NonMasqueradeSrcCIDRs/, "other keys are kept");
    assert.ok(plan.diagnostics.some((d) => d.code === "PLAN_RECONCILED_KEEPS"));
  });

  it("expects the fork's rules: quoted jump comment, MASQUERADE without --random-fully", () => {
    const plan = planMasquerade(aksSnapshot(), { strategy: "narrow" });
    const rules = plan.narrow?.expectedRules ?? [];
    assert.ok(
      rules.some((r) => r.includes('--comment "\\"ip-masq-agent: ensure nat')),
      rules.join("\n"),
    );
    assert.ok(rules.some((r) => / -j MASQUERADE$/.test(r)));
  });
});
