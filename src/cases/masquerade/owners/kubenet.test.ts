/**
 * The masquerade case on the kubenet lab replica (fixtures/kubenet, made by `podpath lab run
 * kubenet` on a real kernel, see its README): the finding names kubenet's rule and the kubelet's
 * flag line; without the kubenet owner the answer differs (attribution decides); the plan is the
 * kubelet flag with the restart, the rule deletion and the rollback; verify on the before/after pair
 * compares the flag and kubenet's rules; dumps of other owners never get kubenet's finding.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseIp } from "../../../net/cidr.ts";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import { explainMasquerade } from "../explain.ts";
import { planMasquerade } from "../plan.ts";
import { verifyChange } from "../proof.ts";
import { SOURCE_OWNERS } from "./index.ts";
import { kubenetOwner } from "./kubenet.ts";

const FIX = join(import.meta.dirname, "../fixtures/kubenet");
const BEFORE = join(FIX, "before");
const AFTER = join(FIX, "after");
const NODE = "kubenet-pool-1-node-0";
const DUMP = `nodes/${NODE}/iptables-save.txt`;
const FLAGS = `nodes/${NODE}/kubelet-flags.txt`;
const EKS = join(import.meta.dirname, "../../../../examples/eks-exclude-snat-cidrs");
const GKE = join(import.meta.dirname, "../../../../examples/snat-exception-list");
const tmp = mkdtempSync(join(tmpdir(), "pp-kubenet-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

const load = (root: string) => loadSnapshot(openSnapshot(root));
const dest = (ip: string) => ({ dest: { ip: parseIp(ip), text: ip } });
const lineOf = (root: string, rel: string, pattern: RegExp) =>
  readFileSync(join(root, rel), "utf8")
    .split("\n")
    .findIndex((l) => pattern.test(l)) + 1;

function variant(rel: string, edit: (text: string) => string): string {
  const root = mkdtempSync(join(tmp, "s-"));
  cpSync(BEFORE, root, { recursive: true });
  writeFileSync(join(root, rel), edit(readFileSync(join(root, rel), "utf8")));
  return root;
}

describe("masquerade case on the kubenet replica", () => {
  it("names kubenet's rule and the kubelet's flag line, fixes it with the flag", async () => {
    const r = await explainMasquerade(load(BEFORE), {});
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.equal(f.severity, "error");
    assert.match(f.title, /\(kubenet: --non-masquerade-cidr=10\.0\.0\.0\/8\)$/);
    const ruleLine = lineOf(BEFORE, DUMP, /kubenet: SNAT for outbound traffic from cluster/);
    assert.ok(ruleLine > 0);
    assert.deepEqual([f.evidence[0]?.file, f.evidence[0]?.line], [DUMP, ruleLine]);
    assert.deepEqual([f.evidence[1]?.file, f.evidence[1]?.line], [FLAGS, 1]);
    assert.equal(f.evidence[1]?.text, "--non-masquerade-cidr=10.0.0.0/8");
    assert.match(f.explanation, /Attribution: kubenet's comment/);
    assert.match(f.explanation, /cluster's pod range \(10\.244\.0\.0\/16\)/);
    assert.ok(f.next.some((n) => /^systemctl restart kubelet/.test(n)));
    assert.ok(
      f.next.some((n) =>
        /^iptables -t nat -D POSTROUTING .* ! -d 10\.0\.0\.0\/8 -j MASQUERADE/.test(n),
      ),
    );
    assert.doesNotMatch(JSON.stringify(r.findings), /ip-masq-agent|GKE/);
  });

  it("without the kubenet owner the answer differs (attribution is what decides)", async () => {
    const others = SOURCE_OWNERS.filter((o) => o !== kubenetOwner);
    const r = await explainMasquerade(load(BEFORE), {}, others);
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, "the source is still kept: the rules decide that");
    assert.doesNotMatch(f.title, /kubenet: --non-masquerade-cidr/);
    assert.doesNotMatch(f.explanation, /systemctl restart kubelet|--non-masquerade-cidr=10/);
  });

  it("pod-to-pod traffic inside the pod range keeps its address by design", async () => {
    const r = await explainMasquerade(load(BEFORE), dest("10.244.2.7"));
    assert.ok(!r.findings.some((f) => f.id === "masq/exempt-destination"));
  });

  it("without the flags file: the default applies unseen, so the rule alone is cited and the file asked for", async () => {
    const root = mkdtempSync(join(tmp, "noflags-"));
    cpSync(BEFORE, root, { recursive: true });
    rmSync(join(root, FLAGS));
    const r = await explainMasquerade(load(root), {});
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.equal(f.evidence[0]?.file, DUMP);
    assert.ok(!f.evidence.some((e) => e.file === FLAGS));
    assert.ok(r.missing.some((m) => m.file === FLAGS));
  });

  it("with the kubelet's flag at 0.0.0.0/0 kubenet writes no rule: the flag is the exemption", async () => {
    const root = variant(DUMP, (t) =>
      t
        .split("\n")
        .filter((l) => !l.includes("kubenet:"))
        .join("\n"),
    );
    writeFileSync(
      join(root, FLAGS),
      readFileSync(join(root, FLAGS), "utf8").replace("=10.0.0.0/8", "=0.0.0.0/0"),
    );
    const r = await explainMasquerade(load(root), {});
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.match(f.title, /kubenet: --non-masquerade-cidr=0\.0\.0\.0\/0/);
    assert.match(f.explanation, /writes none for 0\.0\.0\.0\/0/);
    assert.equal(f.evidence[0]?.file, FLAGS);
  });

  it("plans in kubenet's terms: the flag, the restart, the old rule deleted, the rollback", () => {
    const p = planMasquerade(load(BEFORE), { strategy: "narrow" });
    assert.equal(p.owner?.owner, "kubenet");
    assert.match(
      p.owner?.title ?? "",
      /--non-masquerade-cidr to the cluster's pod range 10\.244\.0\.0\/16/,
    );
    assert.deepEqual(p.owner?.change.before, [
      {
        key: `${NODE}: kubelet --non-masquerade-cidr`,
        value: "10.0.0.0/8",
        source: { file: FLAGS, line: 1, text: "--non-masquerade-cidr=10.0.0.0/8" },
      },
    ]);
    assert.deepEqual(p.owner?.change.after, [
      { key: `${NODE}: kubelet --non-masquerade-cidr`, value: "10.244.0.0/16" },
    ]);
    assert.ok(p.owner?.apply.some((a) => a.startsWith("systemctl restart kubelet")));
    assert.ok(
      p.owner?.expected.includes(
        '-A POSTROUTING ! -d 10.244.0.0/16 -m comment --comment "kubenet: SNAT for outbound traffic from cluster" -m addrtype ! --dst-type LOCAL -j MASQUERADE',
      ),
    );
    assert.ok(!p.owner?.expected.some((e) => e.includes("! -d 10.0.0.0/8")));
    assert.ok(p.owner?.rollback.some((r) => /! -d 10\.244\.0\.0\/16 -j MASQUERADE/.test(r)));
    assert.ok(p.owner?.nowMasqueraded.includes("10.0.0.0/9"));
    assert.ok(!p.owner?.nowMasqueraded.some((c) => c.startsWith("10.244.")));
    const without = planMasquerade(
      load(BEFORE),
      { strategy: "narrow" },
      SOURCE_OWNERS.filter((o) => o !== kubenetOwner),
    );
    assert.notEqual(without.owner?.owner, "kubenet");
  });

  it("after the fix the plan changes nothing (never ip-masq-agent's ConfigMap)", () => {
    const p = planMasquerade(load(AFTER), { strategy: "narrow" });
    assert.equal(p.owner?.owner, "kubenet");
    assert.match(
      p.owner?.title ?? "",
      /^Nothing to change: kubenet already masquerades 10\.20\.30\.40$/,
    );
    assert.deepEqual(p.owner?.apply, []);
    assert.doesNotMatch(JSON.stringify(p), /ip-masq-agent|nonMasqueradeCIDRs/);
  });

  it("verify on the before/after pair: FIXED, the flag's change and kubenet's rules", async () => {
    const r = await verifyChange(load(BEFORE), load(AFTER));
    assert.equal(r.verdict, "fixed", r.verdictText);
    assert.equal(r.owner?.id, "kubenet");
    assert.deepEqual(r.owner?.changed, [`${NODE}: kubelet --non-masquerade-cidr`]);
    assert.equal(r.intended, "masquerade");
    assert.match(r.proof, /before 10\.244\.1\.5 .* after 172\.16\.1\.10 /);
    const back = await verifyChange(load(AFTER), load(BEFORE));
    assert.equal(back.verdict, "rolled-back", back.verdictText);
  });

  it("never claims another owner's dump", async () => {
    for (const root of [EKS, GKE]) {
      const snap = load(root);
      assert.equal(kubenetOwner.present(snap), false, root);
      const r = await explainMasquerade(snap, {});
      assert.doesNotMatch(JSON.stringify(r.findings), /kubenet|--non-masquerade-cidr=/, root);
    }
  });
});

describe("kubenet's plan on a real listing with nothing else (a legacy GKE node's iptables -S)", () => {
  it("takes the cluster's pod range from kube-proxy's rules and cites them", () => {
    const root = join(import.meta.dirname, "../fixtures/gke-legacy-kubenet-listing");
    const plan = planMasquerade(loadSnapshot(openSnapshot(root)), {
      strategy: "narrow",
      dest: { ip: parseIp("10.20.30.40"), text: "10.20.30.40" },
    });
    assert.equal(plan.owner?.owner, "kubenet");
    assert.deepEqual(plan.podRanges, ["10.48.0.0/14"]);
    assert.match(plan.owner?.title ?? "", /pod range 10\.48\.0\.0\/14$/);
    assert.match(
      plan.owner?.why ?? "",
      /kube-proxy's rules .*nodes\/gke-rei-default-pool\/iptables-save\.txt:\d+/,
    );
  });
});

describe("kubenet on a dual-stack node with an IPv4 flag (the default 10.0.0.0/8)", () => {
  /** The replica with the pod's IPv6 address and the node's IPv6 nat table (kubenet wrote none). */
  function dualStack(): string {
    const root = variant("cluster/pods.yaml", (t) =>
      t.replace(
        "        - ip: 10.244.1.5\n",
        "        - ip: 10.244.1.5\n        - ip: fd00:10:244:1::5\n",
      ),
    );
    // ip6tables-save of the node: kubenet writes its one rule in the flag's family only
    writeFileSync(
      join(root, `nodes/${NODE}/ip6tables-save.txt`),
      "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n",
    );
    const site = join(root, "remote/onprem-dc1.yaml");
    writeFileSync(
      site,
      readFileSync(site, "utf8").replace(/^prefixes:\n/m, "prefixes:\n  - fd00:20::/64\n"),
    );
    return root;
  }

  it("an IPv6 destination: kubenet masquerades only IPv4, said with the flag's line", async () => {
    const root = dualStack();
    const r = await explainMasquerade(load(root), dest("fd00:20::30:40"));
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, JSON.stringify(r.findings.map((x) => x.id)));
    assert.match(
      f.title,
      /fd00:10:244:1::5 \(kubenet masquerades only IPv4: --non-masquerade-cidr=10\.0\.0\.0\/8\)/,
    );
    assert.equal(f.evidence[0]?.file, FLAGS);
    assert.doesNotMatch(JSON.stringify(r.findings), /ip-masq-agent|GKE/);
    const p = planMasquerade(load(root), { strategy: "narrow", ...dest("fd00:20::30:40") });
    assert.equal(p.owner?.owner, "kubenet");
    assert.match(p.owner?.title ?? "", /kubenet masquerades no IPv6 traffic/);
    assert.deepEqual(p.owner?.apply, []);
    // without kubenet's knowledge the answer is not kubenet's
    const w = await explainMasquerade(
      load(root),
      dest("fd00:20::30:40"),
      SOURCE_OWNERS.filter((o) => o !== kubenetOwner),
    );
    assert.doesNotMatch(JSON.stringify(w.findings), /kubenet masquerades only/);
  });
});
