/**
 * The masquerade case on the Calico lab replica (fixtures/calico, made by `podpath lab run calico`
 * on a real kernel, see its README): the finding names Felix's cali-nat-outgoing rule, the IPPool's
 * natOutgoing line and the node's IP set; the `-m set` matches are decided from the node's
 * `ipset save` (or `ipset list`, made by the real tool) and undecided without it; without the
 * Calico owner the answer differs; the plan patches the IPPool with its rollback; verify on the
 * before/after pair; dumps of other owners never get Calico's finding.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { hasCommand, iptablesNamespace } from "../../../iptables/test-helpers/iptables-netns.ts";
import { kernelSkip } from "../../../lab/kernel-guard.ts";
import { parseIp } from "../../../net/cidr.ts";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import { explainMasquerade } from "../explain.ts";
import { planMasquerade } from "../plan.ts";
import { replayMasqueradePlan } from "../plan-replay.ts";
import { verifyChange } from "../proof.ts";
import { calicoOwner } from "./calico.ts";
import { SOURCE_OWNERS } from "./index.ts";

const FIX = join(import.meta.dirname, "../fixtures/calico");
const BEFORE = join(FIX, "before");
const AFTER = join(FIX, "after");
const NODE = "worker-1";
const DUMP = `nodes/${NODE}/iptables-save.txt`;
const IPSET = `nodes/${NODE}/ipset.txt`;
const POOLS = "cluster/ippools.yaml";
const EKS = join(import.meta.dirname, "../../../../examples/eks-exclude-snat-cidrs");
const GKE = join(import.meta.dirname, "../../../../examples/snat-exception-list");
const KUBENET = join(import.meta.dirname, "../fixtures/kubenet/before");
const tmp = mkdtempSync(join(tmpdir(), "pp-calico-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

const load = (root: string) => loadSnapshot(openSnapshot(root));
const dest = (ip: string) => ({ dest: { ip: parseIp(ip), text: ip } });
const lineOf = (root: string, rel: string, pattern: RegExp) =>
  readFileSync(join(root, rel), "utf8")
    .split("\n")
    .findIndex((l) => pattern.test(l)) + 1;

function variant(edits: Record<string, ((text: string) => string) | null>): string {
  const root = mkdtempSync(join(tmp, "s-"));
  cpSync(BEFORE, root, { recursive: true });
  for (const [rel, edit] of Object.entries(edits)) {
    if (edit === null) rmSync(join(root, rel));
    else writeFileSync(join(root, rel), edit(readFileSync(join(root, rel), "utf8")));
  }
  return root;
}

const exempt = async (root: string, owners = SOURCE_OWNERS) => {
  const r = await explainMasquerade(load(root), {}, owners);
  return { r, f: r.findings.find((x) => x.id === "masq/exempt-destination") };
};

describe("masquerade case on the Calico replica", () => {
  it("names Felix's rule, the IPPool's natOutgoing line and the node's IP set; fixes the pool", async () => {
    const { r, f } = await exempt(BEFORE);
    assert.ok(f);
    assert.equal(f.severity, "error");
    assert.match(f.title, /\(Calico: IPPool billing-ippool natOutgoing false\)$/);
    const ruleLine = lineOf(BEFORE, DUMP, /^-A cali-nat-outgoing .*-j MASQUERADE/);
    assert.ok(ruleLine > 0);
    assert.deepEqual([f.evidence[0]?.file, f.evidence[0]?.line], [DUMP, ruleLine]);
    const natLine = lineOf(BEFORE, POOLS, /natOutgoing: false/);
    assert.deepEqual([f.evidence[1]?.file, f.evidence[1]?.line], [POOLS, natLine]);
    const setLine = lineOf(BEFORE, IPSET, /^create cali40masq-ipam-pools /);
    assert.deepEqual([f.evidence[2]?.file, f.evidence[2]?.line], [IPSET, setLine]);
    assert.match(f.explanation, /does not hold 10\.245\.0\.0\/16/);
    assert.ok(
      f.next.includes(`calicoctl patch ippool billing-ippool -p '{"spec":{"natOutgoing":true}}'`),
    );
    assert.ok(f.next.some((n) => /natOutgoing":false}}' {3}# rollback$/.test(n)));
    assert.doesNotMatch(JSON.stringify(r.findings), /ip-masq-agent|GKE|plan masquerade/);
  });

  it("without the Calico owner the answer differs (attribution is what decides)", async () => {
    const { f } = await exempt(
      BEFORE,
      SOURCE_OWNERS.filter((o) => o !== calicoOwner),
    );
    assert.ok(f, "the source is still kept: the rules and the IP sets decide that");
    assert.doesNotMatch(f.title, /Calico/);
    assert.doesNotMatch(f.explanation, /natOutgoing|calicoctl/);
  });

  it("without the node's ipset file the -m set matches are undecided and the file is asked for", async () => {
    const root = variant({ [IPSET]: null });
    const { r, f } = await exempt(root);
    const path = r.paths.find((p) => p.to === "10.20.30.40");
    assert.notEqual(path?.sourceOnWire, "10.245.12.4", "not decided as kept without the sets");
    assert.ok(!f || !/does not hold/.test(f.explanation));
    assert.ok(r.missing.some((m) => m.file === IPSET && /ipset save/.test(m.command ?? "")));
    // every set membership the rules turn on is asked of the ipset file, never of the dump
    assert.ok(r.missing.some((m) => m.file === IPSET && /member of ipset/.test(m.would_decide)));
    assert.ok(!r.missing.some((m) => m.file === DUMP && /ipset/.test(m.would_decide)));
    assert.match(JSON.stringify(r), /undecided: give ipset save/);
  });

  it("a disabled pool over the far range: Felix skips destinations in the IP pools", async () => {
    const pool = [
      "  - apiVersion: crd.projectcalico.org/v1",
      "    kind: IPPool",
      "    metadata:",
      "      name: onprem-no-nat",
      "    spec:",
      "      cidr: 10.20.0.0/16",
      "      disabled: true",
      "      natOutgoing: false",
      "",
    ].join("\n");
    const root = variant({
      [POOLS]: (t) =>
        t.replace("natOutgoing: false", "natOutgoing: true").replace("items:\n", `items:\n${pool}`),
      [IPSET]: (t) =>
        `${t}add cali40masq-ipam-pools 10.245.0.0/16\nadd cali40network-ip-pools 10.20.0.0/16\n`,
    });
    const { f } = await exempt(root);
    assert.ok(f);
    assert.match(f.title, /Calico: 10\.20\.30\.40 is in IPPool onprem-no-nat/);
    assert.match(f.explanation, /disabled: true/);
    assert.ok(f.evidence.some((e) => e.file === IPSET && /10\.20\.0\.0\/16/.test(e.text ?? "")));
  });

  it("plans in Calico's terms: natOutgoing on the pool, with rollback and the expected set", () => {
    const p = planMasquerade(load(BEFORE), { strategy: "narrow" });
    assert.equal(p.owner?.owner, "calico");
    assert.equal(p.owner?.title, "Set natOutgoing: true on IPPool billing-ippool");
    assert.deepEqual(
      p.owner?.change.after.find((s) => s.key === "IPPool billing-ippool natOutgoing")?.value,
      "true",
    );
    assert.deepEqual(p.owner?.apply, [
      `calicoctl patch ippool billing-ippool -p '{"spec":{"natOutgoing":true}}'`,
    ]);
    assert.deepEqual(p.owner?.rollback, [
      `calicoctl patch ippool billing-ippool -p '{"spec":{"natOutgoing":false}}'`,
    ]);
    // the rule Felix keeps writing, hash comment and all, is the one the after node shows
    const afterRule = readFileSync(join(AFTER, DUMP), "utf8")
      .split("\n")
      .find((l) => l.startsWith("-A cali-nat-outgoing "));
    assert.ok(afterRule && p.owner?.expected.includes(afterRule));
    // without Calico's knowledge the ip-masq-agent plan is all that is left, and it needs a pod
    // range no Node states (Calico's IPAM ignores podCIDR)
    const others = SOURCE_OWNERS.filter((o) => o !== calicoOwner);
    assert.throws(
      () => planMasquerade(load(BEFORE), { strategy: "narrow" }, others),
      /the pod range is not known/,
    );
  });

  it("after natOutgoing: true the pod leaves with the node's address", async () => {
    const r = await explainMasquerade(load(AFTER), {});
    assert.ok(!r.findings.some((f) => f.id === "masq/exempt-destination"));
    const p = r.paths.find((x) => x.from.startsWith("pod/") && x.to === "10.20.30.40");
    assert.equal(p?.sourceOnWire, "192.168.1.10");
  });

  it("pod-to-pod traffic inside the IP pools keeps its address by design", async () => {
    const r = await explainMasquerade(load(BEFORE), dest("10.244.2.7"));
    assert.ok(!r.findings.some((f) => f.id === "masq/exempt-destination"));
  });

  it("verify on the before/after pair: the pool's natOutgoing changed, the pod now leaves as the node", async () => {
    const r = await verifyChange(load(BEFORE), load(AFTER));
    assert.equal(r.owner?.id, "calico");
    assert.deepEqual(r.owner?.changed, ["IPPool billing-ippool natOutgoing"]);
    assert.equal(r.intended, "masquerade");
    assert.match(r.proof, /after 192\.168\.1\.10 /);
  });

  it("its installed state on the node (the sets' members) shows the change verify needs", () => {
    const before = calicoOwner.installedState?.(load(BEFORE), NODE);
    const after = calicoOwner.installedState?.(load(AFTER), NODE);
    assert.ok(!before?.lines.includes("cali40masq-ipam-pools 10.245.0.0/16"));
    assert.ok(after?.lines.includes("cali40masq-ipam-pools 10.245.0.0/16"));
    assert.equal(before?.source?.file, IPSET);
  });

  // Felix changes the IP set, not the rules: the proof's kernel layer compares the owner's
  // installed state (the sets' members) beside its nat rules
  it("verify on the before/after pair: FIXED, and ROLLED BACK the other way round", async () => {
    const r = await verifyChange(load(BEFORE), load(AFTER));
    assert.equal(r.verdict, "fixed", r.verdictText);
    assert.equal(r.owner?.id, "calico");
    assert.deepEqual(r.owner?.changed, ["IPPool billing-ippool natOutgoing"]);
    const back = await verifyChange(load(AFTER), load(BEFORE));
    assert.equal(back.verdict, "rolled-back", back.verdictText);
  });

  it("never claims another owner's dump", async () => {
    for (const root of [EKS, GKE, KUBENET]) {
      const snap = load(root);
      assert.equal(calicoOwner.present(snap), false, root);
      const r = await explainMasquerade(snap, {});
      assert.doesNotMatch(JSON.stringify(r.findings), /Calico|natOutgoing|calicoctl/, root);
    }
  });
});

const skip = kernelSkip() || (hasCommand("ipset") ? false : "ipset is not installed");

describe("the Calico replica with the node's sets as `ipset list` prints them", { skip }, () => {
  const suite = iptablesNamespace("ppcl");
  it("gives the same finding from the list form made by the real ipset", async () => {
    const saved = readFileSync(join(BEFORE, IPSET), "utf8");
    const restored = await suite.ns.exec(["ipset", "restore"], { input: saved });
    assert.equal(restored.code, 0, restored.stderr);
    const listed = await suite.ns.exec(["ipset", "list"]);
    assert.match(listed.stdout, /^Name: cali40masq-ipam-pools$/m);
    const root = variant({ [IPSET]: () => listed.stdout });
    const { f } = await exempt(root);
    const { f: fromSave } = await exempt(BEFORE);
    assert.equal(f?.title, fromSave?.title);
    const setLine = lineOf(root, IPSET, /^Name: cali40masq-ipam-pools$/);
    assert.ok(f?.evidence.some((e) => e.file === IPSET && e.line === setLine));
  });

  it("replays the plan on a kernel: the node's sets with the pool added, the kernel and evaluator agree", async () => {
    const snap = load(BEFORE);
    const plan = planMasquerade(snap, { strategy: "narrow" });
    const lines = await replayMasqueradePlan(snap, plan);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.kernelSource, "192.168.1.10", JSON.stringify(lines[0]));
    assert.equal(lines[0]?.agree, true, JSON.stringify(lines[0]));
    // the same replay without the plan's set change keeps the pod address, on both sides
    const unchanged = await replayMasqueradePlan(snap, {
      ...plan,
      owner: plan.owner ? { ...plan.owner, expected: [] } : undefined,
    } as typeof plan);
    assert.equal(unchanged[0]?.kernelSource, "10.245.12.4", JSON.stringify(unchanged[0]));
    assert.equal(unchanged[0]?.agree, true);
  });
});
