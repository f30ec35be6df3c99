/**
 * The cilium replica (iptables masquerade): its options and objects (pure), and on the real kernel
 * that the node's CILIUM_POST_nat is the chain the agent writes (iptables-save of the namespace, in
 * the agent's order, with its comments and the native-routing CIDR in `! -d`), the pod's packets
 * reach on-prem with the pod address and get no reply, and `diagnose` names Cilium's rule and
 * cilium-config's key; `--phase after` answers. `--ipv6`: the same rules in ip6tables, the pod's
 * IPv6 packets keep its address, diagnose cites the ip6tables rule and ipv6-native-routing-cidr,
 * the plan narrows that key, and verify says FIXED on the `--phase after` run.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { readCiliumConfig } from "../../agents/cilium/config.ts";
import { planMasquerade } from "../../cases/masquerade/plan.ts";
import { verifyChange } from "../../cases/masquerade/proof.ts";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { formatCidr, parseIp } from "../../net/cidr.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { kernelSkip } from "../kernel-guard.ts";
import { createLab } from "../netns.ts";
import {
  CILIUM_NODE_NAME,
  CiliumOptions,
  ciliumClusterObjects,
  planCiliumReplica,
  scenario,
} from "./cilium.ts";

describe("cilium replica plan", () => {
  it("defaults: native-routing CIDR 10.0.0.0/8 in the rule and in cilium-config; after: 10.0.0.0/16", () => {
    const plan = planCiliumReplica(CiliumOptions.parse({}));
    const masq = plan.rules.find((r) => r.comment === "cilium masquerade non-cluster");
    assert.deepEqual(masq?.spec.slice(0, 3), ["!", "-d", "10.0.0.0/8"]);
    const cfg = readCiliumConfig(
      readKubeObjects(ciliumClusterObjects(plan).cilium, "cluster/cilium.yaml").value,
    ).value;
    assert.equal(formatCidr(cfg!.settings.ipv4NativeRoutingCidr!), "10.0.0.0/8");
    assert.equal(cfg!.settings.bpfMasquerade, false);
    const fixed = planCiliumReplica(CiliumOptions.parse({ phase: "after" }));
    assert.equal(fixed.nativeRoutingCidr, "10.0.0.0/16");
    assert.equal(CiliumOptions.safeParse({ bogus: "1" }).success, false);
  });
  it("--ipv6: the same rules for ip6tables (cilium_node_set_v6, ! -d fd00::/8, -s ::1) and the v6 keys", () => {
    const plan = planCiliumReplica(CiliumOptions.parse({ ipv6: true }));
    assert.ok(plan.ipv6);
    assert.deepEqual(
      plan.ipv6.rules.map((r) => r.comment),
      plan.rules.map((r) => r.comment.replace("127.0.0.1", "::1")),
    );
    assert.deepEqual(plan.ipv6.rules[0]?.spec.slice(0, 6), [
      "-s",
      "fd00:10:0:1::/64",
      "-m",
      "set",
      "--match-set",
      "cilium_node_set_v6",
    ]);
    assert.deepEqual(plan.ipv6.rules[1]?.spec.slice(0, 3), ["!", "-d", "fd00::/8"]);
    const cfg = readCiliumConfig(
      readKubeObjects(ciliumClusterObjects(plan).cilium, "cluster/cilium.yaml").value,
    ).value;
    assert.equal(cfg?.settings.ipv6Masquerade, true);
    assert.equal(formatCidr(cfg!.settings.ipv6NativeRoutingCidr!), "fd00::/8");
    const fixed = planCiliumReplica(CiliumOptions.parse({ ipv6: true, phase: "after" }));
    assert.equal(fixed.ipv6?.nativeRoutingCidr, "fd00:10::/48");
    assert.equal(planCiliumReplica(CiliumOptions.parse({})).ipv6, undefined);
  });
});

const skip = kernelSkip();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function runScenario(opts: CiliumOptions) {
  const lab = await createLab({ prefix: "ppc" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-cilium-test-"));
  dirs.push(dir);
  try {
    const out = await scenario.run({ lab, outDir: dir, log: () => {} }, opts);
    return { dir, summary: out.summary.join("\n") };
  } finally {
    await lab.destroy();
  }
}

describe("lab cilium on the real kernel", { skip, concurrency: false }, () => {
  it("installs Cilium's chain as the agent writes it; diagnose names Cilium's rule and key", async () => {
    const { dir, summary } = await runScenario(CiliumOptions.parse({}));
    assert.match(
      summary,
      /node ping 10\.20\.30\.40 answers, pod ping silent, pod tcp\/5432 silent/,
    );
    const dumpRel = `nodes/${CILIUM_NODE_NAME}/iptables-save.txt`;
    const saved = readFileSync(join(dir, dumpRel), "utf8").split("\n");
    const chain = saved.filter((l) => l.startsWith("-A CILIUM_POST_nat "));
    assert.deepEqual(
      chain.map((l) => /--comment "([^"]+)"/.exec(l)?.[1]),
      planCiliumReplica(CiliumOptions.parse({})).rules.map((r) => r.comment),
      "the agent's rules, in its order",
    );
    assert.ok(
      chain.includes(
        '-A CILIUM_POST_nat -s 10.0.1.0/24 ! -d 10.0.0.0/8 ! -o cilium_+ -m comment --comment "cilium masquerade non-cluster" -j MASQUERADE',
      ),
    );
    assert.ok(
      saved.includes(
        '-A POSTROUTING -m comment --comment "cilium-feeder: CILIUM_POST_nat" -j CILIUM_POST_nat',
      ),
    );
    assert.match(
      readFileSync(join(dir, `nodes/${CILIUM_NODE_NAME}/ipset.txt`), "utf8"),
      /^add cilium_node_set_v4 192\.168\.1\.10$/m,
    );
    const a = await diagnose(loadSnapshot(openSnapshot(dir)), {});
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.match(f.title, /Cilium: native-routing CIDR 10\.0\.0\.0\/8/);
    assert.equal(f.evidence[0]?.file, dumpRel);
    assert.match(f.evidence[0]?.text ?? "", /"cilium masquerade non-cluster" -j MASQUERADE$/);
    assert.ok(
      f.evidence.some(
        (e) => e.file === "cluster/cilium.yaml" && /ipv4-native-routing-cidr/.test(e.text ?? ""),
      ),
    );
    assert.doesNotMatch(JSON.stringify(a.findings), /ip-masq-agent ConfigMap|GKE's node startup/);
    assert.ok(a.findings.some((x) => x.id === "masq/wire-pod-source" && x.severity === "error"));
  });

  it("IPv6: Cilium's rules in ip6tables keep the pod's IPv6 address; plan in cilium-config; verify FIXED", async (t) => {
    const before = await runScenario(CiliumOptions.parse({ ipv6: true }));
    if (!before.summary.includes("IPv6:")) return t.skip("IPv6 is disabled in this kernel");
    assert.match(before.summary, /IPv6: node ping fd00:20::30:40 answers, pod ping silent/);
    const dumpRel = `nodes/${CILIUM_NODE_NAME}/ip6tables-save.txt`;
    const saved = readFileSync(join(before.dir, dumpRel), "utf8").split("\n");
    const plan = planCiliumReplica(CiliumOptions.parse({ ipv6: true }));
    assert.deepEqual(
      saved
        .filter((l) => l.startsWith("-A CILIUM_POST_nat "))
        .map((l) => /--comment "([^"]+)"/.exec(l)?.[1]),
      plan.ipv6?.rules.map((r) => r.comment),
      "the agent's ip6tables rules, in its order",
    );
    const masq =
      '-A CILIUM_POST_nat -s fd00:10:0:1::/64 ! -d fd00::/8 ! -o cilium_+ -m comment --comment "cilium masquerade non-cluster" -j MASQUERADE';
    assert.ok(saved.includes(masq), saved.join("\n"));
    assert.ok(
      saved.includes(
        '-A POSTROUTING -m comment --comment "cilium-feeder: CILIUM_POST_nat" -j CILIUM_POST_nat',
      ),
    );
    assert.match(
      readFileSync(join(before.dir, `nodes/${CILIUM_NODE_NAME}/ipset.txt`), "utf8"),
      /^add cilium_node_set_v6 fd00:192:168:1::10$/m,
    );
    const dest = { dest: { ip: parseIp("fd00:20::30:40"), text: "fd00:20::30:40" } };
    const snap = loadSnapshot(openSnapshot(before.dir));
    const a = await diagnose(snap, dest);
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, JSON.stringify(a.findings.map((x) => x.id)));
    assert.match(f.title, /fd00:10:0:1::23 \(Cilium: native-routing CIDR fd00::\/8\)/);
    assert.deepEqual([f.evidence[0]?.file, f.evidence[0]?.text], [dumpRel, masq]);
    assert.ok(
      f.evidence.some(
        (e) => e.file === "cluster/cilium.yaml" && /ipv6-native-routing-cidr/.test(e.text ?? ""),
      ),
    );
    assert.match(f.explanation, /ip6tables/);
    assert.doesNotMatch(JSON.stringify(a.findings), /ip-masq-agent ConfigMap|GKE's node startup/);
    assert.doesNotMatch(JSON.stringify(f), /ipv4-native-routing-cidr/);
    const wire = a.findings.find((x) => x.id === "masq/wire-pod-source");
    assert.match(wire?.explanation ?? "", /\(IPv6: ipv6-native-routing-cidr\) in cilium-config/);
    const p = planMasquerade(snap, { strategy: "narrow", ...dest });
    assert.equal(p.owner?.owner, "cilium");
    assert.equal(p.owner?.knob, "cilium-config ipv6-native-routing-cidr");
    assert.ok(
      p.owner?.change.after.some(
        (s) => s.key === "cilium-config ipv6-native-routing-cidr" && s.value === "fd00:10:0:1::/64",
      ),
      JSON.stringify(p.owner?.change.after),
    );
    assert.ok(p.owner?.apply.some((c) => /"ipv6-native-routing-cidr":"fd00:10:0:1::\/64"/.test(c)));
    assert.ok(p.owner?.checks.some((c) => /^ip6tables-save -t nat/.test(c)));
    const fixed = await runScenario(CiliumOptions.parse({ ipv6: true, phase: "after" }));
    assert.match(fixed.summary, /IPv6: .*pod ping answers, pod tcp\/5432 answers/);
    assert.ok(
      readFileSync(join(fixed.dir, dumpRel), "utf8").includes(
        masq.replace("fd00::/8", "fd00:10::/48"),
      ),
    );
    const v = await verifyChange(snap, loadSnapshot(openSnapshot(fixed.dir)), dest);
    assert.equal(v.verdict, "fixed", v.verdictText);
  });

  it("--phase after: the pod leaves as the node and is answered", async () => {
    const { dir, summary } = await runScenario(CiliumOptions.parse({ phase: "after" }));
    assert.match(summary, /pod ping answers, pod tcp\/5432 answers/);
    const a = await diagnose(loadSnapshot(openSnapshot(dir)), {});
    assert.ok(!a.findings.some((x) => x.id === "masq/exempt-destination"));
  });
});
