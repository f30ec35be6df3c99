/**
 * The calico replica: its options and objects (pure), and on the real kernel that the node's nat
 * rules are the ones Felix writes (iptables-save of the namespace, line for line, hash comments
 * included), its IP sets hold the pools Felix puts there, the billing pod's packets reach on-prem
 * with the pod address and get no reply (before) or leave as the node and get one (after), and
 * `diagnose` on the snapshot gives Calico's finding with Felix's rule cited.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { natOutgoingRules } from "../../agents/calico/rules.ts";
import { planMasquerade } from "../../cases/masquerade/plan.ts";
import { replayMasqueradePlan } from "../../cases/masquerade/plan-replay.ts";
import { verifyChange } from "../../cases/masquerade/proof.ts";
import { parseIpset } from "../../iptables/ipset-parser.ts";
import { parseIp } from "../../net/cidr.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import { kernelSkip } from "../kernel-guard.ts";
import { createLab } from "../netns.ts";
import { CALICO_NODE, CalicoOptions, planCalicoReplica, scenario } from "./calico.ts";

describe("calico replica plan", () => {
  it("before: the billing pool without natOutgoing, Felix's rule active for the default pool", () => {
    const plan = planCalicoReplica(CalicoOptions.parse({}));
    assert.deepEqual(
      plan.pools.map((p) => [p.name, p.natOutgoing]),
      [
        ["billing-ippool", false],
        ["default-ipv4-ippool", true],
      ],
    );
    assert.match(plan.ipsetRestore, /^add cali40masq-ipam-pools 10\.244\.0\.0\/16$/m);
    assert.doesNotMatch(plan.ipsetRestore, /^add cali40masq-ipam-pools 10\.245\./m);
    assert.match(plan.natRestore, /cali:O3lYWMrLQYEMJtB5/);
    assert.equal(CalicoOptions.safeParse({ bogus: "1" }).success, false);
  });
  it("--fixed gives the billing pool natOutgoing: true, and the older set name on request", () => {
    const plan = planCalicoReplica(
      CalicoOptions.parse({ fixed: true, "all-pools-set": "all-ipam-pools" }),
    );
    assert.equal(plan.phase, "after");
    assert.match(plan.ipsetRestore, /^add cali40masq-ipam-pools 10\.245\.0\.0\/16$/m);
    assert.match(plan.natRestore, /cali:flqWnvo8yq4ULQLa/);
  });
});

const skip = kernelSkip();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function runPhase(opts: CalicoOptions): Promise<{ dir: string; summary: string }> {
  const lab = await createLab({ prefix: "ppk" });
  const dir = mkdtempSync(join(tmpdir(), "podpath-calico-test-"));
  dirs.push(dir);
  try {
    const out = await scenario.run({ lab, outDir: dir, log: () => {} }, opts);
    return { dir, summary: out.summary.join("\n") };
  } finally {
    await lab.destroy();
  }
}

describe("lab calico on the real kernel", { skip, concurrency: false }, () => {
  it("installs Felix's rules and sets as Felix writes them; diagnose names Calico and its rule", async () => {
    const opts = CalicoOptions.parse({ "ipset-form": "list" });
    const { dir, summary } = await runPhase(opts);
    assert.match(
      summary,
      /node ping 10\.20\.30\.40 answers, pod ping silent, pod tcp\/5432 on-prem silent/,
    );
    const dumpRel = `nodes/${CALICO_NODE}/iptables-save.txt`;
    const saved = readFileSync(join(dir, dumpRel), "utf8").split("\n");
    const inKernel = saved.filter((l) => l.startsWith("-A cali-nat-outgoing "));
    const felix = natOutgoingRules({ family: 4 }, true).map((r) =>
      r.replaceAll(" --jump ", " -j "),
    );
    assert.deepEqual(inKernel, felix);
    const sets = parseIpset(readFileSync(join(dir, `nodes/${CALICO_NODE}/ipset.txt`), "utf8"), "x");
    assert.equal(sets.value.form, "list");
    assert.deepEqual(
      sets.value.sets.get("cali40masq-ipam-pools")?.members?.map((m) => m.element),
      ["10.244.0.0/16"],
    );
    const a = await diagnose(loadSnapshot(openSnapshot(dir)), {});
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.match(f.title, /Calico: IPPool billing-ippool natOutgoing false/);
    assert.equal(f.evidence[0]?.file, dumpRel);
    assert.match(f.evidence[0]?.text ?? "", /^-A cali-nat-outgoing .*cali40masq-ipam-pools src/);
    assert.doesNotMatch(JSON.stringify(a.findings), /ip-masq-agent|GKE/);
  });

  it("after natOutgoing: true the pod reaches on-prem as the node", async () => {
    const { dir, summary } = await runPhase(CalicoOptions.parse({ fixed: "true" }));
    assert.match(summary, /pod ping answers, pod tcp\/5432 on-prem answers/);
    const a = await diagnose(loadSnapshot(openSnapshot(dir)), {});
    assert.ok(!a.findings.some((x) => x.id === "masq/exempt-destination"));
  });

  it("IPv6: Felix's cali60 sets (family inet6) and rules in ip6tables; diagnose, plan and verify", async (t) => {
    const before = await runPhase(CalicoOptions.parse({ ipv6: true }));
    if (!before.summary.includes("IPv6:")) return t.skip("IPv6 is disabled in this kernel");
    assert.match(before.summary, /IPv6: node ping fd00:20::30:40 answers, pod ping silent/);
    const dump6 = `nodes/${CALICO_NODE}/ip6tables-save.txt`;
    const inKernel = readFileSync(join(before.dir, dump6), "utf8")
      .split("\n")
      .filter((l) => l.startsWith("-A cali-nat-outgoing "));
    const felix = natOutgoingRules({ family: 6 }, true).map((r) =>
      r.replaceAll(" --jump ", " -j "),
    );
    assert.deepEqual(inKernel, felix);
    const sets = parseIpset(
      readFileSync(join(before.dir, `nodes/${CALICO_NODE}/ipset.txt`), "utf8"),
      "x",
    ).value.sets;
    assert.equal(sets.get("cali60masq-ipam-pools")?.family, 6);
    assert.deepEqual(
      sets.get("cali60masq-ipam-pools")?.members?.map((m) => m.element),
      ["fd00:10:244::/48"],
    );
    const dest = { dest: { ip: parseIp("fd00:20::30:40"), text: "fd00:20::30:40" } };
    const snap = loadSnapshot(openSnapshot(before.dir));
    const a = await diagnose(snap, dest);
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, JSON.stringify(a.findings.map((x) => x.id)));
    assert.match(f.title, /Calico: IPPool billing-ipv6-ippool natOutgoing false/);
    assert.equal(f.evidence[0]?.file, dump6);
    assert.match(f.evidence[0]?.text ?? "", /cali60masq-ipam-pools src/);
    assert.doesNotMatch(f.explanation, /cali40/);
    const p = planMasquerade(snap, { strategy: "narrow", ...dest });
    assert.equal(p.owner?.owner, "calico");
    assert.ok(
      p.owner?.expected.includes(
        "add cali60masq-ipam-pools fd00:10:245::/48   # ipset save on each node",
      ),
    );
    // the plan (the pool in cali60masq-ipam-pools) replayed on the kernel over IPv6 agrees with
    // podpath: the node's IPv6 address on the wire
    const replay = await replayMasqueradePlan(snap, p);
    assert.ok(replay.length > 0);
    for (const r of replay) assert.equal(r.agree, true, JSON.stringify(r));
    assert.ok(
      replay.some((r) => r.kernelSource === "fd00:192:168:1::10"),
      JSON.stringify(replay),
    );
    const after = await runPhase(CalicoOptions.parse({ ipv6: true, fixed: true }));
    assert.match(after.summary, /IPv6: .*pod ping answers, pod tcp\/5432 answers/);
    const v = await verifyChange(snap, loadSnapshot(openSnapshot(after.dir)), dest);
    assert.equal(v.verdict, "fixed", v.verdictText);
  });
});
