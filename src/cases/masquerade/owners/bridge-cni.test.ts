/**
 * The masquerade case on the bridge-cni lab replica (fixtures/bridge-cni, made by `podpath lab run
 * bridge-cni` on a real kernel, see its README): the finding cites the conflist's `"ipMasq": false`
 * line; without the bridge owner the answer differs; a pod without its chain while the config says
 * ipMasq is named as such; the plan is ipMasq true with the pod set up again; verify on the pair
 * compares the setting and the plugin's chain; other owners' dumps are never claimed.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import { explainMasquerade } from "../explain.ts";
import { planMasquerade } from "../plan.ts";
import { verifyChange } from "../proof.ts";
import { bridgeCniOwner } from "./bridge-cni.ts";
import { SOURCE_OWNERS } from "./index.ts";

const FIX = join(import.meta.dirname, "../fixtures/bridge-cni");
const BEFORE = join(FIX, "before");
const AFTER = join(FIX, "after");
const NODE = "bridge-node-0";
const CONF = `nodes/${NODE}/cni/10-containerd-net.conflist`;
const DUMP = `nodes/${NODE}/iptables-save.txt`;
const EXAMPLES = join(import.meta.dirname, "../../../../examples");
const KUBENET = join(import.meta.dirname, "../fixtures/kubenet/before");
const tmp = mkdtempSync(join(tmpdir(), "pp-bridge-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

const load = (root: string) => loadSnapshot(openSnapshot(root));
const exempt = async (root: string, owners = SOURCE_OWNERS) =>
  (await explainMasquerade(load(root), {}, owners)).findings.find(
    (x) => x.id === "masq/exempt-destination",
  );

describe("masquerade case on the bridge-cni replica", () => {
  it("cites the conflist's \"ipMasq\": false and fixes it in the plugin's terms", async () => {
    const f = await exempt(BEFORE);
    assert.ok(f);
    assert.equal(f.severity, "error");
    assert.match(f.title, /\(bridge CNI: "ipMasq": false in 10-containerd-net\.conflist\)$/);
    const line =
      readFileSync(join(BEFORE, CONF), "utf8")
        .split("\n")
        .findIndex((l) => /"ipMasq": false/.test(l)) + 1;
    assert.deepEqual([f.evidence[0]?.file, f.evidence[0]?.line], [CONF, line]);
    assert.match(f.explanation, /network "containerd-net"/);
    assert.ok(f.next.some((n) => /^jq .*\.ipMasq = true/.test(n)));
    assert.ok(f.next.some((n) => /^kubectl -n default delete pod billing-/.test(n)));
    const all = await explainMasquerade(load(BEFORE), {});
    assert.doesNotMatch(JSON.stringify(all.findings), /ip-masq-agent|GKE|kubenet/);
  });

  it("without the bridge owner the answer differs (attribution is what decides)", async () => {
    const f = await exempt(
      BEFORE,
      SOURCE_OWNERS.filter((o) => o !== bridgeCniOwner),
    );
    assert.ok(f, "the source is still kept: the rules decide that");
    assert.doesNotMatch(f.title, /bridge CNI/);
    assert.ok(!f.evidence.some((e) => e.file === CONF));
  });

  it("a pod without its chain while the config says ipMasq: set it up again", async () => {
    const root = mkdtempSync(join(tmp, "nochain-"));
    cpSync(BEFORE, root, { recursive: true });
    writeFileSync(
      join(root, CONF),
      readFileSync(join(root, CONF), "utf8").replace('"ipMasq": false', '"ipMasq": true'),
    );
    const f = await exempt(root);
    assert.ok(f);
    assert.match(f.title, /bridge CNI: the pod has no CNI-… chain/);
    assert.match(f.explanation, /set up before ipMasq was turned on/);
    assert.equal(f.evidence[0]?.file, CONF);
  });

  it("plans the pod set up again when ipMasq is on but its chain is missing; nothing once it is there", () => {
    const root = mkdtempSync(join(tmp, "plan-nochain-"));
    cpSync(BEFORE, root, { recursive: true });
    writeFileSync(
      join(root, CONF),
      readFileSync(join(root, CONF), "utf8").replace('"ipMasq": false', '"ipMasq": true'),
    );
    const p = planMasquerade(load(root), { strategy: "narrow" });
    assert.equal(p.owner?.owner, "bridge-cni");
    assert.match(p.owner?.title ?? "", /^Set up again the pod without a CNI-… chain$/);
    assert.deepEqual(
      p.owner?.apply.map((a) => a.split("   #")[0]),
      ["kubectl -n default delete pod billing-5c8d7f9b4-h7r2t"],
    );
    const done = planMasquerade(load(AFTER), { strategy: "narrow" });
    assert.match(done.owner?.title ?? "", /^Nothing to change/);
    assert.doesNotMatch(JSON.stringify(done), /ip-masq-agent|nonMasqueradeCIDRs/);
  });

  it("after the fix the pod's chain masquerades: no exempt finding, the node address on the wire", async () => {
    const r = await explainMasquerade(load(AFTER), {});
    assert.ok(!r.findings.some((x) => x.id === "masq/exempt-destination"));
    const p = r.paths.find((x) => x.from.startsWith("pod/"));
    assert.equal(p?.sourceOnWire, "192.168.50.10");
    const dump = readFileSync(join(AFTER, DUMP), "utf8");
    assert.match(
      dump,
      /-A POSTROUTING -s 10\.88\.0\.5\/32 -m comment --comment "name: \\"containerd-net\\" id: \\"[0-9a-f]{64}\\"" -j CNI-[0-9a-f]{24}/,
    );
  });

  it("plans ipMasq true and the pod set up again, with its rollback", () => {
    const p = planMasquerade(load(BEFORE), { strategy: "narrow" });
    assert.equal(p.owner?.owner, "bridge-cni");
    assert.deepEqual(
      p.owner?.change.before.map((s) => [s.key, s.value]),
      [[`${NODE}: 10-containerd-net.conflist ipMasq`, "false"]],
    );
    assert.deepEqual(
      p.owner?.change.after.map((s) => [s.key, s.value]),
      [[`${NODE}: 10-containerd-net.conflist ipMasq`, "true"]],
    );
    assert.ok(p.owner?.apply.some((a) => /^jq .*ipMasq = true/.test(a)));
    assert.ok(p.owner?.apply.some((a) => /delete pod billing-/.test(a)));
    assert.ok(
      p.owner?.expected.some((e) => /-j MASQUERADE$/.test(e) && e.includes("! -d 224.0.0.0/4")),
    );
    assert.ok(p.owner?.rollback.some((r) => /ipMasq = false/.test(r)));
    const without = planMasquerade(
      load(BEFORE),
      { strategy: "narrow" },
      SOURCE_OWNERS.filter((o) => o !== bridgeCniOwner),
    );
    assert.notEqual(without.owner?.owner, "bridge-cni");
  });

  it("verify on the pair: FIXED, ipMasq false → true, the plugin's chain added", async () => {
    const r = await verifyChange(load(BEFORE), load(AFTER));
    assert.equal(r.verdict, "fixed", r.verdictText);
    assert.equal(r.owner?.id, "bridge-cni");
    assert.deepEqual(r.owner?.changed, [`${NODE}: 10-containerd-net.conflist ipMasq`]);
    assert.equal(r.intended, "masquerade");
    const back = await verifyChange(load(AFTER), load(BEFORE));
    assert.equal(back.verdict, "rolled-back", back.verdictText);
  });

  it("never claims another owner's dump", async () => {
    for (const root of [
      join(EXAMPLES, "eks-exclude-snat-cidrs"),
      join(EXAMPLES, "snat-exception-list"),
      KUBENET,
    ]) {
      const snap = load(root);
      assert.equal(bridgeCniOwner.present(snap), false, root);
      const r = await explainMasquerade(snap, {});
      assert.doesNotMatch(JSON.stringify(r.findings), /bridge CNI|ipMasq/, root);
    }
  });
});
