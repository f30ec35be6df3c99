import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseIp } from "../../../net/cidr.ts";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import { explainMasquerade } from "../explain.ts";
import { PlanError, planMasquerade } from "../plan.ts";
import { verifyChange } from "../proof.ts";
import { SOURCE_OWNERS } from "./index.ts";

/** Both made by `podpath lab run aws-vpc-cni` on a real kernel (see their READMEs). */
const BEFORE = join(import.meta.dirname, "../../../../examples/eks-exclude-snat-cidrs");
const AFTER = join(import.meta.dirname, "../../../../examples/eks-exclude-snat-cidrs-fixed");
const load = (p: string) => loadSnapshot(openSnapshot(p));
const without = SOURCE_OWNERS.filter((o) => o.id !== "aws-vpc-cni");
const lineOf = (root: string, rel: string, pattern: RegExp) =>
  readFileSync(join(root, rel), "utf8")
    .split("\n")
    .findIndex((l) => pattern.test(l)) + 1;

describe("the AWS VPC CNI's plan, in the plugin's terms", () => {
  it("changes the aws-node env, cites the env line and the EXCLUSION rule, and keeps the VPC exempt", () => {
    const plan = planMasquerade(load(BEFORE), { strategy: "narrow" });
    assert.equal(plan.narrow, undefined, "no ip-masq-agent ConfigMap is proposed");
    assert.equal(plan.owner?.owner, "aws-vpc-cni");
    assert.deepEqual(
      plan.steps.map((s) => s.cause),
      ["owner-setting"],
    );
    assert.deepEqual(plan.owner?.apply[0]?.split(" ").slice(-1), [
      "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS-",
    ]);
    const envLine = lineOf(BEFORE, "cluster/aws-node.yaml", /value: 10\.20\.0\.0\/16/);
    assert.ok(
      plan.current.some(
        (c) => c.source?.file === "cluster/aws-node.yaml" && c.source.line === envLine,
      ),
    );
    assert.deepEqual(plan.impact.nowMasqueraded, ["10.20.0.0/16"]);
    // the expected chain has no EXCLUSION RETURN and still returns for the VPC CIDRs
    const expected = plan.owner?.expected ?? [];
    assert.ok(!expected.some((r) => /EXCLUSION/.test(r)));
    assert.ok(expected.some((r) => r.includes("-d 192.168.0.0/16") && r.endsWith("-j RETURN")));
    assert.match(plan.owner?.why ?? "", /Unchanged by design: 192\.168\.2\.20/);
    assert.match(
      plan.rollback.apply[0] ?? "",
      /AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS=10\.20\.0\.0\/16$/,
    );
  });

  it("for a VPC destination there is no setting to change: the far side routes back", () => {
    const plan = planMasquerade(load(BEFORE), {
      strategy: "narrow",
      dest: { ip: parseIp("192.168.2.20"), text: "192.168.2.20" },
    });
    assert.deepEqual(plan.owner?.apply, []);
    assert.match(plan.owner?.knob ?? "", /always exempts its VPC CIDRs/);
  });

  it("without the plugin's knowledge the plan falls back to ip-masq-agent and cannot plan", () => {
    assert.throws(
      () => planMasquerade(load(BEFORE), { strategy: "narrow" }, without),
      (e: unknown) => e instanceof PlanError && /pod range is not known/.test(e.message),
    );
  });
});

describe("verify on the EKS pair, in the plugin's terms", () => {
  it("FIXED: the env change, the plugin's rules on the node, and the wire", async () => {
    const r = await verifyChange(load(BEFORE), load(AFTER));
    assert.equal(r.verdict, "fixed");
    assert.equal(r.intended, "masquerade");
    assert.equal(r.owner?.id, "aws-vpc-cni");
    assert.deepEqual(r.owner?.changed, ["AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS"]);
    const node = r.nodes[0];
    assert.equal(node?.rulesChanged, true);
    assert.ok(node?.rulesBefore?.some((l) => /AWS SNAT CHAIN EXCLUSION/.test(l)));
    assert.ok(!node?.rulesAfter?.some((l) => /AWS SNAT CHAIN EXCLUSION/.test(l)));
    assert.match(
      r.proof,
      /before 100\.64\.1\.50 .* after 192\.168\.1\.10 \(handshake and data completed\)/,
    );
    assert.ok(r.evidence.some((e) => e.file === "before:cluster/aws-node.yaml"));
  });

  it("ROLLED BACK the other way round", async () => {
    const r = await verifyChange(load(AFTER), load(BEFORE));
    assert.equal(r.verdict, "rolled-back");
    assert.equal(r.intended, "keep-pod-source");
  });

  it("without the plugin's knowledge the record sees no ConfigMap change and no intent", async () => {
    const r = await verifyChange(load(BEFORE), load(AFTER), {}, without);
    assert.equal(r.owner, undefined);
    assert.notEqual(r.intended, "masquerade");
  });
});

describe("diagnose with the plugin's knowledge removed", () => {
  it("the exempt finding loses the plugin's rule and env and falls back to another owner's words", async () => {
    const snap = load(BEFORE);
    const withAws = await explainMasquerade(snap, {});
    const withoutAws = await explainMasquerade(snap, {}, without);
    const f = withAws.findings.find((x) => x.id === "masq/exempt-destination");
    const g = withoutAws.findings.find((x) => x.id === "masq/exempt-destination");
    assert.match(f?.title ?? "", /AWS VPC CNI/);
    assert.doesNotMatch(g?.title ?? "", /AWS VPC CNI/);
    assert.notDeepEqual(f?.next, g?.next);
  });
});
