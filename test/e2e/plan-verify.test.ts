/**
 * End to end on a real kernel (root): the SNAT case from diagnosis to proof on lab replicas.
 * Broad exemption (lab before) → `plan masquerade` → the planned config applied to the replica's
 * rules (`lab run masquerade --config FILE --phase after`) → `verify` says FIXED with the one-line
 * proof; the rollback pair says ROLLED BACK; with a pool the agent does not reach, `verify` names
 * the node that never changed, and the capture agrees with the after snapshot's pod on that node;
 * `plan --replay` agrees with the kernel. Needs `npm run build` first (npm test does it).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse } from "yaml";
import { kernelSkip } from "../../src/lab/kernel-guard.ts";
import { rootNamespaceHash } from "../../src/lab/root-state.ts";
import { contains, excludeCidrs, mergeCidrs, parseCidr, parseIp } from "../../src/net/cidr.ts";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");

function podpath(...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface PlanJson {
  podRanges: string[];
  destinations: { ip: string; port?: number; exemptToday: boolean }[];
  narrow: { newList: { cidr: string }[]; newConfigMap: string; validationError?: string };
  coverage: { pool: string; nodes: string[]; reached: boolean }[];
  impact: { namesPodAddresses: { what: string; file: string; line: number }[] };
  rollback: { previousConfigMap?: string };
  blockers: { allowlist: string; combined: string[] }[];
  steps: { cause: string }[];
  replay: { node: string; flow: string; kernelSource?: string; agree?: boolean; note?: string }[];
}

interface RecordJson {
  verdict: string;
  verdictText: string;
  proof: string;
  nodeProofs: string[];
  nodes: { node: string; pickedUp: string; rulesChanged?: boolean }[];
}

const PROOF_FIXED =
  /^tcp 10\.4\.0\.5 → 10\.20\.30\.40:5432: before 10\.4\.0\.5 \((SYN only, no reply)\) · after 10\.128\.0\.2 \((handshake and data completed)\)$/;

describe("plan masquerade → lab → verify (real kernel)", { skip: kernelSkip() }, () => {
  let base = "";
  let rootBefore = "";
  before(async () => {
    base = mkdtempSync(join(tmpdir(), "podpath-e2e-plan-verify-"));
    rootBefore = await rootNamespaceHash();
  });
  after(async () => {
    rmSync(base, { recursive: true, force: true });
    assert.equal(await rootNamespaceHash(), rootBefore, "the root namespace is unchanged");
  });

  /**
   * The plan's first step, the far side's allowlist, as `lab run --allow`: today's sources plus the
   * ones its combined change adds (`+ CIDR` lines), so the replica applies the whole plan.
   */
  function allowlistStep(p: PlanJson): string[] {
    assert.equal(p.steps[0]?.cause, "far-side-allowlist", "the plan leads with the allowlist");
    const lines = p.blockers[0]?.combined ?? [];
    const sources = lines.flatMap((l) => {
      const m = /^\+?\s+- (\S+)$/.exec(l);
      return m ? [m[1]!] : [];
    });
    assert.ok(
      lines.some((l) => l.startsWith("+")),
      "the combined change adds a source",
    );
    return ["--allow", sources.join(",")];
  }

  /** lab run masquerade with `args`, into base/name; returns the snapshot folder. */
  function lab(name: string, ...args: string[]): string {
    const out = join(base, name);
    const r = podpath("lab", "run", "masquerade", ...args, "--out", out);
    assert.equal(r.code, 0, `lab run ${args.join(" ")}: exit ${r.code}\n${r.stderr}`);
    return out;
  }

  /** The plan for a snapshot, and the file holding its new ConfigMap's `config`. */
  function plan(snap: string, ...args: string[]): { plan: PlanJson; configFile: string } {
    const r = podpath("plan", "masquerade", snap, "-o", "json", ...args);
    assert.equal(r.code, 0, `plan: exit ${r.code}\n${r.stderr}`);
    const p = JSON.parse(r.stdout) as PlanJson;
    const cm = parse(p.narrow.newConfigMap) as { data: { config: string } };
    const configFile = join(base, `${snap.split("/").at(-1)}.config`);
    writeFileSync(configFile, cm.data.config);
    return { plan: p, configFile };
  }

  function verify(b: string, a: string): { code: number | null; record: RecordJson } {
    const r = podpath("verify", b, a, "-o", "json");
    assert.ok(r.code === 0 || r.code === 1, `verify: exit ${r.code}\n${r.stderr}`);
    return { code: r.code, record: JSON.parse(r.stdout) as RecordJson };
  }

  it("one pool: plan, apply, verify FIXED; the rollback pair ROLLED BACK", () => {
    const b = lab("one-before");
    const { plan: p, configFile } = plan(b);
    // the plan's list contains the pod range and no longer covers the destination
    const list = p.narrow.newList.map((n) => parseCidr(n.cidr));
    for (const r of p.podRanges)
      assert.deepEqual(excludeCidrs([parseCidr(r)], mergeCidrs(list)), [], `covers ${r}`);
    assert.ok(!list.some((c) => contains(c, parseIp("10.20.30.40"))));
    assert.equal(p.destinations[0]?.exemptToday, true);
    assert.equal(p.narrow.validationError, undefined);
    // the impact lists the allowlist entry naming pod addresses
    const allow = p.impact.namesPodAddresses.find((r) =>
      r.what.startsWith("allowlist db-firewall"),
    );
    assert.ok(allow);
    const line = readFileSync(join(b, allow.file), "utf8").split("\n")[allow.line - 1];
    assert.match(line ?? "", /10\.4\.0\.0\/14/);

    const a = lab("one-after", "--config", configFile, ...allowlistStep(p), "--phase", "after");
    const fixed = verify(b, a);
    assert.equal(fixed.code, 0, fixed.record.verdictText);
    assert.equal(fixed.record.verdict, "fixed");
    assert.match(fixed.record.proof, PROOF_FIXED);
    assert.equal(fixed.record.nodes[0]?.pickedUp, "yes");
    assert.equal(fixed.record.nodes[0]?.rulesChanged, true);
    // what the kernel put on the wire, read back by tcpdump itself
    const wire = spawnSync(
      "tcpdump",
      ["-nn", "-r", join(a, "captures/remote-onprem-dc1.pcap"), "tcp port 5432"],
      { encoding: "utf8" },
    ).stdout;
    assert.match(wire, /IP 10\.128\.0\.2\.\d+ > 10\.20\.30\.40\.5432: Flags \[S\]/);
    assert.match(wire, /IP 10\.20\.30\.40\.5432 > 10\.128\.0\.2\.\d+: Flags \[P\.\]/);

    // keep-pod-identity leaves the rules alone: the kernel keeps the pod address on the wire
    const keep = podpath(
      "plan",
      "masquerade",
      b,
      "--strategy",
      "keep-pod-identity",
      "--replay",
      "-o",
      "json",
    );
    assert.equal(keep.code, 0, keep.stderr);
    const kept = (JSON.parse(keep.stdout) as PlanJson).replay;
    assert.equal(kept.length, 1);
    assert.equal(kept[0]?.kernelSource, "10.4.0.5");
    assert.equal(kept[0]?.agree, true);

    // the ConfigMap applied, but the agent has not written the rules yet: the wire says so
    const lagging = lab(
      "one-lagging",
      "--config",
      configFile,
      "--phase",
      "after",
      "--rules",
      "old",
    );
    const stale = verify(b, lagging);
    assert.equal(stale.code, 1);
    assert.equal(stale.record.verdict, "not-applied-on-node", stale.record.verdictText);
    assert.equal(
      stale.record.verdictText,
      "A node-level capture after the change (captures/node-gke-lab-default-0.pcap) still shows the pod address 10.4.0.5: the rules never changed on gke-lab-default-0, whatever the ConfigMap says.",
    );
    assert.equal(stale.record.nodes[0]?.pickedUp, "no");

    // rollback: the previous ConfigMap is the one the before replica ran
    const prev = parse(p.rollback.previousConfigMap!) as { data: { config: string } };
    const beforeCm = readFileSync(join(b, "cluster/ip-masq-agent.yaml"), "utf8");
    assert.ok(beforeCm.includes(prev.data.config.split("\n")[1]!));
    const rolled = verify(a, b);
    assert.equal(rolled.code, 0, rolled.record.verdictText);
    assert.equal(rolled.record.verdict, "rolled-back");
    assert.match(
      rolled.record.proof,
      /^tcp 10\.4\.0\.5 → 10\.20\.30\.40:5432: before 10\.128\.0\.2 \(handshake and data completed\) · after 10\.4\.0\.5 \(SYN only, no reply\)$/,
    );
  });

  it("two pools, one without the agent: verify names the node that never changed", () => {
    const pools = ["--pools", "default:agent,legacy:no-agent"];
    const b = lab("two-before", ...pools);
    const { plan: p, configFile } = plan(b, "--replay");
    const legacy = p.coverage.find((c) => c.pool === "legacy");
    assert.equal(legacy?.reached, false);
    assert.deepEqual(legacy?.nodes, ["gke-lab-legacy-1"]);
    // --replay: the kernel and the evaluator agree on every node
    assert.equal(p.replay.length, 2, JSON.stringify(p.replay));
    for (const r of p.replay) assert.equal(r.agree, true, JSON.stringify(r));
    const replayDefault = p.replay.find((r) => r.node === "gke-lab-default-0");
    assert.equal(replayDefault?.kernelSource, "10.128.0.2");
    assert.match(p.replay.find((r) => r.node === "gke-lab-legacy-1")?.note ?? "", /never reach/);

    const a = lab(
      "two-after",
      ...pools,
      "--config",
      configFile,
      ...allowlistStep(p),
      "--phase",
      "after",
    );
    const { code, record } = verify(b, a);
    assert.equal(code, 1);
    assert.equal(record.verdict, "partly-applied", record.verdictText);
    assert.match(
      record.verdictText,
      /^The change reached gke-lab-default-0 but not gke-lab-legacy-1: a node-level capture after the change \(captures\/node-gke-lab-legacy-1\.pcap\) still shows the pod address 10\.4\.1\.5: the rules never changed on gke-lab-legacy-1, whatever the ConfigMap says\.$/,
    );
    assert.match(record.proof, PROOF_FIXED);
    const byNode = new Map(record.nodes.map((n) => [n.node, n]));
    assert.equal(byNode.get("gke-lab-legacy-1")?.pickedUp, "no");
    assert.equal(byNode.get("gke-lab-default-0")?.pickedUp, "yes");

    // the after snapshot's pod on the legacy node is the address its capture shows leaving
    const pods = parse(readFileSync(join(a, "cluster/pods.yaml"), "utf8")) as {
      items: { spec: { nodeName: string }; status: { podIP: string } }[];
    };
    const podIp = pods.items.find((x) => x.spec.nodeName === "gke-lab-legacy-1")?.status.podIP;
    assert.equal(podIp, "10.4.1.5");
    const out = spawnSync(
      "tcpdump",
      ["-nn", "-r", join(a, "captures/node-gke-lab-legacy-1.pcap"), "tcp port 5432"],
      { encoding: "utf8" },
    ).stdout;
    const leaving = out.split("\n").filter((l) => / Out IP /.test(l));
    assert.ok(leaving.length > 0, out);
    for (const l of leaving) assert.match(l, /Out IP 10\.4\.1\.5\.\d+ > 10\.20\.30\.40\.5432/);
    // the replay's prediction for the agent's node is what that node's capture shows after
    const outDefault = spawnSync(
      "tcpdump",
      ["-nn", "-r", join(a, "captures/node-gke-lab-default-0.pcap"), "tcp port 5432"],
      { encoding: "utf8" },
    ).stdout;
    assert.match(outDefault, /Out IP 10\.128\.0\.2\.\d+ > 10\.20\.30\.40\.5432/);

    const rolled = verify(a, b);
    assert.equal(rolled.record.verdict, "rolled-back", rolled.record.verdictText);
  });
});
