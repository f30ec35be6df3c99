/**
 * The flannel replica: its options and objects (pure), and on the real kernel that flanneld's rules
 * are the ones masqRules writes (line for line, after --ip-masq), the pod's packets keep their
 * address and get no reply before and leave as the node after, and `diagnose` gives Flannel's
 * finding with the DaemonSet's args cited.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { readFlannelFlags } from "../../agents/flannel/daemonset.ts";
import { readFlannelNetConf } from "../../agents/flannel/netconf.ts";
import { flannelMasqRules } from "../../agents/flannel/rules.ts";
import { planMasquerade } from "../../cases/masquerade/plan.ts";
import { replayMasqueradePlan } from "../../cases/masquerade/plan-replay.ts";
import { verifyChange } from "../../cases/masquerade/proof.ts";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { parseIp } from "../../net/cidr.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { kernelSkip } from "../kernel-guard.ts";
import { createLab } from "../netns.ts";
import {
  FLANNEL_NETWORK,
  FLANNEL_NETWORK6,
  FLANNEL_NODE,
  FLANNEL_POD_SUBNET,
  FLANNEL_POD_SUBNET6,
  FlannelOptions,
  flannelClusterObjects,
  planFlannelReplica,
  scenario,
} from "./flannel.ts";

describe("flannel replica plan", () => {
  it("the objects it writes read back as flanneld's settings per phase", () => {
    for (const [opts, masq] of [
      [{}, false],
      [{ fixed: true }, true],
    ] as const) {
      const plan = planFlannelReplica(FlannelOptions.parse(opts));
      const objs = readKubeObjects(
        flannelClusterObjects(plan).flannel,
        "cluster/kube-flannel.yaml",
      ).value;
      assert.equal(readFlannelFlags(objs)?.ipMasq, masq);
      assert.equal(readFlannelNetConf(objs).value?.networkText, FLANNEL_NETWORK);
    }
    assert.equal(FlannelOptions.safeParse({ bogus: "1" }).success, false);
  });
});

const skip = kernelSkip();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function runPhase(opts: FlannelOptions): Promise<{ dir: string; summary: string }> {
  const lab = await createLab({ prefix: "ppf" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-flannel-test-"));
  dirs.push(dir);
  try {
    const out = await scenario.run({ lab, outDir: dir, log: () => {} }, opts);
    return { dir, summary: out.summary.join("\n") };
  } finally {
    await lab.destroy();
  }
}

describe("lab flannel on the real kernel", { skip, concurrency: false }, () => {
  it("before: no flanneld rules, the pod is silent, diagnose names Flannel's missing --ip-masq", async () => {
    const { dir, summary } = await runPhase(FlannelOptions.parse({}));
    assert.match(summary, /node ping 10\.20\.30\.40 answers, pod ping silent/);
    const saved = readFileSync(join(dir, `nodes/${FLANNEL_NODE}/iptables-save.txt`), "utf8");
    assert.doesNotMatch(saved, /FLANNEL-POSTRTG/);
    const a = await diagnose(loadSnapshot(openSnapshot(dir)), {});
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.match(f?.title ?? "", /Flannel: no --ip-masq/);
  });

  it("after --ip-masq: flanneld's rules line for line, the pod reaches on-prem as the node", async () => {
    const { dir, summary } = await runPhase(FlannelOptions.parse({ fixed: "true" }));
    assert.match(summary, /pod ping answers, pod tcp\/5432 on-prem answers/);
    const saved = readFileSync(join(dir, `nodes/${FLANNEL_NODE}/iptables-save.txt`), "utf8")
      .split("\n")
      .filter((l) => /flanneld masq/.test(l));
    assert.deepEqual(
      saved,
      flannelMasqRules({ family: 4, network: FLANNEL_NETWORK, podSubnet: FLANNEL_POD_SUBNET }),
    );
    const a = await diagnose(loadSnapshot(openSnapshot(dir)), {});
    assert.ok(!a.findings.some((x) => x.id === "masq/exempt-destination"));
  });

  it("IPv6 (EnableIPv6, IPv6Network): diagnose and plan on the pod's IPv6 packets; --ip-masq's IPv6 rules; verify FIXED", async (t) => {
    const before = await runPhase(FlannelOptions.parse({ ipv6: true }));
    if (!before.summary.includes("IPv6:")) return t.skip("IPv6 is disabled in this kernel");
    assert.match(before.summary, /IPv6: node ping fd00:20::30:40 answers, pod ping silent/);
    const dest = { dest: { ip: parseIp("fd00:20::30:40"), text: "fd00:20::30:40" } };
    const snap = loadSnapshot(openSnapshot(before.dir));
    const a = await diagnose(snap, dest);
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.match(f?.title ?? "", /fd00:10:244:1::7 \(Flannel: no --ip-masq\)/);
    const p = planMasquerade(snap, { strategy: "narrow", ...dest });
    assert.equal(p.owner?.owner, "flannel");
    // replayed on the kernel over IPv6, it agrees with podpath; flanneld's rules depend on the
    // node's lease, so the plan names none and the node's rules replay as they are: pod address
    const replay = await replayMasqueradePlan(snap, p);
    assert.ok(replay.length > 0);
    for (const r of replay) assert.equal(r.agree, true, JSON.stringify(r));
    assert.ok(
      replay.some((r) => r.kernelSource === "fd00:10:244:1::7"),
      JSON.stringify(replay),
    );
    const after = await runPhase(FlannelOptions.parse({ ipv6: true, fixed: true }));
    assert.match(after.summary, /IPv6: .*pod ping answers, pod tcp\/5432 answers/);
    const saved6 = readFileSync(join(after.dir, `nodes/${FLANNEL_NODE}/ip6tables-save.txt`), "utf8")
      .split("\n")
      .filter((l) => /flanneld masq/.test(l));
    assert.deepEqual(
      saved6,
      flannelMasqRules({ family: 6, network: FLANNEL_NETWORK6, podSubnet: FLANNEL_POD_SUBNET6 }),
    );
    const snapAfter = loadSnapshot(openSnapshot(after.dir));
    const v = await verifyChange(snap, snapAfter, dest);
    assert.equal(v.verdict, "fixed", v.verdictText);
  });
});
