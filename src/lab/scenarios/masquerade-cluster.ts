/**
 * @module lab/scenarios/masquerade-cluster — the Kubernetes objects that describe a masquerade
 * replica, shaped as `kubectl get -o yaml` prints them (a List, keys in sorted order): Nodes with
 * podCIDR, InternalIP and node-pool label, the ip-masq-agent ConfigMap and DaemonSet (its affinity
 * excluding pools without the agent), the agent pods where it runs, and the app pods. Pure.
 */
import { stringify } from "yaml";

export interface ReplicaNode {
  readonly name: string;
  readonly pool: string;
  readonly hasAgent: boolean;
  readonly internalIp: string;
  readonly podCidr: string;
  readonly podName: string;
  readonly podIp: string;
}

export interface ReplicaDescription {
  readonly nodes: readonly ReplicaNode[];
  /** The ConfigMap's `config` key; undefined: no ConfigMap (the agent uses its defaults). */
  readonly agentConfig: string | undefined;
  readonly createdAt: string;
  /** The agent runs with --enable-ipv6. */
  readonly enableIpv6?: boolean;
}

const POOL_LABEL = "cloud.google.com/gke-nodepool";
const AGENT_IMAGE = "registry.k8s.io/networking/ip-masq-agent:v2.12.0";

/** Deterministic fake uid from a name, so regenerated examples stay stable. */
function uid(name: string): string {
  let h = 0x811c9dc5;
  const out: string[] = [];
  for (let round = 0; round < 4; round++) {
    for (const ch of `${round}${name}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
    out.push(h.toString(16).padStart(8, "0"));
  }
  const s = out.join("");
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20, 32)}`;
}

function suffix(name: string, n: number): string {
  return uid(name).replace(/-/g, "").slice(0, n);
}

/** Recursively sorts object keys, as kubectl's JSON-to-YAML printing does. */
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v !== null && typeof v === "object") {
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, x]) => [k, sortKeys(x)]),
    );
  }
  return v;
}

/** Prints objects as `kubectl get ... -o yaml` prints several: a v1 List. */
export function kubectlList(items: readonly unknown[]): string {
  return stringify(
    sortKeys({ apiVersion: "v1", items, kind: "List", metadata: { resourceVersion: "" } }),
    { lineWidth: 0, aliasDuplicateObjects: false },
  );
}

function meta(kind: string, name: string, createdAt: string, extra: Record<string, unknown> = {}) {
  return {
    name,
    uid: uid(`${kind}/${name}`),
    creationTimestamp: createdAt,
    resourceVersion: "1000",
    ...extra,
  };
}

export function nodeObjects(d: ReplicaDescription): unknown[] {
  return d.nodes.map((n) => ({
    apiVersion: "v1",
    kind: "Node",
    metadata: meta("Node", n.name, d.createdAt, {
      labels: {
        [POOL_LABEL]: n.pool,
        "kubernetes.io/hostname": n.name,
        "kubernetes.io/os": "linux",
      },
    }),
    spec: {
      podCIDR: n.podCidr,
      podCIDRs: [n.podCidr],
      providerID: `gce://podpath-lab/zone-a/${n.name}`,
    },
    status: {
      addresses: [
        { address: n.internalIp, type: "InternalIP" },
        { address: n.name, type: "Hostname" },
      ],
      conditions: [{ status: "True", type: "Ready", reason: "KubeletReady" }],
      nodeInfo: { kubeletVersion: "v1.29.6-gke.1038001", kernelVersion: "6.1.90+" },
    },
  }));
}

export function agentObjects(d: ReplicaDescription): unknown[] {
  const excluded = [...new Set(d.nodes.filter((n) => !n.hasAgent).map((n) => n.pool))];
  const labels = { "k8s-app": "ip-masq-agent" };
  const podSpec = (nodeName?: string) => ({
    ...(nodeName ? { nodeName } : {}),
    hostNetwork: true,
    containers: [
      {
        name: "ip-masq-agent",
        image: AGENT_IMAGE,
        args: [
          "--masq-chain=IP-MASQ-AGENT",
          "--nomasq-all-reserved-ranges=false",
          ...(d.enableIpv6 ? ["--enable-ipv6=true"] : []),
        ],
        securityContext: { privileged: false, capabilities: { add: ["NET_ADMIN", "NET_RAW"] } },
        volumeMounts: [{ name: "config", mountPath: "/etc/config" }],
      },
    ],
    ...(excluded.length > 0
      ? {
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [
                  { matchExpressions: [{ key: POOL_LABEL, operator: "NotIn", values: excluded }] },
                ],
              },
            },
          },
        }
      : {}),
    volumes: [
      {
        name: "config",
        configMap: {
          name: "ip-masq-agent",
          optional: true,
          items: [{ key: "config", path: "ip-masq-agent" }],
        },
      },
    ],
  });
  const running = d.nodes.filter((n) => n.hasAgent);
  const objects: unknown[] = [];
  if (d.agentConfig !== undefined) {
    objects.push({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: meta("ConfigMap", "ip-masq-agent", d.createdAt, { namespace: "kube-system" }),
      data: { config: d.agentConfig },
    });
  }
  objects.push({
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: meta("DaemonSet", "ip-masq-agent", d.createdAt, { namespace: "kube-system", labels }),
    spec: {
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: podSpec() },
      updateStrategy: { type: "RollingUpdate" },
    },
    status: {
      currentNumberScheduled: running.length,
      desiredNumberScheduled: running.length,
      numberAvailable: running.length,
      numberReady: running.length,
      updatedNumberScheduled: running.length,
    },
  });
  for (const n of running) {
    const name = `ip-masq-agent-${suffix(n.name, 5)}`;
    objects.push({
      apiVersion: "v1",
      kind: "Pod",
      metadata: meta("Pod", name, d.createdAt, {
        namespace: "kube-system",
        labels: { ...labels, "controller-revision-hash": "6b8d9c7f5" },
        ownerReferences: [
          {
            apiVersion: "apps/v1",
            kind: "DaemonSet",
            name: "ip-masq-agent",
            controller: true,
            uid: uid("DaemonSet/ip-masq-agent"),
          },
        ],
      }),
      spec: podSpec(n.name),
      status: {
        phase: "Running",
        hostIP: n.internalIp,
        podIP: n.internalIp,
        podIPs: [{ ip: n.internalIp }],
        containerStatuses: [
          {
            name: "ip-masq-agent",
            ready: true,
            restartCount: 0,
            image: AGENT_IMAGE,
            started: true,
            state: { running: { startedAt: d.createdAt } },
          },
        ],
      },
    });
  }
  return objects;
}

export function appPodObjects(d: ReplicaDescription): unknown[] {
  return d.nodes.map((n) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta("Pod", n.podName, d.createdAt, {
      namespace: "default",
      labels: { app: "billing" },
    }),
    spec: {
      nodeName: n.name,
      containers: [{ name: "app", image: "registry.example/billing:1.4" }],
    },
    status: {
      phase: "Running",
      hostIP: n.internalIp,
      podIP: n.podIp,
      podIPs: [{ ip: n.podIp }],
    },
  }));
}
