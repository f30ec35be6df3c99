/**
 * The masquerade case on the Flannel lab replica (fixtures/flannel, made by `podpath lab run
 * flannel` on a real kernel, see its README): without --ip-masq the finding names the DaemonSet's
 * args line; without the Flannel owner the answer differs; a destination inside the Network is
 * kept by flanneld's RETURN; the plan adds --ip-masq with rollback; verify on the before/after
 * pair; dumps of other owners never get Flannel's finding.
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
import { flannelOwner } from "./flannel.ts";
import { SOURCE_OWNERS } from "./index.ts";

const FIX = join(import.meta.dirname, "../fixtures/flannel");
const BEFORE = join(FIX, "before");
const AFTER = join(FIX, "after");
const NODE = "flannel-worker-1";
const DUMP = `nodes/${NODE}/iptables-save.txt`;
const CFG = "cluster/kube-flannel.yaml";
const EKS = join(import.meta.dirname, "../../../../examples/eks-exclude-snat-cidrs");
const GKE = join(import.meta.dirname, "../../../../examples/snat-exception-list");
const CALICO = join(import.meta.dirname, "../fixtures/calico/before");
const tmp = mkdtempSync(join(tmpdir(), "pp-flannel-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

const load = (root: string) => loadSnapshot(openSnapshot(root));
const dest = (ip: string) => ({ dest: { ip: parseIp(ip), text: ip } });
const lineOf = (root: string, rel: string, pattern: RegExp) =>
  readFileSync(join(root, rel), "utf8")
    .split("\n")
    .findIndex((l) => pattern.test(l)) + 1;

describe("masquerade case on the Flannel replica", () => {
  it("without --ip-masq: names the DaemonSet's args line and fixes it with the flag", async () => {
    const r = await explainMasquerade(load(BEFORE), {});
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.equal(f.severity, "error");
    assert.match(f.title, /\(Flannel: no --ip-masq\)$/);
    const argsLine = lineOf(BEFORE, CFG, /^\s+- args:$/);
    assert.deepEqual([f.evidence[0]?.file, f.evidence[0]?.line], [CFG, argsLine]);
    assert.ok(
      f.next.some((n) =>
        /patch daemonset kube-flannel-ds --type json .*"value":"--ip-masq"/.test(n),
      ),
    );
    assert.ok(f.next.some((n) => /rollout undo daemonset kube-flannel-ds {3}# rollback$/.test(n)));
    assert.doesNotMatch(JSON.stringify(r.findings), /ip-masq-agent|GKE|plan masquerade/);
  });

  it("without the Flannel owner the answer differs (attribution is what decides)", async () => {
    const others = SOURCE_OWNERS.filter((o) => o !== flannelOwner);
    const r = await explainMasquerade(load(BEFORE), {}, others);
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, "the source is still kept: the rules decide that");
    assert.doesNotMatch(f.title, /Flannel/);
    assert.doesNotMatch(f.explanation, /--ip-masq to flanneld/);
  });

  it("with --ip-masq, a destination inside the Network is kept by flanneld's RETURN, cited", async () => {
    const root = mkdtempSync(join(tmp, "wide-"));
    cpSync(AFTER, root, { recursive: true });
    // the site's prefix inside the Flannel Network: flanneld's RETURN for the Network decides
    for (const rel of [DUMP, CFG]) {
      const p = join(root, rel);
      writeFileSync(p, readFileSync(p, "utf8").replaceAll("10.244.0.0/16", "10.0.0.0/8"));
    }
    const r = await explainMasquerade(load(root), {});
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.match(f.title, /Flannel: 10\.20\.30\.40 is inside Network 10\.0\.0\.0\/8/);
    assert.match(
      f.evidence[0]?.text ?? "",
      /^-A FLANNEL-POSTRTG -s 10\.244\.1\.0\/24 -d 10\.0\.0\.0\/8 .*"flanneld masq" -j RETURN$/,
    );
    assert.ok(f.evidence.some((e) => e.file === CFG && /"Network"/.test(e.text ?? "")));
  });

  it("pod-to-pod traffic inside the Network keeps its address by design", async () => {
    const r = await explainMasquerade(load(AFTER), dest("10.244.2.9"));
    assert.ok(!r.findings.some((f) => f.id === "masq/exempt-destination"));
  });

  it("plans in Flannel's terms: --ip-masq on the DaemonSet, with rollback", () => {
    const p = planMasquerade(load(BEFORE), { strategy: "narrow" });
    assert.equal(p.owner?.owner, "flannel");
    assert.equal(p.owner?.title, "Add --ip-masq to flanneld on the kube-flannel-ds DaemonSet");
    assert.deepEqual(
      p.owner?.change.after.find((s) => s.key === "flanneld --ip-masq")?.value,
      "true",
    );
    assert.ok(p.owner?.rollback[0]?.startsWith("kubectl -n kube-flannel rollout undo daemonset"));
    const without = planMasquerade(
      load(BEFORE),
      { strategy: "narrow" },
      SOURCE_OWNERS.filter((o) => o !== flannelOwner),
    );
    assert.notEqual(without.owner?.owner, "flannel");
  });

  it("verify on the before/after pair: FIXED, the flag and flanneld's rules changed", async () => {
    const r = await verifyChange(load(BEFORE), load(AFTER));
    assert.equal(r.owner?.id, "flannel");
    assert.deepEqual(r.owner?.changed, ["flanneld --ip-masq"]);
    assert.equal(r.verdict, "fixed", r.verdictText);
    const back = await verifyChange(load(AFTER), load(BEFORE));
    assert.equal(back.verdict, "rolled-back", back.verdictText);
  });

  it("never claims another owner's dump", async () => {
    for (const root of [EKS, GKE, CALICO]) {
      const snap = load(root);
      assert.equal(flannelOwner.present(snap), false, root);
      const r = await explainMasquerade(snap, {});
      assert.doesNotMatch(JSON.stringify(r.findings), /Flannel|flanneld/, root);
    }
  });
});
