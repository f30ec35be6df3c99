/**
 * @module cases/masquerade/plan-fixtures.test — small snapshots for the masquerade plan and verify tests,
 * built in memory (a {@link SnapshotSource} over a map of files), and the checks they share. The
 * file also runs a smoke test, so the runner has something to report for it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { decodeMasqConfig, validateMasqConfig } from "../../agents/ip-masq-agent/config.ts";
import {
  type Cidr,
  contains,
  excludeCidrs,
  type Ip,
  mergeCidrs,
  parseCidr,
} from "../../net/cidr.ts";
import { loadSnapshot, type Snapshot } from "../../snapshot/load.ts";
import type { SnapshotSource } from "../../snapshot/source.ts";

/** A snapshot from files held in memory (relative path → text or bytes). */
export function memorySnapshot(
  name: string,
  files: Readonly<Record<string, string | Uint8Array>>,
): Snapshot {
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  const get = (rel: string) => {
    const t = files[rel];
    if (t === undefined) throw new Error(`${name}: no ${rel}`);
    return t;
  };
  const source: SnapshotSource = {
    name,
    paths: Object.keys(files).sort(),
    readText: (rel) => {
      const t = get(rel);
      return typeof t === "string" ? t : dec.decode(t);
    },
    readBytes: (rel) => {
      const t = get(rel);
      return typeof t === "string" ? enc.encode(t) : t;
    },
    diskPath: () => undefined,
    diagnostics: [],
  };
  return loadSnapshot(source);
}

/** Indents every line of a block (for config text inside a ConfigMap's literal block). */
export const indent = (text: string, by: string) =>
  text
    .split("\n")
    .map((l) => (l === "" ? l : by + l))
    .join("\n");

export function nodeYaml(name: string, pool: string, podCidr: string, internalIp: string): string {
  return `apiVersion: v1
kind: Node
metadata:
  name: ${name}
  labels:
    cloud.google.com/gke-nodepool: ${pool}
spec:
  podCIDR: ${podCidr}
  podCIDRs:
    - ${podCidr}
status:
  addresses:
    - address: ${internalIp}
      type: InternalIP
`;
}

export function configMapYaml(config: string): string {
  return `apiVersion: v1
kind: ConfigMap
metadata:
  name: ip-masq-agent
  namespace: kube-system
  resourceVersion: "4711"
  uid: 0b1c2d3e-0000-4000-8000-000000000001
data:
  config: |
${indent(config, "    ")}
`;
}

/** The agent's DaemonSet kept off pool `legacy` by a required node affinity. */
export const DAEMONSET_NOT_ON_LEGACY = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ip-masq-agent
  namespace: kube-system
  labels:
    k8s-app: ip-masq-agent
spec:
  selector:
    matchLabels:
      k8s-app: ip-masq-agent
  template:
    metadata:
      labels:
        k8s-app: ip-masq-agent
    spec:
      hostNetwork: true
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - key: cloud.google.com/gke-nodepool
                    operator: NotIn
                    values: [legacy]
      containers:
        - name: ip-masq-agent
          image: registry.k8s.io/networking/ip-masq-agent:v2.12.0
          args: [--masq-chain=IP-MASQ-AGENT]
`;

export function agentPodYaml(node: string, startedAt = "2026-01-01T00:00:00Z"): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ip-masq-agent-${node.slice(-3)}
  namespace: kube-system
  labels:
    k8s-app: ip-masq-agent
  ownerReferences:
    - apiVersion: apps/v1
      kind: DaemonSet
      name: ip-masq-agent
      controller: true
spec:
  nodeName: ${node}
  hostNetwork: true
  containers:
    - name: ip-masq-agent
      image: registry.k8s.io/networking/ip-masq-agent:v2.12.0
status:
  phase: Running
  containerStatuses:
    - name: ip-masq-agent
      restartCount: 0
      state:
        running:
          startedAt: ${startedAt}
`;
}

export function appPodYaml(name: string, node: string, ip: string): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  namespace: default
spec:
  nodeName: ${node}
  containers:
    - name: app
      image: app
status:
  phase: Running
  podIP: ${ip}
  podIPs:
    - ip: ${ip}
`;
}

export const KUBE_PROXY = `apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-proxy
  namespace: kube-system
data:
  config.conf: |
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    clusterCIDR: 10.8.0.0/14
`;

export const SITE = `kind: RemoteSite
name: dc-east
prefixes: [10.30.0.0/16]
routesBack:
  - 10.128.0.0/20
vpn:
  kind: cloud-vpn-classic
  localTrafficSelectors:
    - 10.128.0.0/20
  remoteTrafficSelectors: [10.30.0.0/16]
allowlists:
  - name: orders-db
    sources:
      - 10.8.0.0/14
      - 10.128.0.0/20
    destinations: [10.30.1.10/32]
    ports: [tcp/5432]
`;

export const NETPOL = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: from-pods
  namespace: payments
spec:
  podSelector: {}
  ingress:
    - from:
        - ipBlock:
            cidr: 10.8.0.0/14
`;

/** The commented config the hand-written cluster runs. */
export const COMMENTED_CONFIG = `# exemptions agreed with the network team
nonMasqueradeCIDRs:
  - 10.0.0.0/8 # everything private
  - 192.168.0.0/16
masqLinkLocal: true
resyncInterval: 30s
`;

/** Two pools (default with the agent, legacy without), a far side, a NetworkPolicy. */
export function clusterFiles(config: string | null = COMMENTED_CONFIG): Record<string, string> {
  return {
    "cluster/nodes.yaml": `${nodeYaml("gke-east-default-a1", "default", "10.8.0.0/24", "10.128.0.2")}---\n${nodeYaml(
      "gke-east-legacy-b1",
      "legacy",
      "10.8.1.0/24",
      "10.128.0.3",
    )}`,
    ...(config === null ? {} : { "cluster/ip-masq-agent.yaml": configMapYaml(config) }),
    "cluster/daemonset.yaml": DAEMONSET_NOT_ON_LEGACY,
    "cluster/pods.yaml": `${agentPodYaml("gke-east-default-a1")}---\n${appPodYaml("orders", "gke-east-default-a1", "10.8.0.7")}---\n${appPodYaml("reports", "gke-east-legacy-b1", "10.8.1.9")}`,
    "cluster/kube-proxy.yaml": KUBE_PROXY,
    "cluster/netpol.yaml": NETPOL,
    "remote/dc-east.yaml": SITE,
  };
}

export const ip = (text: string): Ip => {
  const c = parseCidr(text);
  return { family: c.family, value: c.start };
};

/** Every address of `inner` lies in the union of `outer` (CIDR arithmetic, not string equality). */
export function covers(outer: readonly Cidr[], inner: Cidr): boolean {
  return excludeCidrs([inner], mergeCidrs(outer)).length === 0;
}

export const coversIp = (outer: readonly Cidr[], addr: Ip) => outer.some((c) => contains(c, addr));

/** The ConfigMap's `config` as the agent reads it: decoded, then validated with its own rules. */
export function agentReads(configMapText: string, enableIpv6 = false) {
  const cm = parse(configMapText) as { kind: string; data: { config: string } };
  assert.equal(cm.kind, "ConfigMap");
  const d = decodeMasqConfig(cm.data.config);
  if ("error" in d) assert.fail(`the agent cannot decode the config: ${d.error.message}`);
  return {
    config: d.config,
    error: validateMasqConfig(d.config, { enableIpv6 }),
    text: cm.data.config,
  };
}

describe("masquerade test fixtures", () => {
  it("load as a snapshot without error diagnostics", () => {
    const snap = memorySnapshot("hand", clusterFiles());
    assert.deepEqual(
      snap.diagnostics.filter((d) => d.severity === "error"),
      [],
    );
    assert.equal(snap.objects.filter((o) => o.kind === "Node").length, 2);
    assert.equal(snap.remoteFiles.length, 1);
  });
});
