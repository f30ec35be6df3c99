/**
 * Tests of the plan's steps on lab replicas (fixtures/three-pools, fixtures/agent-lagging) and on
 * the embedded example: the plan follows the cause the diagnosis finds (the DaemonSet's coverage
 * as a patch, the stale agent's pod restarted), leads with the far side's allowlist when the fix
 * alone would break the connection, and lists the steps in the order they must be done.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseCidr } from "../../net/cidr.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { planMasquerade } from "./plan.ts";
import { renderMasqueradePlanText } from "./plan-render.ts";

const ROOT = join(import.meta.dirname, "../../..");
const load = (dir: string) => loadSnapshot(openSnapshot(dir));
const FIX = join(import.meta.dirname, "fixtures");

/** The JSON object of the first `-p '…'` of a kubectl patch command. */
const patchOf = (cmd: string) =>
  JSON.parse(/-p '(.+)'$/.exec(cmd)![1]!) as {
    spec: { template: { spec: Record<string, unknown> } };
  };

describe("plan masquerade follows the cause", () => {
  it("three pools, no agent on legacy, ConfigMap already right: a DaemonSet patch, no ConfigMap change", async () => {
    const snap = load(join(FIX, "three-pools"));
    const ids = (await diagnose(snap, {})).findings.map((f) => f.id);
    assert.ok(ids.includes("masq/agent-missing"), ids.join(", "));
    const plan = planMasquerade(snap, { strategy: "narrow" });
    assert.ok(plan.destinations.every((d) => !d.exemptToday));
    assert.deepEqual(plan.narrow!.apply, [], "no ConfigMap change");
    assert.ok(!plan.steps.some((s) => s.cause === "config"));
    const cov = plan.steps.find((s) => s.cause === "agent-coverage")!;
    assert.match(cov.title, /ip-masq-agent run on pool legacy/);
    const apply = cov.apply[0]!;
    assert.match(
      apply,
      /^kubectl -n kube-system patch daemonset ip-masq-agent --type strategic -p '/,
    );
    // the patch drops the required affinity that excludes legacy; the rollback restores it
    const spec = (p: ReturnType<typeof patchOf>) => p.spec.template.spec;
    assert.deepEqual(spec(patchOf(apply))["affinity"], {
      nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: null },
    });
    assert.match(JSON.stringify(spec(patchOf(cov.rollback[0]!))), /"NotIn","values":\["legacy"\]/);
    // blockers first: the allowlist, then the agent's coverage
    assert.deepEqual(
      plan.steps.map((s) => s.cause),
      ["far-side-allowlist", "agent-coverage"],
    );
    assert.ok(plan.diagnostics.some((d) => d.code === "PLAN_CONFIG_ALREADY_RIGHT"));
    // the nodes show 10.4.0.0/23 and 10.4.2.0/24; today's 10.4.0.0/14 holds them and no
    // destination: it stays whole, so no pod of a node the snapshot lacks is masqueraded
    const kept = plan.narrow!.newList.find((n) => n.cidr === "10.4.0.0/14");
    assert.match(
      kept?.why ?? "",
      /today's entry 10\.4\.0\.0\/14 \(cluster\/ip-masq-agent\.yaml:\d+\)/,
    );
  });

  it("ConfigMap right, rules stale: restart the agent's pod on that node, by name", () => {
    const plan = planMasquerade(load(join(FIX, "agent-lagging")), { strategy: "narrow" });
    assert.deepEqual(plan.narrow!.apply, []);
    const stale = plan.steps.find((s) => s.cause === "agent-stale")!;
    assert.match(stale.title, /gke-lab-default-0: pod kube-system\/ip-masq-agent-\w+/);
    assert.ok(
      stale.apply.some((a) => /^kubectl -n kube-system delete pod ip-masq-agent-\w+ /.test(a)),
    );
    assert.ok(stale.evidence.some((e) => e.file.endsWith("iptables-save.txt")));
  });
});

describe("plan masquerade leads with the blocker", () => {
  const plan = planMasquerade(load(join(ROOT, "examples/snat-exception-list")), {
    strategy: "narrow",
  });

  it("the far side's allowlist admits only the pod range: said first, with the combined change", () => {
    const b = plan.blockers[0]!;
    assert.equal(b.allowlist, "db-firewall");
    assert.equal(`${b.file}:${b.line}`, "remote/onprem-dc1.yaml:16");
    assert.match(b.breaks, /^The fix alone breaks the connection to 10\.20\.30\.40:5432/);
    assert.ok(b.combined.includes("+       - 10.128.0.0/20"), b.combined.join("\n"));
    assert.ok(b.combined.some((l) => /keep-pod-identity/.test(l)));
    assert.deepEqual(
      plan.steps.map((s) => s.cause),
      ["far-side-allowlist", "config"],
    );
  });

  it("the text opens with it", () => {
    const text = renderMasqueradePlanText(plan);
    const lines = text.split("\n").filter((l) => l.trim() !== "");
    assert.match(lines[1] ?? "", /^FIRST: the fix alone breaks the connection/);
  });

  it("keep-pod-identity has no such blocker", () => {
    const keep = planMasquerade(load(join(ROOT, "examples/snat-exception-list")), {
      strategy: "keep-pod-identity",
    });
    assert.deepEqual(keep.blockers, []);
  });
});

describe("plan masquerade leads with a NetworkPolicy the narrowing breaks", () => {
  // a second pool's pods come from an additional pod range (GKE discontiguous multi-Pod CIDR)
  // that --pod-range leaves out; the ledger database there admits only pod addresses
  const LEDGER = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: ledger-db-0
    namespace: finance
    labels:
      app: ledger-db
  spec:
    nodeName: gke-lab-default-0
    containers:
    - name: postgres
      image: postgres:16
  status:
    phase: Running
    podIP: 10.8.0.12
    podIPs:
    - ip: 10.8.0.12
- apiVersion: networking.k8s.io/v1
  kind: NetworkPolicy
  metadata:
    name: ledger-from-pods
    namespace: finance
  spec:
    podSelector:
      matchLabels:
        app: ledger-db
    policyTypes:
    - Ingress
    ingress:
    - from:
      - ipBlock:
          cidr: 10.4.0.0/14
      - ipBlock:
          cidr: 10.8.0.0/21
      ports:
      - protocol: TCP
        port: 5432
`;
  const dir = mkdtempSync(join(tmpdir(), "podpath-plan-netpol-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(join(ROOT, "examples/snat-exception-list"), dir, { recursive: true });
  writeFileSync(join(dir, "cluster/ledger.yaml"), LEDGER);

  it("the pod the narrowed list stops exempting: a blocker citing the policy, before the ConfigMap", () => {
    const plan = planMasquerade(load(dir), {
      strategy: "narrow",
      podRange: [parseCidr("10.4.0.0/14")],
    });
    const b = plan.blockers.find((x) => x.kind === "network-policy")!;
    assert.equal(b.allowlist, "NetworkPolicy finance/ledger-from-pods");
    assert.equal(LEDGER.split("\n")[b.line - 1]?.trim(), "- from:");
    assert.match(b.breaks, /connection to finance\/ledger-db-0 \(10\.8\.0\.12\)/);
    assert.match(b.breaks, /admits only ipBlock 10\.4\.0\.0\/14, ipBlock 10\.8\.0\.0\/21/);
    assert.ok(b.combined.includes("+   - ipBlock: {cidr: 10.128.0.2/32}"), b.combined.join("\n"));
    assert.deepEqual(
      plan.steps.map((s) => s.cause),
      ["far-side-allowlist", "network-policy", "config"],
    );
  });

  it("with the pod's range kept (the snapshot's pods decide it), nothing breaks there", () => {
    const plan = planMasquerade(load(dir), { strategy: "narrow" });
    assert.ok(!plan.blockers.some((x) => x.kind === "network-policy"));
  });
});
