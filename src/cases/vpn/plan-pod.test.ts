/** @module cases/vpn/plan-pod.test — `--pod deployment/NAME` (and kin) picks the workload's pods. */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { parseWorkloadRef } from "../../k8s/workload-ref.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";
import type { VpnInput } from "./input.ts";
import { podsOfWorkload } from "./plan-pod.ts";
import { vpnInputFromSnapshot } from "./snapshot-input.ts";

const ROOT = join(import.meta.dirname, "../../..");
const fromSnapshot = (dir: string) =>
  vpnInputFromSnapshot(loadSnapshot(openSnapshot(join(ROOT, dir)))).input;

/** A StatefulSet with two pods and a DaemonSet with one, as `kubectl get -o yaml` prints them. */
const WORKLOADS = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: wg, namespace: edge}
spec:
  serviceName: wg
  selector: {matchLabels: {app: wg}}
  template:
    metadata: {labels: {app: wg}}
    spec: {containers: [{name: wg, image: linuxserver/wireguard:1.0.20210914}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: wg-1
  namespace: edge
  labels: {app: wg, apps.kubernetes.io/pod-index: "1"}
  ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: wg, controller: true}]
spec: {containers: [{name: wg, image: linuxserver/wireguard:1.0.20210914}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: wg-0
  namespace: edge
  labels: {app: wg, apps.kubernetes.io/pod-index: "0"}
  ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: wg, controller: true}]
spec: {containers: [{name: wg, image: linuxserver/wireguard:1.0.20210914}]}
---
apiVersion: v1
kind: Pod
metadata: {name: wg-web-5c9d8-abcde, namespace: edge, labels: {app: wg-web}}
spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ovpn, namespace: edge}
spec:
  selector: {matchLabels: {app: ovpn}}
  template:
    metadata: {labels: {app: ovpn}}
    spec: {containers: [{name: ovpn, image: kylemanna/openvpn:2.4}]}
---
apiVersion: v1
kind: Pod
metadata: {name: ovpn-x7k2p, namespace: edge, labels: {app: ovpn, controller-revision-hash: 7d9f}}
spec: {nodeName: n1, containers: [{name: ovpn, image: kylemanna/openvpn:2.4}]}
`;

function inputOf(yaml: string, evidence: readonly string[] = []): VpnInput {
  const r = readKubeObjects(yaml, "cluster/edge.yaml");
  assert.deepEqual(r.diagnostics, []);
  const pods = evidence.map((p) => {
    const [namespace = "", name = ""] = p.split("/");
    return { namespace, name };
  });
  return { pods, objects: r.value, probes: [] };
}

describe("parseWorkloadRef", () => {
  it("reads kubectl's spellings of the three workload kinds, in any case", () => {
    assert.deepEqual(parseWorkloadRef("deployment/web"), { kind: "Deployment", name: "web" });
    assert.deepEqual(parseWorkloadRef("deploy/web"), { kind: "Deployment", name: "web" });
    assert.deepEqual(parseWorkloadRef("Deployments/web"), { kind: "Deployment", name: "web" });
    assert.deepEqual(parseWorkloadRef("deployment.apps/web"), { kind: "Deployment", name: "web" });
    assert.deepEqual(parseWorkloadRef("statefulset/db"), { kind: "StatefulSet", name: "db" });
    assert.deepEqual(parseWorkloadRef("sts/db"), { kind: "StatefulSet", name: "db" });
    assert.deepEqual(parseWorkloadRef("daemonset/agent"), { kind: "DaemonSet", name: "agent" });
    assert.deepEqual(parseWorkloadRef("ds/agent"), { kind: "DaemonSet", name: "agent" });
  });
  it("leaves a pod's NAMESPACE/NAME and malformed names alone", () => {
    assert.equal(parseWorkloadRef("vpn/vpn-openvpn-6d9c7b5f4-x2x7k"), undefined);
    assert.equal(parseWorkloadRef("pod/web"), undefined);
    assert.equal(parseWorkloadRef("deployment/Web_1"), undefined);
    assert.equal(parseWorkloadRef("deployment/"), undefined);
    assert.equal(parseWorkloadRef("web"), undefined);
  });
});

describe("podsOfWorkload", () => {
  it("the example's Deployment: its ReplicaSet's pod, the one with evidence from inside it", () => {
    const input = fromSnapshot("examples/vpn-forwarding-off");
    const r = podsOfWorkload(input, { kind: "Deployment", name: "vpn-openvpn" });
    assert.deepEqual(r, {
      kind: "found",
      workload: "vpn/vpn-openvpn",
      pods: ["vpn/vpn-openvpn-6d9c7b5f4-x2x7k"],
    });
    // the namespace narrows; a wrong one finds nothing and says what to collect
    assert.equal(
      podsOfWorkload(input, { kind: "Deployment", name: "vpn-openvpn" }, "vpn").kind,
      "found",
    );
    const none = podsOfWorkload(input, { kind: "Deployment", name: "vpn-openvpn" }, "default");
    assert.equal(none.kind, "none");
    assert.match(
      none.kind === "none" ? none.message : "",
      /no Deployment vpn-openvpn in namespace default/,
    );
    // the same name as another kind is not that workload
    assert.equal(podsOfWorkload(input, { kind: "StatefulSet", name: "vpn-openvpn" }).kind, "none");
  });
  it("a rendered chart (manifests only): the workload itself, as plan vpn reads it", () => {
    const input = fromSnapshot("src/cases/vpn/testdata/chart-rendered");
    const r = podsOfWorkload(input, { kind: "Deployment", name: "vpn-openvpn" });
    assert.deepEqual(r, { kind: "found", workload: "vpn/vpn-openvpn", pods: ["vpn/vpn-openvpn"] });
  });
  it("a StatefulSet's pods by its selector, those with evidence first; not a similarly named pod", () => {
    const input = inputOf(WORKLOADS, ["edge/wg-1"]);
    const r = podsOfWorkload(input, { kind: "StatefulSet", name: "wg" });
    assert.deepEqual(r, { kind: "found", workload: "edge/wg", pods: ["edge/wg-1", "edge/wg-0"] });
  });
  it("a DaemonSet's pod; a pod known only by its folder is the workload's by its name", () => {
    const ds = podsOfWorkload(inputOf(WORKLOADS), { kind: "DaemonSet", name: "ovpn" });
    assert.deepEqual(ds, { kind: "found", workload: "edge/ovpn", pods: ["edge/ovpn-x7k2p"] });
    const folderOnly = inputOf(
      WORKLOADS.split("---\n")
        .filter((d) => !d.includes("name: ovpn-x7k2p"))
        .join("---\n"),
      ["edge/ovpn-q9z8w"],
    );
    assert.deepEqual(podsOfWorkload(folderOnly, { kind: "DaemonSet", name: "ovpn" }), {
      kind: "found",
      workload: "edge/ovpn",
      pods: ["edge/ovpn-q9z8w"],
    });
  });
  it("the same workload name in two namespaces asks for -n", () => {
    const twice = `${WORKLOADS}---\n${WORKLOADS.split("---\n")[0]!.replace("namespace: edge", "namespace: lab")}`;
    const r = podsOfWorkload(inputOf(twice), { kind: "StatefulSet", name: "wg" });
    assert.equal(r.kind, "ambiguous");
    assert.match(
      r.kind === "ambiguous" ? r.message : "",
      /several namespaces \(edge, lab\): give -n/,
    );
    assert.equal(
      podsOfWorkload(inputOf(twice), { kind: "StatefulSet", name: "wg" }, "lab").kind,
      "found",
    );
  });
});
