/**
 * Component test: the DaemonSet patch `plan masquerade` proposes for a pool the agent does not
 * reach (fixtures/three-pools: a required node affinity `gke-nodepool NotIn (legacy)`) is sent as
 * written, `--type strategic`, to the real kube-apiserver (built by scripts/build-components.sh):
 * the server accepts it and drops the affinity; the plan's rollback patch restores the DaemonSet's
 * affinity exactly as it was.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { planMasquerade } from "../../src/cases/masquerade/plan.ts";
import { loadSnapshot } from "../../src/snapshot/load.ts";
import { openSnapshot } from "../../src/snapshot/source.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { componentSkip } from "./component-guard.ts";

const skip =
  componentSkip("kube-apiserver", { kernel: false }) || componentSkip("etcd", { kernel: false });
const FIXTURE = join(import.meta.dirname, "../../src/cases/masquerade/fixtures/three-pools");
const DS_PATH = "/apis/apps/v1/namespaces/kube-system/daemonsets/ip-masq-agent";

/** A strategic-merge PATCH, as `kubectl patch --type strategic -p` sends it. */
function strategicPatch(c: Cluster, path: string, patch: string) {
  return new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
    const req = request(
      `${c.url}${path}`,
      {
        method: "PATCH",
        ca: readFileSync(c.caFile),
        headers: {
          authorization: `Bearer ${c.adminToken}`,
          accept: "application/json",
          "content-type": "application/strategic-merge-patch+json",
        },
      },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => {
          text += d.toString();
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(text) as Record<string, unknown>,
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(patch);
  });
}

const patchText = (cmd: string) => {
  const m =
    /^kubectl -n kube-system patch daemonset ip-masq-agent --type strategic -p '(.+)'$/.exec(cmd);
  assert.ok(m, cmd);
  return m[1]!;
};

type DsSpec = { spec: { template: { spec: { affinity?: unknown } } } };

describe("plan masquerade's DaemonSet patch on a real API server", { skip }, () => {
  let cluster: Cluster | undefined;
  before(async () => {
    cluster = await startCluster();
  });
  after(async () => {
    await cluster?.stop();
  });

  it("is accepted as written, reaches pool legacy, and its rollback restores the affinity", async () => {
    const c = cluster!;
    const snap = loadSnapshot(openSnapshot(FIXTURE));
    const dsObject = snap.objects.find((o) => o.kind === "DaemonSet")!;
    const raw = structuredClone(dsObject.raw) as Record<string, unknown> & DsSpec;
    raw["metadata"] = { name: "ip-masq-agent", namespace: "kube-system" };
    delete raw["status"];
    const created = await c.api(
      "POST",
      "/apis/apps/v1/namespaces/kube-system/daemonsets",
      c.adminToken,
      raw,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const original = (created.body as DsSpec).spec.template.spec.affinity;
    assert.ok(original, "the fixture's DaemonSet has an affinity");

    const step = planMasquerade(snap, { strategy: "narrow" }).steps.find(
      (s) => s.cause === "agent-coverage",
    )!;
    const patched = await strategicPatch(c, DS_PATH, patchText(step.apply[0]!));
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    const after1 = (patched.body as DsSpec).spec.template.spec.affinity as
      | { nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: unknown } }
      | undefined;
    assert.equal(after1?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution, undefined);

    const rolled = await strategicPatch(c, DS_PATH, patchText(step.rollback[0]!));
    assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
    assert.deepEqual((rolled.body as DsSpec).spec.template.spec.affinity, original);
  });
});
