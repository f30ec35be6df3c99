/**
 * @module questions/masquerade/facts — the cluster facts the masquerade question stands on: nodes
 * (pool, pod ranges, InternalIP), pods (node, addresses), and the pod address space, each with the
 * file line it was read from.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { SourceRef } from "../../model/types.ts";
import {
  type Cidr,
  formatCidr,
  type Ip,
  mergeCidrs,
  tryParseCidr,
  tryParseIp,
} from "../../net/cidr.ts";

export interface NodeFacts {
  readonly name: string;
  readonly object: KubeObject;
  /** Node pool: GKE's `cloud.google.com/gke-nodepool`, or another well-known pool label. */
  readonly pool?: string;
  readonly podCidrs: readonly { readonly cidr: Cidr; readonly source: SourceRef }[];
  readonly internalIp?: { readonly ip: Ip; readonly source: SourceRef };
}

export interface PodFacts {
  readonly namespace: string;
  readonly name: string;
  readonly object: KubeObject;
  readonly nodeName?: string;
  readonly hostNetwork: boolean;
  readonly ips: readonly { readonly ip: Ip; readonly source: SourceRef }[];
  readonly phase?: string;
}

const POOL_LABELS = [
  "cloud.google.com/gke-nodepool",
  "eks.amazonaws.com/nodegroup",
  "kubernetes.azure.com/agentpool",
  "node-pool",
  "nodepool",
];

export function poolOf(labels: Readonly<Record<string, string>>): string | undefined {
  for (const l of POOL_LABELS) if (labels[l]) return labels[l];
  return undefined;
}

const rec = (v: unknown): Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

export function nodeFacts(o: KubeObject): NodeFacts {
  const spec = rec(o.raw["spec"]);
  const podCidrs: { cidr: Cidr; source: SourceRef }[] = [];
  const seen = new Set<string>();
  const add = (text: unknown, path: (string | number)[]) => {
    if (typeof text !== "string") return;
    const r = tryParseCidr(text, { allowBareAddress: false });
    if (!("cidr" in r)) return;
    const key = formatCidr(r.cidr);
    if (seen.has(key)) return;
    seen.add(key);
    podCidrs.push({ cidr: r.cidr, source: o.locate(path) ?? o.source });
  };
  arr(spec["podCIDRs"]).forEach((c, i) => add(c, ["spec", "podCIDRs", i]));
  add(spec["podCIDR"], ["spec", "podCIDR"]);
  let internalIp: NodeFacts["internalIp"];
  arr(rec(o.raw["status"])["addresses"]).forEach((a, i) => {
    const r = rec(a);
    if (internalIp || r["type"] !== "InternalIP" || typeof r["address"] !== "string") return;
    const ip = tryParseIp(r["address"]);
    if (ip)
      internalIp = { ip, source: o.locate(["status", "addresses", i, "address"]) ?? o.source };
  });
  const pool = poolOf(o.labels);
  return {
    name: o.name,
    object: o,
    ...(pool ? { pool } : {}),
    podCidrs,
    ...(internalIp ? { internalIp } : {}),
  };
}

export function podFacts(o: KubeObject): PodFacts {
  const spec = rec(o.raw["spec"]);
  const status = rec(o.raw["status"]);
  const ips: { ip: Ip; source: SourceRef }[] = [];
  const seen = new Set<bigint>();
  const add = (text: unknown, path: (string | number)[]) => {
    if (typeof text !== "string") return;
    const ip = tryParseIp(text);
    if (!ip || seen.has(ip.value)) return;
    seen.add(ip.value);
    ips.push({ ip, source: o.locate(path) ?? o.source });
  };
  arr(status["podIPs"]).forEach((p, i) => add(rec(p)["ip"], ["status", "podIPs", i, "ip"]));
  add(status["podIP"], ["status", "podIP"]);
  const nodeName = typeof spec["nodeName"] === "string" ? spec["nodeName"] : undefined;
  const phase = typeof status["phase"] === "string" ? status["phase"] : undefined;
  return {
    namespace: o.namespace ?? "default",
    name: o.name,
    object: o,
    ...(nodeName ? { nodeName } : {}),
    hostNetwork: spec["hostNetwork"] === true,
    ips,
    ...(phase ? { phase } : {}),
  };
}

export interface ClusterFacts {
  readonly nodes: readonly NodeFacts[];
  readonly pods: readonly PodFacts[];
  /** The pod address space: the nodes' pod ranges merged (empty when no Node says). */
  readonly podRanges: readonly Cidr[];
}

export function clusterFacts(objects: readonly KubeObject[]): ClusterFacts {
  const nodes = objects.filter((o) => o.kind === "Node").map(nodeFacts);
  const pods = objects.filter((o) => o.kind === "Pod").map(podFacts);
  const podRanges = mergeCidrs(nodes.flatMap((n) => n.podCidrs.map((c) => c.cidr)));
  return { nodes, pods, podRanges };
}
