/**
 * The masquerade case on the AKS lab replicas (fixtures/aks-ip-masq-agent-v2, made with
 * `podpath lab run masquerade --flavour aks`): diagnose cites the entry in the user's ConfigMap
 * of the merged set and finds no drift in the fork's own rules; read as the upstream agent the
 * same snapshot gives another answer (the flavour is tested, not assumed); the plan edits the
 * user's ConfigMap to exactly the text the "after" replica ran with; verify proves the change.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { parseIp } from "../../net/cidr.ts";
import { loadSnapshot, type Snapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { explainMasquerade } from "./explain.ts";
import { planMasquerade } from "./plan.ts";
import { verifyChange } from "./proof.ts";

const DIR = join(import.meta.dirname, "fixtures/aks-ip-masq-agent-v2");
const load = (phase: string): Snapshot => loadSnapshot(openSnapshot(join(DIR, phase)));
const DEST = { dest: { ip: parseIp("10.20.30.40"), text: "10.20.30.40" } };

/** The same snapshot with the DaemonSet's image replaced by the upstream agent's. */
function asUpstream(): Snapshot {
  const snap = load("before");
  return {
    ...snap,
    objects: snap.objects.map((o) =>
      o.kind === "DaemonSet"
        ? {
            ...o,
            name: "ip-masq-agent",
            raw: JSON.parse(
              JSON.stringify(o.raw).replaceAll(
                "mcr.microsoft.com/aks/ip-masq-agent-v2:v0.1.15",
                "registry.k8s.io/networking/ip-masq-agent:v2.12.0",
              ),
            ),
          }
        : o,
    ),
  };
}

describe("masquerade case on an AKS node (Azure ip-masq-agent-v2)", () => {
  it("diagnose cites the user's ConfigMap entry and finds the fork's rules in sync", async () => {
    const r = await explainMasquerade(load("before"), DEST);
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, r.findings.map((x) => x.id).join(","));
    const cited = f.evidence.map((e) => `${e.file}:${e.line}`);
    assert.ok(cited.includes("cluster/azure-ip-masq-agent.yaml:7"), cited.join(" "));
    assert.match(
      readFileSync(join(DIR, "before/cluster/azure-ip-masq-agent.yaml"), "utf8").split("\n")[6]!,
      /- 10\.0\.0\.0\/8/,
    );
    assert.ok(!r.findings.some((x) => x.id === "masq/intent-rules-drift"));
  });

  it("read as the upstream agent, the same dump drifts from its intent (the flavour decides)", async () => {
    const r = await explainMasquerade(asUpstream(), DEST);
    assert.ok(r.findings.some((x) => x.id === "masq/intent-rules-drift"));
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(!f?.evidence.some((e) => e.file === "cluster/azure-ip-masq-agent.yaml"));
  });

  it("plan edits azure-ip-masq-agent-config to the text the after replica runs", () => {
    const plan = planMasquerade(load("before"), { strategy: "narrow", ...DEST });
    const cm = parse(plan.narrow?.newConfigMap ?? "") as {
      metadata: { name: string };
      data: Record<string, string>;
    };
    assert.equal(cm.metadata.name, "azure-ip-masq-agent-config");
    assert.equal(cm.data["ip-masq-agent"], readFileSync(join(DIR, "new-config.yaml"), "utf8"));
    // the reconciled ranges are in the planned list: nothing has to stay against the plan
    assert.ok(!plan.diagnostics.some((d) => d.code === "PLAN_RECONCILED_KEEPS"));
    assert.doesNotMatch(plan.narrow?.newConfigMap ?? "", /reconciled/);
  });

  it("verify: fixed, and the after rules are what the fork writes for the after ConfigMaps", async () => {
    const record = await verifyChange(load("before"), load("after"), DEST);
    assert.equal(record.verdict, "fixed", record.verdictText);
    assert.equal(record.nodes[0]?.matchesNewConfig, true, record.nodes[0]?.note);
  });
});
