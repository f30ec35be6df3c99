/**
 * @module k8s/address-ranges.test — the Service range and the nodes' addresses from all the
 * evidence, each cited: kube-apiserver's static pod (as kubeadm writes it), ServiceCIDR objects,
 * the cluster IPs as a lower bound; InternalIPs and the subnet a node's real `ip addr` shows;
 * CiliumNode pod ranges.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { readIpAddr } from "../evidence/ip-addr.ts";
import { type KubeObject, readKubeObjects } from "../evidence/kube-objects.ts";
import { formatCidr, parseIp } from "../net/cidr.ts";
import { clusterFacts, isPodAddress, podRangesOf } from "./cluster-facts.ts";
import { statedClusterRange } from "./cluster-range.ts";

const ROOT = join(import.meta.dirname, "../..");

const read = (
  yaml: string,
  file = "cluster/x.yaml",
): { objects: KubeObject[]; lines: string[] } => {
  const r = readKubeObjects(yaml, file);
  assert.deepEqual(r.diagnostics, []);
  return { objects: r.value, lines: yaml.split("\n") };
};
const lineAt = (lines: string[], n: number) => lines[n - 1]?.trim() ?? "";

/** kube-apiserver's static pod as kubeadm writes it (etc/kubernetes/manifests/kube-apiserver.yaml). */
const API_SERVER = `apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver-cp-1
  namespace: kube-system
  labels:
    component: kube-apiserver
    tier: control-plane
spec:
  hostNetwork: true
  nodeName: cp-1
  containers:
  - name: kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.31.2
    command:
    - kube-apiserver
    - --advertise-address=192.0.2.10
    - --allow-privileged=true
    - --authorization-mode=Node,RBAC
    - --service-account-issuer=https://kubernetes.default.svc.cluster.local
    - --service-cluster-ip-range=10.96.0.0/12,fd00:10:96::/112
    - --tls-cert-file=/etc/kubernetes/pki/apiserver.crt
status:
  podIP: 192.0.2.10
`;

const SERVICE_CIDR = `apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata:
  name: kubernetes
spec:
  cidrs:
  - 10.96.0.0/16
`;

const SERVICES = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: kubernetes, namespace: default}
  spec:
    clusterIP: 10.96.0.1
    clusterIPs: [10.96.0.1]
    ports: [{name: https, port: 443, protocol: TCP, targetPort: 6443}]
- apiVersion: v1
  kind: Service
  metadata: {name: kube-dns, namespace: kube-system}
  spec:
    clusterIP: 10.96.0.10
    clusterIPs: [10.96.0.10]
    ports: [{name: dns, port: 53, protocol: UDP, targetPort: 53}]
`;

/** A node of the masquerade lab, whose real \`ip addr\` is in the example. */
const NODE = `apiVersion: v1
kind: Node
metadata: {name: gke-lab-default-0}
spec: {podCIDR: 10.4.0.0/24, podCIDRs: [10.4.0.0/24]}
status:
  addresses:
  - {address: 10.128.0.2, type: InternalIP}
  - {address: gke-lab-default-0, type: Hostname}
`;

/** Cilium cluster-pool IPAM: the operator writes each node's ranges into its CiliumNode. */
const CILIUM_NODE = `apiVersion: cilium.io/v2
kind: CiliumNode
metadata:
  name: worker-2
spec:
  addresses:
  - {ip: 172.18.0.3, type: InternalIP}
  ipam:
    podCIDRs:
    - 10.0.2.0/24
`;

/** Cilium multi-pool IPAM: the pods' addresses come from the pools. */
const POOLS = `apiVersion: cilium.io/v2alpha1
kind: CiliumPodIPPool
metadata:
  name: default
spec:
  ipv4:
    cidrs:
    - 10.10.0.0/16
    maskSize: 27
---
apiVersion: cilium.io/v2alpha1
kind: CiliumPodIPPool
metadata:
  name: mars
spec:
  ipv4:
    cidrs:
    - 10.20.0.0/16
    maskSize: 27
`;

describe("the Service range", () => {
  it("kube-apiserver's --service-cluster-ip-range wins, both families, cited at the argument", () => {
    const { objects, lines } = read(`${API_SERVER}---\n${SERVICE_CIDR}---\n${SERVICES}`);
    const r = clusterFacts(objects).serviceRange!;
    assert.equal(r.extent, "stated");
    assert.equal(r.what, "kube-apiserver --service-cluster-ip-range");
    assert.deepEqual(
      r.cidrs.map((c) => formatCidr(c.value)),
      ["10.96.0.0/12", "fd00:10:96::/112"],
    );
    assert.equal(
      lineAt(lines, r.cidrs[0]!.source.line),
      "- --service-cluster-ip-range=10.96.0.0/12,fd00:10:96::/112",
    );
  });
  it("else the ServiceCIDR objects", () => {
    const { objects, lines } = read(`${SERVICE_CIDR}---\n${SERVICES}`);
    const r = clusterFacts(objects).serviceRange!;
    assert.equal(r.extent, "stated");
    assert.deepEqual(
      r.cidrs.map((c) => formatCidr(c.value)),
      ["10.96.0.0/16"],
    );
    assert.equal(lineAt(lines, r.cidrs[0]!.source.line), "- 10.96.0.0/16");
  });
  it("else the Services' cluster IPs, as a lower bound only", () => {
    const { objects } = read(SERVICES);
    const r = clusterFacts(objects).serviceRange!;
    assert.equal(r.extent, "lower-bound");
    assert.deepEqual(
      r.cidrs.map((c) => formatCidr(c.value)),
      ["10.96.0.1/32", "10.96.0.10/32"],
    );
  });
  it("unknown without any of them", () => {
    assert.equal(clusterFacts(read(NODE).objects).serviceRange, undefined);
  });
});

describe("the nodes' addresses", () => {
  it("the InternalIP, and the subnet the node's real ip addr shows it on, each cited", () => {
    const { objects, lines } = read(NODE);
    const file = "nodes/gke-lab-default-0/ip-addr.txt";
    const text = readFileSync(join(ROOT, "examples/snat-exception-list", file), "utf8");
    const parsed = readIpAddr(text, file);
    const facts = clusterFacts(objects, {
      nodeInterfaces: [{ node: "gke-lab-default-0", interfaces: parsed.value ?? [] }],
    });
    const ranges = facts.nodeRanges ?? [];
    assert.deepEqual(
      ranges.map((r) => formatCidr(r.value)),
      ["10.128.0.2/32", "10.128.0.0/20"],
    );
    assert.equal(
      lineAt(lines, ranges[0]!.source.line),
      "- {address: 10.128.0.2, type: InternalIP}",
    );
    assert.equal(ranges[1]!.source.file, file);
    assert.equal(
      text.split("\n")[ranges[1]!.source.line - 1]?.trim(),
      "inet 10.128.0.2/20 scope global eth0",
    );
    // without the node's interfaces: its address only
    assert.deepEqual(
      (clusterFacts(objects).nodeRanges ?? []).map((r) => formatCidr(r.value)),
      ["10.128.0.2/32"],
    );
  });
});

describe("Cilium's pod ranges", () => {
  it("CiliumNode spec.ipam.podCIDRs are pod ranges, cited", () => {
    const { objects, lines } = read(`${NODE}---\n${CILIUM_NODE}`);
    const facts = clusterFacts(objects);
    assert.deepEqual(facts.podRanges.map(formatCidr), ["10.0.2.0/24", "10.4.0.0/24"]);
    assert.ok(isPodAddress(facts, parseIp("10.0.2.7")));
    assert.ok(!isPodAddress(facts, parseIp("10.0.3.7")));
    const cilium = podRangesOf(facts).find((r) => formatCidr(r.value) === "10.0.2.0/24")!;
    assert.equal(lineAt(lines, cilium.source.line), "- 10.0.2.0/24");
  });
  it("CiliumPodIPPools together are the cluster's pod range", () => {
    const { objects, lines } = read(POOLS);
    const r = statedClusterRange(objects)!;
    assert.deepEqual(r.cidrs.map(formatCidr), ["10.10.0.0/16", "10.20.0.0/16"]);
    assert.equal(r.what, "Cilium's CiliumPodIPPools");
    assert.equal(lineAt(lines, r.source.line), "- 10.10.0.0/16");
  });
});
