/**
 * @module k8s/cluster-range — the cluster's whole pod range where a component's configuration
 * states it: kube-proxy's ConfigMap (`clusterCIDR`), Cilium's `cluster-pool-ipv4-cidr`, or the
 * controller manager's `--cluster-cidr`, with the line it was read from.
 */
import type { KubeObject } from "../evidence/kube-objects.ts";
import type { SourceRef } from "../model/types.ts";
import { type Cidr, tryParseCidr } from "../net/cidr.ts";

/** The cluster's whole pod range, where a component's configuration states it. */
export interface ClusterRange {
  readonly cidrs: readonly Cidr[];
  readonly source: SourceRef;
  readonly what: string;
}

const CLUSTER_CIDR_FLAG = /--cluster-cidr[= ]([0-9a-fA-F.:/,]+)/;
const KUBE_PROXY_KEY = /^\s*clusterCIDR:\s*"?([0-9a-fA-F.:/,]+)"?\s*$/m;

function cidrsOf(text: string): Cidr[] {
  return text.split(",").flatMap((t) => {
    const r = tryParseCidr(t.trim(), { allowBareAddress: false });
    return "cidr" in r ? [r.cidr] : [];
  });
}

/**
 * The cluster CIDR from kube-proxy's ConfigMap (`clusterCIDR`), the controller manager's
 * `--cluster-cidr`, or Cilium's `cluster-pool-ipv4-cidr`; undefined when none is in the snapshot.
 * The first object (in snapshot order) that states one decides.
 */
export function statedClusterRange(objects: readonly KubeObject[]): ClusterRange | undefined {
  for (const o of objects) {
    if (o.kind === "ConfigMap" && o.namespace === "kube-system") {
      const data = (o.raw["data"] ?? {}) as Record<string, unknown>;
      for (const [key, value] of Object.entries(data)) {
        if (typeof value !== "string") continue;
        const m = o.name === "kube-proxy" ? KUBE_PROXY_KEY.exec(value) : undefined;
        if (m?.[1]) {
          const line = value.slice(0, m.index).split("\n").length + (m[0].startsWith("\n") ? 1 : 0);
          const ref = o.locateInString(["data", key], line) ?? o.source;
          return { cidrs: cidrsOf(m[1]), source: ref, what: "kube-proxy's clusterCIDR" };
        }
        if (o.name === "cilium-config" && key === "cluster-pool-ipv4-cidr") {
          return {
            cidrs: cidrsOf(value),
            source: o.locate(["data", key]) ?? o.source,
            what: "Cilium's cluster-pool-ipv4-cidr",
          };
        }
      }
    }
    if (
      o.kind === "Pod" &&
      o.namespace === "kube-system" &&
      o.name.startsWith("kube-controller-manager")
    ) {
      const text = JSON.stringify(o.raw["spec"] ?? {});
      const m = CLUSTER_CIDR_FLAG.exec(text);
      if (m?.[1])
        return {
          cidrs: cidrsOf(m[1]),
          source: o.source,
          what: "kube-controller-manager --cluster-cidr",
        };
    }
  }
  return undefined;
}
