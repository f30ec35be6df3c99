/** @module k8s/workloads.test — which workload makes a pod, by its real label selector. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readKubeObjects } from "../evidence/kube-objects.ts";
import { workloadOf, workloadSelects } from "./workloads.ts";

const objects = (yaml: string) => {
  const r = readKubeObjects(yaml, "cluster/workloads.yaml");
  assert.deepEqual(r.diagnostics, []);
  return r.value;
};

const WORKLOADS = objects(`apiVersion: apps/v1
kind: Deployment
metadata: {name: vpn, namespace: net}
spec:
  selector:
    matchExpressions:
    - {key: app, operator: In, values: [openvpn, wireguard]}
    - {key: canary, operator: DoesNotExist}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: vpn-6d9c7b5f4, namespace: net}
spec:
  selector:
    matchLabels: {app: openvpn, pod-template-hash: 6d9c7b5f4}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: canary, namespace: net}
spec:
  selector:
    matchLabels: {app: openvpn}
    matchExpressions:
    - {key: canary, operator: Exists}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {}
`);

describe("workloadOf", () => {
  it("selects by matchExpressions, a Deployment before its ReplicaSet", () => {
    const labels = { app: "openvpn", "pod-template-hash": "6d9c7b5f4" };
    assert.equal(workloadOf(WORKLOADS, "net", "vpn-6d9c7b5f4-x2x7k", labels)?.name, "vpn");
    const rs = WORKLOADS.find((o) => o.kind === "ReplicaSet")!;
    assert.equal(workloadSelects(rs, labels), true);
  });

  it("honours Exists and DoesNotExist: a canary pod is the StatefulSet's, not the Deployment's", () => {
    const labels = { app: "openvpn", canary: "yes" };
    const dep = WORKLOADS.find((o) => o.kind === "Deployment")!;
    assert.equal(workloadSelects(dep, labels), false);
    assert.equal(workloadOf(WORKLOADS, "net", "canary-0", labels)?.name, "canary");
  });

  it("a value outside In selects nothing; then the name prefix decides", () => {
    const labels = { app: "nginx" };
    assert.equal(workloadOf(WORKLOADS, "net", "web-1", labels), undefined);
    assert.equal(workloadOf(WORKLOADS, "net", "canary-1", labels)?.kind, "StatefulSet");
  });

  it("an empty selector selects no pod, and another namespace's workloads are not considered", () => {
    const ds = WORKLOADS.find((o) => o.kind === "DaemonSet")!;
    assert.equal(workloadSelects(ds, { anything: "x" }), false);
    assert.equal(workloadOf(WORKLOADS, "net", "agent-abcde", { app: "openvpn" })?.name, "vpn");
    assert.equal(workloadOf(WORKLOADS, "kube-system", "agent-abcde", {})?.name, "agent");
    assert.equal(workloadOf(WORKLOADS, "default", "vpn-1", { app: "openvpn" }), undefined);
  });
});
