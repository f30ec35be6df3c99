/**
 * The masquerade case on Cilium's iptables masquerade, on the lab replicas made on a real kernel
 * (fixtures/cilium/iptables-native-routing, see its README): Cilium's rule and cilium-config's key
 * cited, attribution tested by taking the owner away, the plan in Cilium's terms (cilium-config
 * and a rollout restart, the expected rule), and verify before/after in Cilium's settings.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import { explainMasquerade } from "../explain.ts";
import { planMasquerade } from "../plan.ts";
import { verifyChange } from "../proof.ts";
import { SOURCE_OWNERS } from "./index.ts";

const DIR = join(import.meta.dirname, "../fixtures/cilium/iptables-native-routing");
const BEFORE = join(DIR, "before");
const AFTER = join(DIR, "after");
const DUMP = "nodes/worker-1/iptables-save.txt";
const load = (p: string) => loadSnapshot(openSnapshot(p));
const without = SOURCE_OWNERS.filter((o) => o.id !== "cilium");

describe("Cilium iptables masquerade (lab replica)", () => {
  it("cites Cilium's MASQUERADE rule and ipv4-native-routing-cidr, and fixes it in cilium-config", async () => {
    const r = await explainMasquerade(load(BEFORE), {});
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.match(f.title, /\(Cilium: native-routing CIDR 10\.0\.0\.0\/8\)$/);
    assert.equal(f.evidence[0]?.file, DUMP);
    assert.match(
      f.evidence[0]?.text ?? "",
      /^-A CILIUM_POST_nat -s 10\.0\.1\.0\/24 ! -d 10\.0\.0\.0\/8 /,
    );
    assert.ok(
      f.evidence.some((e) => /ipv4-native-routing-cidr: 10\.0\.0\.0\/8/.test(e.text ?? "")),
    );
    assert.ok(f.next.includes("kubectl -n kube-system rollout restart ds/cilium"));
    assert.ok(f.next.some((n) => /"ipv4-native-routing-cidr":"10\.0\.0\.0\/8".*rollback/.test(n)));
  });

  it("attribution: without Cilium's knowledge the finding is not worded as Cilium's", async () => {
    const r = await explainMasquerade(load(BEFORE), {}, without);
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.doesNotMatch(f?.title ?? "", /Cilium/);
    assert.doesNotMatch(f?.explanation ?? "", /ipv4-native-routing-cidr/);
  });

  it("plans cilium-config's key with a restart, the rule it expects, and the rollback", () => {
    const plan = planMasquerade(load(BEFORE), { strategy: "narrow" });
    assert.equal(plan.owner?.owner, "cilium");
    assert.equal(plan.owner?.knob, "cilium-config ipv4-native-routing-cidr");
    assert.ok(plan.owner?.apply.includes("kubectl -n kube-system rollout restart ds/cilium"));
    assert.deepEqual(plan.owner?.expected, [
      '-A CILIUM_POST_nat -s 10.0.1.0/24 ! -d 10.0.1.0/24 ! -o cilium_+ -m comment --comment "cilium masquerade non-cluster" -j MASQUERADE',
    ]);
    assert.ok(plan.owner?.rollback.some((x) => /10\.0\.0\.0\/8/.test(x)));
  });

  it("verify: FIXED in Cilium's settings and rules; without Cilium no owner is compared", async () => {
    const r = await verifyChange(load(BEFORE), load(AFTER));
    assert.equal(r.verdict, "fixed");
    assert.equal(r.owner?.id, "cilium");
    assert.deepEqual(r.owner?.changed, ["cilium-config ipv4-native-routing-cidr"]);
    assert.match(
      r.proof,
      /before 10\.0\.1\.23 .* after 192\.168\.1\.10 \(handshake and data completed\)/,
    );
    const w = await verifyChange(load(BEFORE), load(AFTER), {}, without);
    assert.equal(w.owner, undefined);
  });
});
