/**
 * The bridge-cni replica: its options and conflist (pure), and on the real kernel that the pod's
 * chain is what iptables-save prints for the rules the plugin adds (name hashed as the plugin
 * does), the pod without it keeps its address and gets no reply, `diagnose` cites the conflist's
 * ipMasq line, and the plan's rules replayed on the kernel agree.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { readCniConfig } from "../../agents/bridge-cni/conflist.ts";
import { formatChainName } from "../../agents/bridge-cni/rules.ts";
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
  BRIDGE_NODE_NAME,
  BridgeCniOptions,
  CONF_FILE,
  conflist,
  NETWORK,
  planBridgeReplica,
  SANDBOX_AFTER,
  scenario,
} from "./bridge-cni.ts";

describe("bridge-cni replica plan", () => {
  it("ipMasq false by default: no rules; --fixed: the pod's chain for its new sandbox", () => {
    const p = planBridgeReplica(BridgeCniOptions.parse({}));
    assert.equal(p.rules.length, 0);
    const f = planBridgeReplica(BridgeCniOptions.parse({ fixed: true }));
    assert.equal(f.chain, formatChainName(NETWORK, SANDBOX_AFTER));
    assert.deepEqual(
      f.rules.map((r) => r.kind),
      ["subnet-accept", "masquerade", "postrouting-jump"],
    );
    assert.equal(BridgeCniOptions.safeParse({ "ip-masq": "maybe" }).success, false);
  });
  it("--ipv6 --fixed: the same chain for both of the pod's addresses, ip6tables' with ff00::/8", () => {
    const p = planBridgeReplica(BridgeCniOptions.parse({ ipv6: true, fixed: true }));
    assert.deepEqual(
      p.rules.map((r) => r.family),
      [4, 4, 4, 6, 6, 6],
    );
    assert.ok(p.rules.every((r) => r.chain === p.chain || r.chain === "POSTROUTING"));
    assert.match(p.rules[4]?.saved ?? "", /! -d ff00::\/8 .* -j MASQUERADE$/);
    assert.match(conflist(p), /"subnet": "fd00:88::\/64"/);
  });
  it("the conflist it writes reads back as the setting", () => {
    for (const v of ["true", "false", "omit"] as const) {
      const c = readCniConfig(
        conflist(planBridgeReplica(BridgeCniOptions.parse({ "ip-masq": v }))),
        "f",
      );
      assert.equal(c.value.bridges[0]?.ipMasq, v === "true");
      assert.equal(c.value.bridges[0]?.ipMasqSource === undefined, v === "omit");
    }
  });
});

const skip = kernelSkip();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function runLab(opts: Record<string, string | true>) {
  const lab = await createLab({ prefix: "ppb" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-bridge-test-"));
  dirs.push(dir);
  try {
    const out = await scenario.run(
      { lab, outDir: dir, log: () => {} },
      BridgeCniOptions.parse(opts),
    );
    return { dir, summary: out.summary.join("\n") };
  } finally {
    await lab.destroy();
  }
}

const DUMP = `nodes/${BRIDGE_NODE_NAME}/iptables-save.txt`;

describe("lab bridge-cni on the real kernel", { skip, concurrency: false }, () => {
  it("ipMasq false: the pod keeps its address; diagnose cites the conflist; the plan replays", async () => {
    const { dir, summary } = await runLab({});
    assert.match(
      summary,
      /node ping 10\.20\.30\.40 answers, pod ping silent, pod tcp\/5432 silent/,
    );
    assert.doesNotMatch(readFileSync(join(dir, DUMP), "utf8"), /CNI-/);
    const snap = loadSnapshot(openSnapshot(dir));
    const a = await diagnose(snap, {});
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.equal(f.evidence[0]?.file, `nodes/${BRIDGE_NODE_NAME}/cni/${CONF_FILE}`);
    const p = planMasquerade(snap, { strategy: "narrow" });
    assert.equal(p.owner?.owner, "bridge-cni");
    const replay = await replayMasqueradePlan(snap, p);
    assert.ok(replay.length > 0);
    for (const r of replay) assert.equal(r.agree, true, JSON.stringify(r));
    assert.ok(replay.some((r) => r.kernelSource === "192.168.50.10"));
  });

  it("fixed: the pod's chain as the plugin writes it, in the kernel's own words; on-prem answers", async () => {
    const { dir, summary } = await runLab({ fixed: true });
    assert.match(summary, /pod ping answers, pod tcp\/5432 answers/);
    const plan = planBridgeReplica(BridgeCniOptions.parse({ fixed: true }));
    const saved = readFileSync(join(dir, DUMP), "utf8").split("\n");
    assert.deepEqual(
      saved.filter((l) => l.includes('id: \\"')),
      [plan.rules[2]?.saved, plan.rules[0]?.saved, plan.rules[1]?.saved],
    );
    const a = await diagnose(loadSnapshot(openSnapshot(dir)), {});
    assert.ok(!a.findings.some((x) => x.id === "masq/exempt-destination"));
  });

  it("IPv6: ipMasq false keeps the pod's IPv6 address; fixed, the chain in ip6tables; verify FIXED", async (t) => {
    const before = await runLab({ ipv6: true });
    if (!before.summary.includes("IPv6:")) return t.skip("IPv6 is disabled in this kernel");
    assert.match(before.summary, /IPv6: node ping fd00:20::30:40 answers, pod ping silent/);
    const dest = { dest: { ip: parseIp("fd00:20::30:40"), text: "fd00:20::30:40" } };
    const snap = loadSnapshot(openSnapshot(before.dir));
    const a = await diagnose(snap, dest);
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, JSON.stringify(a.findings.map((x) => x.id)));
    assert.match(f.title, /fd00:88::5 \(bridge CNI: "ipMasq": false/);
    assert.equal(f.evidence[0]?.file, `nodes/${BRIDGE_NODE_NAME}/cni/${CONF_FILE}`);
    const p = planMasquerade(snap, { strategy: "narrow", ...dest });
    assert.equal(p.owner?.owner, "bridge-cni");
    assert.match(p.owner?.why ?? "", /fd00:88::\/64/);
    const replay = await replayMasqueradePlan(snap, p);
    assert.ok(replay.length > 0);
    for (const r of replay) assert.equal(r.agree, true, JSON.stringify(r));
    // the plan's CNI chain names the pod's IPv4 address only: the IPv6 flow meets the node's
    // IPv6 rules as they are (no nat table) and keeps the pod's address, which the replay says
    assert.ok(
      replay.some((r) => r.kernelSource === "fd00:88::5"),
      JSON.stringify(replay),
    );
    for (const r of replay)
      assert.match(r.note ?? "", /IPv4 only: .* IPv6 rules replayed as they are/);
    const fixed = await runLab({ ipv6: true, fixed: true });
    assert.match(fixed.summary, /IPv6: .*pod ping answers, pod tcp\/5432 answers/);
    const plan = planBridgeReplica(BridgeCniOptions.parse({ ipv6: true, fixed: true }));
    const v6 = plan.rules.filter((r) => r.family === 6);
    assert.equal(v6.length, 3);
    const saved6 = readFileSync(
      join(fixed.dir, `nodes/${BRIDGE_NODE_NAME}/ip6tables-save.txt`),
      "utf8",
    )
      .split("\n")
      .filter((l) => l.includes('id: \\"'));
    assert.deepEqual(saved6, [v6[2]?.saved, v6[0]?.saved, v6[1]?.saved]);
    const v = await verifyChange(snap, loadSnapshot(openSnapshot(fixed.dir)), dest);
    assert.equal(v.verdict, "fixed", v.verdictText);
  });
});
