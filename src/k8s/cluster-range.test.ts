/** @module k8s/cluster-range.test — the cluster range a component's configuration states. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readKubeObjects } from "../evidence/kube-objects.ts";
import { formatCidr } from "../net/cidr.ts";
import { statedClusterRange } from "./cluster-range.ts";

const objects = (yaml: string) => {
  const r = readKubeObjects(yaml, "cluster/x.yaml");
  assert.deepEqual(r.diagnostics, []);
  return r.value;
};

describe("statedClusterRange", () => {
  it("reads kube-proxy's clusterCIDR (dual-stack) at its line inside the ConfigMap's text", () => {
    const yaml = `apiVersion: v1
kind: ConfigMap
metadata: {name: kube-proxy, namespace: kube-system}
data:
  config.conf: |-
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    bindAddress: 0.0.0.0
    clusterCIDR: "10.244.0.0/16,fd00:10:244::/56"
    mode: iptables
`;
    const r = statedClusterRange(objects(yaml))!;
    assert.deepEqual(r.cidrs.map(formatCidr), ["10.244.0.0/16", "fd00:10:244::/56"]);
    assert.equal(r.what, "kube-proxy's clusterCIDR");
    assert.match(yaml.split("\n")[r.source.line - 1] ?? "", /clusterCIDR: "10\.244/);
  });

  it("reads Cilium's cluster-pool-ipv4-cidr and the controller manager's --cluster-cidr", () => {
    const cilium = statedClusterRange(
      objects(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cilium-config, namespace: kube-system}\ndata:\n  cluster-pool-ipv4-cidr: 10.0.0.0/8\n",
      ),
    )!;
    assert.deepEqual(cilium.cidrs.map(formatCidr), ["10.0.0.0/8"]);
    assert.equal(cilium.source.line, 5);
    const kcm = statedClusterRange(
      objects(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: kube-controller-manager-cp1, namespace: kube-system}\nspec:\n  containers:\n  - name: kcm\n    command: [kube-controller-manager, --allocate-node-cidrs=true, --cluster-cidr=10.32.0.0/12]\n",
      ),
    )!;
    assert.deepEqual(kcm.cidrs.map(formatCidr), ["10.32.0.0/12"]);
    assert.equal(kcm.what, "kube-controller-manager --cluster-cidr");
  });

  it("is undefined when no component states it (a ConfigMap of that name elsewhere does not)", () => {
    assert.equal(
      statedClusterRange(
        objects(
          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-proxy, namespace: default}\ndata:\n  config.conf: 'clusterCIDR: 10.244.0.0/16'\n",
        ),
      ),
      undefined,
    );
  });
});
