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
