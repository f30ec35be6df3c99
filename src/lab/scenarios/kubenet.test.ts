/**
 * The kubenet replica: its options (pure), and on the real kernel that the node's nat POSTROUTING
 * holds kubenet's rule exactly as iptables-save prints what kubenet adds, the pod's packets reach
 * on-prem with the pod address and get no reply, `diagnose` names kubenet's rule and the kubelet's
 * flag, the plan's rules replayed on the kernel agree, and a kubelet restart with a new flag (the
 * previous rule kept, as kubenet leaves it) masquerades the on-prem destination.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { readKubeletFlags } from "../../agents/kubenet/flags.ts";
import { planMasquerade } from "../../cases/masquerade/plan.ts";
import { replayMasqueradePlan } from "../../cases/masquerade/plan-replay.ts";
import { verifyChange } from "../../cases/masquerade/proof.ts";
import { parseIp } from "../../net/cidr.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { kernelSkip } from "../kernel-guard.ts";
import { createLab } from "../netns.ts";
import {
  CLUSTER_CIDR,
  KUBENET_NODE_NAME,
  KubenetOptions,
  kubeletArgs,
  planKubenetReplica,
  scenario,
} from "./kubenet.ts";

describe("kubenet replica plan", () => {
  it("defaults to the kubelet's 10.0.0.0/8; --fixed is the cluster's pod range, one rule", () => {
    const p = planKubenetReplica(KubenetOptions.parse({}));
    assert.equal(p.flag, "10.0.0.0/8");
    assert.deepEqual(
      p.rules.map((r) => r.cidr),
      ["10.0.0.0/8"],
    );
    assert.equal(p.phase, "before");
    const f = planKubenetReplica(KubenetOptions.parse({ fixed: true, previous: "10.0.0.0/8" }));
    assert.deepEqual(
      f.rules.map((r) => r.cidr),
      [CLUSTER_CIDR],
    );
    const restarted = planKubenetReplica(
      KubenetOptions.parse({ "non-masquerade-cidr": CLUSTER_CIDR, previous: "10.0.0.0/8" }),
    );
    assert.deepEqual(
      restarted.rules.map((r) => r.cidr),
      ["10.0.0.0/8", CLUSTER_CIDR],
    );
    assert.equal(KubenetOptions.safeParse({ "non-masquerade-cidr": "10.0.0/33" }).success, false);
    assert.equal(KubenetOptions.safeParse({ bogus: "1" }).success, false);
  });
  it("--ipv6: the flag an IPv6 CIDR (fd00::/8), kubenet's one rule in ip6tables; --fixed the IPv6 pod range", () => {
    const p = planKubenetReplica(KubenetOptions.parse({ ipv6: true }));
    assert.equal(p.flag, "fd00::/8");
    assert.deepEqual(
      p.rules.map((r) => [r.family, r.cidr]),
      [[6, "fd00::/8"]],
    );
    const f = planKubenetReplica(KubenetOptions.parse({ ipv6: true, fixed: true }));
    assert.equal(f.flag, "fd00:10:244::/56");
    assert.equal(readKubeletFlags(kubeletArgs(f), "f").value.nonMasqueradeCidr.cidr?.family, 6);
  });
  it("the kubelet command line it writes reads back as the flag it installed", () => {
    const p = planKubenetReplica(KubenetOptions.parse({ "non-masquerade-cidr": "10.244.0.0/16" }));
    const r = readKubeletFlags(kubeletArgs(p), "f");
    assert.equal(r.value.nonMasqueradeCidr.text, "10.244.0.0/16");
    assert.equal(r.value.networkPlugin?.value, "kubenet");
  });
});

const skip = kernelSkip();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function runLab(
  opts: Record<string, string | true>,
): Promise<{ dir: string; summary: string }> {
  const lab = await createLab({ prefix: "ppk" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-kubenet-test-"));
  dirs.push(dir);
  try {
    const out = await scenario.run({ lab, outDir: dir, log: () => {} }, KubenetOptions.parse(opts));
    return { dir, summary: out.summary.join("\n") };
  } finally {
    await lab.destroy();
  }
}

const DUMP = `nodes/${KUBENET_NODE_NAME}/iptables-save.txt`;

describe("lab kubenet on the real kernel", { skip, concurrency: false }, () => {
  it("installs kubenet's rule as it writes it; diagnose names kubenet, its rule and the flag; the plan replays", async () => {
    const { dir, summary } = await runLab({});
    assert.match(
      summary,
      /node ping 10\.20\.30\.40 answers, pod ping silent, pod tcp\/5432 silent/,
    );
    const plan = planKubenetReplica(KubenetOptions.parse({}));
    const saved = readFileSync(join(dir, DUMP), "utf8").split("\n");
    assert.deepEqual(
      saved.filter((l) => l.includes("kubenet:")),
      plan.rules.map((r) => r.saved),
    );
    const snap = loadSnapshot(openSnapshot(dir));
    const a = await diagnose(snap, {});
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.equal(f.evidence[0]?.file, DUMP);
    assert.equal(f.evidence[0]?.text, plan.rules[0]?.saved);
    assert.equal(f.evidence[1]?.file, `nodes/${KUBENET_NODE_NAME}/kubelet-flags.txt`);
    assert.doesNotMatch(JSON.stringify(a.findings), /ip-masq-agent|GKE/);
    const p = planMasquerade(snap, { strategy: "narrow" });
    assert.equal(p.owner?.owner, "kubenet");
    const replay = await replayMasqueradePlan(snap, p);
    assert.ok(replay.length > 0);
    for (const r of replay) assert.equal(r.agree, true, JSON.stringify(r));
    assert.ok(replay.some((r) => r.kernelSource === "172.16.1.10"));
  });

  it("IPv6: kubenet's rule in ip6tables; diagnose, plan, replay and verify on real IPv6 traffic", async (t) => {
    const { dir, summary } = await runLab({ ipv6: true });
    if (!summary.includes("IPv6:")) return t.skip("IPv6 is disabled in this kernel");
    assert.match(
      summary,
      /IPv6: node ping fd00:20::30:40 answers, pod ping silent, pod tcp\/5432 silent/,
    );
    const plan = planKubenetReplica(KubenetOptions.parse({ ipv6: true }));
    const v6dump = `nodes/${KUBENET_NODE_NAME}/ip6tables-save.txt`;
    const rule = plan.rules[0];
    assert.equal(rule?.family, 6);
    const saved6 = readFileSync(join(dir, v6dump), "utf8").split("\n");
    assert.deepEqual(
      saved6.filter((l) => l.includes("kubenet:")),
      [rule?.saved],
    );
    // one flag, one family: no kubenet rule in the IPv4 dump
    assert.doesNotMatch(readFileSync(join(dir, DUMP), "utf8"), /kubenet:/);
    const dest = { dest: { ip: parseIp("fd00:20::30:40"), text: "fd00:20::30:40" } };
    const snap = loadSnapshot(openSnapshot(dir));
    const a = await diagnose(snap, dest);
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, JSON.stringify(a.findings.map((x) => x.id)));
    assert.equal(f.evidence[0]?.file, v6dump);
    assert.equal(f.evidence[0]?.text, rule?.saved);
    assert.equal(f.evidence[1]?.file, `nodes/${KUBENET_NODE_NAME}/kubelet-flags.txt`);
    assert.match(f.explanation, /fd00:172:16:1::10/, "the node's IPv6 address, not its IPv4 one");
    const path = a.paths.find(
      (x) => x.from.startsWith("pod/") && x.to.startsWith("fd00:20::30:40"),
    );
    assert.equal(path?.sourceOnWire, "fd00:10:244:1::5");
    assert.doesNotMatch(JSON.stringify(a.findings), /ip-masq-agent|GKE/);
    // the IPv4 side of the same node: kubenet writes no IPv4 rule, and says so as kubenet's
    const a4 = await diagnose(snap, {});
    const f4 = a4.findings.find((x) => x.id === "masq/exempt-destination");
    assert.match(f4?.title ?? "", /kubenet masquerades only IPv6/);
    const p = planMasquerade(snap, { strategy: "narrow", ...dest });
    assert.equal(p.owner?.owner, "kubenet");
    assert.match(p.owner?.title ?? "", /fd00:10:244::\/56/);
    assert.ok(p.owner?.apply.some((l) => l.startsWith("ip6tables -t nat -D POSTROUTING")));
    // the plan's ip6tables rule replayed on the kernel: the destination sees the node's address
    const replay = await replayMasqueradePlan(snap, p);
    assert.ok(replay.length > 0);
    for (const r of replay) assert.equal(r.agree, true, JSON.stringify(r));
    assert.ok(
      replay.some((r) => r.kernelSource === "fd00:172:16:1::10"),
      JSON.stringify(replay),
    );
    const fixed = await runLab({ ipv6: true, fixed: true });
    assert.match(fixed.summary, /IPv6: .*pod ping answers, pod tcp\/5432 answers/);
    const v = await verifyChange(snap, loadSnapshot(openSnapshot(fixed.dir)), dest);
    assert.equal(v.verdict, "fixed", v.verdictText);
  });

  it("a kubelet restart with the pod range keeps kubenet's previous rule; on-prem answers the node address", async () => {
    const { dir, summary } = await runLab({
      "non-masquerade-cidr": CLUSTER_CIDR,
      previous: "10.0.0.0/8",
    });
    assert.match(summary, /pod ping answers, pod tcp\/5432 answers/);
    const kubenetLines = readFileSync(join(dir, DUMP), "utf8")
      .split("\n")
      .filter((l) => l.includes("kubenet:"));
    assert.equal(kubenetLines.length, 2);
    assert.match(kubenetLines[0] ?? "", /! -d 10\.0\.0\.0\/8 /);
    const a = await diagnose(loadSnapshot(openSnapshot(dir)), {});
    assert.ok(!a.findings.some((x) => x.id === "masq/exempt-destination"));
    const p = a.paths.find((x) => x.from.startsWith("pod/") && x.to.startsWith("10.20.30.40"));
    assert.equal(p?.sourceOnWire, "172.16.1.10");
  });
});
