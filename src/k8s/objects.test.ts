/** @module k8s/objects.test — typed views of kubectl output, with the lines of cited fields. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { type KubeObject, readKubeObjects } from "../evidence/kube-objects.ts";
import { formatCidr, formatIp } from "../net/cidr.ts";
import {
  readConfigMap,
  readDaemonSet,
  readNamespace,
  readNetworkPolicy,
  readNode,
  readPod,
  readService,
} from "./objects.ts";

const fixtureText = (name: string) =>
  readFileSync(new URL(`../evidence/fixtures/kube/${name}`, import.meta.url), "utf8");
const objects = (name: string) => readKubeObjects(fixtureText(name), name).value;
const one = (yaml: string): KubeObject => {
  const r = readKubeObjects(yaml, "x.yaml");
  assert.deepEqual(r.diagnostics, []);
  return r.value[0]!;
};
const lineOf = (name: string, n: number) => fixtureText(name).split("\n")[n - 1]?.trim();

describe("readNode", () => {
  it("reads pool, pod CIDRs, addresses and taints with their lines", () => {
    const [a, b] = objects("nodes-daemonset.yaml").filter((o) => o.kind === "Node");
    const n = readNode(a!);
    assert.deepEqual(n.diagnostics, []);
    assert.equal(n.value?.pool, "default-pool");
    assert.deepEqual(
      n.value?.podCIDRs.map((c) => formatCidr(c.cidr)),
      ["10.128.0.0/24"],
    );
    assert.equal(
      lineOf("nodes-daemonset.yaml", n.value!.podCIDRs[0]!.source.line),
      "- 10.128.0.0/24",
    );
    assert.deepEqual(
      n.value?.internalIPs.map((x) => formatIp(x.ip)),
      ["10.156.0.2"],
    );
    assert.deepEqual(
      n.value?.externalIPs.map((x) => formatIp(x.ip)),
      ["34.89.10.11"],
    );
    const gpu = readNode(b!).value!;
    assert.equal(gpu.pool, "gpu-pool");
    assert.deepEqual(
      gpu.taints.map((t) => [t.key, t.value, t.effect]),
      [["nvidia.com/gpu", "present", "NoSchedule"]],
    );
    assert.equal(
      lineOf("nodes-daemonset.yaml", gpu.taints[0]!.source.line),
      "- effect: NoSchedule",
    );
  });

  it("falls back to spec.podCIDR and reports a bad address with its line, keeping the rest", () => {
    const n = readNode(
      one(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec:\n  podCIDR: 10.1.0.0/24\nstatus:\n  addresses:\n  - {type: InternalIP, address: 10.0.0.300}\n  - {type: InternalIP, address: 10.0.0.3}\n",
      ),
    );
    assert.deepEqual(
      n.value?.podCIDRs.map((c) => formatCidr(c.cidr)),
      ["10.1.0.0/24"],
    );
    assert.deepEqual(
      n.value?.internalIPs.map((x) => formatIp(x.ip)),
      ["10.0.0.3"],
    );
    assert.equal(n.diagnostics.length, 1);
    assert.equal(n.diagnostics[0]?.source?.line, 8);
    assert.match(n.diagnostics[0]!.message, /expected an IP address/);
  });

  it("drops a malformed taint, reports it at its line, and keeps the node", () => {
    const n = readNode(
      one(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec:\n  taints:\n  - {key: a, effect: Sometimes}\n  - {key: b, effect: NoExecute}\n",
      ),
    );
    assert.deepEqual(
      n.value?.taints.map((t) => t.key),
      ["b"],
    );
    assert.equal(n.diagnostics[0]?.code, "KUBE_SCHEMA");
    assert.equal(n.diagnostics[0]?.source?.line, 6);
  });

  it("refuses another kind", () => {
    assert.equal(readNode(objects("configmap-ip-masq-agent.yaml")[0]!).value, undefined);
  });
});

describe("readPod", () => {
  it("reads kubectl's pods: node, IPs, owners, containers and statuses", () => {
    const pods = objects("pods.yaml").map((o) => readPod(o));
    assert.ok(pods.every((p) => p.diagnostics.length === 0 && p.value));
    const ad = pods.find((p) => p.value!.name.startsWith("adservice-"))!.value!;
    assert.equal(ad.namespace, "default");
    assert.equal(ad.nodeName, "minikube");
    assert.equal(ad.hostNetwork, false);
    assert.equal(ad.ownerReferences[0]?.kind, "ReplicaSet");
    assert.equal(ad.ownerReferences[0]?.controller, true);
    assert.equal(ad.containers[0]?.name, "server");
    assert.match(ad.containers[0]?.image ?? "", /adservice/);
    assert.equal(ad.phase, "Running");
    assert.equal(ad.containerStatuses[0]?.state, "running");
    assert.ok(ad.containerStatuses[0]!.startedAt);
    assert.ok(ad.podIPs.length >= 1);
    assert.match(
      lineOf("pods.yaml", ad.podIPs[0]!.source.line) ?? "",
      new RegExp(formatIp(ad.podIPs[0]!.ip)),
    );
  });

  it("reads init containers, security contexts and pod sysctls of a VPN pod", () => {
    const text = `apiVersion: v1
kind: Pod
metadata: {name: openvpn-0, namespace: vpn}
spec:
  securityContext:
    sysctls:
    - name: net.ipv4.ip_forward
      value: "1"
  initContainers:
  - name: sysctl
    image: busybox:1.36
    command: [sysctl, -w, net.ipv4.ip_forward=1]
    securityContext: {privileged: true}
  containers:
  - name: openvpn
    image: kylemanna/openvpn
    securityContext:
      capabilities: {add: [NET_ADMIN]}
      runAsNonRoot: false
status:
  phase: Pending
  containerStatuses:
  - name: openvpn
    restartCount: 3
    state: {waiting: {reason: CreateContainerConfigError}}
`;
    const p = readPod(one(text));
    assert.deepEqual(p.diagnostics, []);
    const v = p.value!;
    assert.equal(v.namespace, "vpn");
    assert.deepEqual(
      v.sysctls.map((s) => [s.name, s.value, s.source.line]),
      [["net.ipv4.ip_forward", "1", 7]],
    );
    assert.equal(v.initContainers[0]?.privileged, true);
    assert.deepEqual(v.initContainers[0]?.command, ["sysctl", "-w", "net.ipv4.ip_forward=1"]);
    assert.equal(v.initContainers[0]?.source.line, 10);
    assert.deepEqual(v.containers[0]?.capabilities.add, ["NET_ADMIN"]);
    assert.equal(v.containers[0]?.runAsNonRoot, false);
    assert.deepEqual(
      [
        v.containerStatuses[0]?.state,
        v.containerStatuses[0]?.reason,
        v.containerStatuses[0]?.restartCount,
      ],
      ["waiting", "CreateContainerConfigError", 3],
    );
  });
});

describe("readDaemonSet", () => {
  it("reads selector, template, node selection, tolerations, args and status", () => {
    const ds = readDaemonSet(objects("nodes-daemonset.yaml").find((o) => o.kind === "DaemonSet")!);
    assert.deepEqual(ds.diagnostics, []);
    const v = ds.value!;
    assert.deepEqual(v.selector.matchLabels, { "k8s-app": "ip-masq-agent" });
    assert.deepEqual(v.templateLabels, { "k8s-app": "ip-masq-agent" });
    assert.deepEqual(v.nodeSelector, { "node.kubernetes.io/masq-agent-ds-ready": "true" });
    assert.equal(lineOf("nodes-daemonset.yaml", v.nodeSelectorSource!.line), "nodeSelector:");
    assert.equal(v.requiredNodeAffinity?.length, 1);
    assert.deepEqual(
      v.requiredNodeAffinity?.[0]?.matchExpressions.map((r) => [r.key, r.operator, r.values]),
      [["kubernetes.io/os", "In", ["linux"]]],
    );
    assert.deepEqual(
      v.tolerations.map((t) => [t.operator, t.effect]),
      [
        ["Exists", "NoSchedule"],
        ["Exists", "NoExecute"],
      ],
    );
    assert.deepEqual(v.containers[0]?.args, ["--v=2", "--logtostderr", "--enable-ipv6=false"]);
    assert.equal(v.hostNetwork, true);
    assert.deepEqual(v.status, { desired: 1, current: 1, ready: 1, available: 1, misscheduled: 0 });
  });
});

describe("readConfigMap, readNamespace, readService, readNetworkPolicy", () => {
  it("reads a ConfigMap's data", () => {
    const cm = readConfigMap(objects("configmap-ip-masq-agent.yaml")[0]!).value!;
    assert.equal(cm.namespace, "kube-system");
    assert.match(cm.data.config ?? "", /^nonMasqueradeCIDRs:/);
  });

  it("reads namespaces with labels", () => {
    const ns = objects("ns.yaml").map((o) => readNamespace(o).value!);
    assert.ok(ns.some((n) => n.name === "default"));
    assert.ok(ns.every((n) => typeof n.labels === "object"));
  });

  it("reads a Service: cluster IPs (not None), ports, selector, type", () => {
    const svc = readService(
      one(
        "apiVersion: v1\nkind: Service\nmetadata: {name: dns, namespace: kube-system}\nspec:\n  clusterIP: 10.96.0.10\n  clusterIPs: [10.96.0.10, 'fd00:96::a']\n  selector: {k8s-app: kube-dns}\n  ports:\n  - {name: dns, port: 53, protocol: UDP, targetPort: 53}\n  - {name: metrics, port: 9153, targetPort: metrics}\n",
      ),
    ).value!;
    assert.deepEqual(
      svc.clusterIPs.map((x) => formatIp(x.ip)),
      ["10.96.0.10", "fd00:96::a"],
    );
    assert.equal(svc.type, "ClusterIP");
    assert.deepEqual(
      svc.ports.map((p) => [p.protocol, p.port, p.targetPort]),
      [
        ["UDP", 53, 53],
        ["TCP", 9153, "metrics"],
      ],
    );
    const headless = readService(
      one("apiVersion: v1\nkind: Service\nmetadata: {name: h}\nspec: {clusterIP: None}\n"),
    );
    assert.deepEqual(headless.value?.clusterIPs, []);
    assert.deepEqual(headless.diagnostics, []);
  });

  it("reads a NetworkPolicy minimally and keeps it whole", () => {
    const np = readNetworkPolicy(
      one(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: db, namespace: prod}\nspec:\n  podSelector: {matchLabels: {app: db}}\n  policyTypes: [Ingress]\n  ingress:\n  - from: [{ipBlock: {cidr: 10.128.0.0/20}}]\n",
      ),
    ).value!;
    assert.deepEqual(np.podSelector.matchLabels, { app: "db" });
    assert.deepEqual(np.policyTypes, ["Ingress"]);
    assert.ok(Array.isArray((np.raw.spec as { ingress?: unknown }).ingress));
  });
});
