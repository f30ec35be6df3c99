/** @module k8s/cluster-facts.test — nodes, pods, pod ranges and Service addresses, with their lines. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type KubeObject, readKubeObjects } from "../evidence/kube-objects.ts";
import { formatCidr, formatIp, parseIp } from "../net/cidr.ts";
import {
  clusterFacts,
  isPodAddress,
  nodeInternalIps,
  podRangesOf,
  serviceAddresses,
} from "./cluster-facts.ts";

const read = (yaml: string): { objects: KubeObject[]; lines: string[] } => {
  const r = readKubeObjects(yaml, "cluster/x.yaml");
  assert.deepEqual(r.diagnostics, []);
  return { objects: r.value, lines: yaml.split("\n") };
};

const NODES = `apiVersion: v1
kind: Node
metadata: {name: new-node}
spec:
  podCIDR: 10.244.1.0/24
  podCIDRs:
  - 10.244.1.0/24
  - fd00:10:244:1::/64
status:
  addresses:
  - {type: InternalIP, address: 192.0.2.11}
  - {type: Hostname, address: new-node}
---
apiVersion: v1
kind: Node
metadata: {name: old-node}
spec:
  podCIDR: 10.244.2.0/24
status:
  addresses:
  - {type: InternalIP, address: 192.0.2.12}
`;

const PODS = `apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: demo}
spec: {nodeName: new-node}
status:
  podIP: 10.250.0.7
  podIPs:
  - ip: 10.250.0.7
  - ip: fd00:250::7
---
apiVersion: v1
kind: Pod
metadata: {name: agent-x, namespace: kube-system}
spec: {nodeName: old-node, hostNetwork: true}
status:
  podIP: 192.0.2.12
`;

describe("clusterFacts and the pod address space", () => {
  const { objects, lines } = read(`${NODES}---\n${PODS}`);
  const lineOf = (n: number) => lines[n - 1]?.trim() ?? "";
  const facts = clusterFacts(objects);

  it("reads spec.podCIDRs (both families) over spec.podCIDR, and podCIDR on older nodes", () => {
    assert.deepEqual(
      facts.nodes.map((n) => [n.name, n.podCIDRs.map((c) => formatCidr(c.cidr))]),
      [
        ["new-node", ["10.244.1.0/24", "fd00:10:244:1::/64"]],
        ["old-node", ["10.244.2.0/24"]],
      ],
    );
    const ranges = podRangesOf(facts);
    const v6 = ranges.find((r) => r.value.family === 6 && r.value.prefix === 64)!;
    assert.equal(lineOf(v6.source.line), "- fd00:10:244:1::/64");
    const old = ranges.find((r) => formatCidr(r.value) === "10.244.2.0/24")!;
    assert.equal(lineOf(old.source.line), "podCIDR: 10.244.2.0/24");
  });

  it("counts a pod's own addresses (dual-stack) and never a host-network pod's", () => {
    const blocks = podRangesOf(facts).map((r) => formatCidr(r.value));
    assert.ok(blocks.includes("10.250.0.7/32"));
    assert.ok(blocks.includes("fd00:250::7/128"));
    assert.ok(!blocks.includes("192.0.2.12/32"), "a host-network pod's address is its node's");
    assert.equal(isPodAddress(facts, parseIp("10.250.0.7")), true);
    assert.equal(isPodAddress(facts, parseIp("fd00:250::7")), true);
    assert.equal(isPodAddress(facts, parseIp("10.244.2.99")), true, "inside a node's range");
    assert.equal(isPodAddress(facts, parseIp("fd00:10:244:1::5")), true);
    assert.equal(isPodAddress(facts, parseIp("192.0.2.12")), false);
    assert.equal(isPodAddress(facts, parseIp("10.244.3.1")), false);
  });

  it("keeps the primary address as status.podIP states it", () => {
    const web = facts.pods.find((p) => p.name === "web-0")!;
    assert.equal(formatIp(web.podIP!.ip), "10.250.0.7");
    assert.equal(lineOf(web.podIP!.source.line), "podIP: 10.250.0.7");
    assert.equal(web.podIPs.length, 2);
  });

  it("merges the nodes' ranges into the pod address space", () => {
    const two = read(
      "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nspec: {podCIDR: 10.244.0.0/24}\n---\n" +
        "apiVersion: v1\nkind: Node\nmetadata: {name: b}\nspec: {podCIDR: 10.244.1.0/24}\n",
    );
    assert.deepEqual(clusterFacts(two.objects).podRanges.map(formatCidr), ["10.244.0.0/23"]);
    assert.equal(facts.podRanges.length, 3);
  });

  it("lists the nodes' InternalIPs with their node", () => {
    assert.deepEqual(
      nodeInternalIps(facts).map((a) => [a.node.name, formatIp(a.ip), lineOf(a.source.line)]),
      [
        ["new-node", "192.0.2.11", "- {type: InternalIP, address: 192.0.2.11}"],
        ["old-node", "192.0.2.12", "- {type: InternalIP, address: 192.0.2.12}"],
      ],
    );
  });

  it("reports a pod address it cannot read, and keeps the rest", () => {
    const bad = read(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nstatus: {podIP: 10.1.2.300}\n---\n" + PODS,
    );
    const f = clusterFacts(bad.objects);
    assert.ok(f.diagnostics.some((d) => d.source?.line === 4));
    assert.equal(f.pods.find((p) => p.name === "p")?.podIPs.length, 0);
    assert.equal(isPodAddress(f, parseIp("10.250.0.7")), true);
  });
});

describe("serviceAddresses", () => {
  const { objects, lines } = read(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  clusterIP: 10.96.0.20
  clusterIPs: [10.96.0.20, "fd00:96::20"]
---
apiVersion: v1
kind: Service
metadata: {name: headless, namespace: demo}
spec:
  clusterIP: None
---
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: kube-system}
spec:
  clusterIP: 10.96.0.10
`);

  it("lists both families of a dual-stack Service (primary first), none for a headless one", () => {
    const r = serviceAddresses(objects);
    assert.deepEqual(r.diagnostics, []);
    assert.deepEqual(
      r.value.map((a) => [`${a.service.namespace}/${a.service.name}`, formatIp(a.ip)]),
      [
        ["demo/web", "10.96.0.20"],
        ["demo/web", "fd00:96::20"],
        ["kube-system/dns", "10.96.0.10"],
      ],
    );
    const dns = r.value.at(-1)!;
    assert.equal(lines[dns.source.line - 1]?.trim(), "clusterIP: 10.96.0.10");
  });

  it("says which cluster IP it cannot read", () => {
    const bad = read(
      "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIP: 10.96.0.999}\n",
    );
    const r = serviceAddresses(bad.objects);
    assert.equal(r.value.length, 0);
    assert.equal(r.diagnostics[0]?.source?.line, 4);
  });
});
