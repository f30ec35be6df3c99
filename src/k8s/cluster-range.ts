/**
 * @module k8s/cluster-range — the cluster's whole pod range where a component's configuration
 * states it: kube-proxy's ConfigMap (`clusterCIDR`), Cilium's `cluster-pool-ipv4-cidr` or its
 * multi-pool CiliumPodIPPools, or the controller manager's `--cluster-cidr`; or where kube-proxy's
 * own rules in the nodes'
 * iptables-save show it (`! -s CIDR … -j KUBE-MARK-MASQ`); with the line it was read from.
 */
import type { KubeObject } from "../evidence/kube-objects.ts";
import type { IptablesDump, Rule } from "../iptables/dump.ts";
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
 * `--cluster-cidr`, or Cilium's `cluster-pool-ipv4-cidr`; the first object (in snapshot order)
 * that states one decides. Else Cilium's CiliumPodIPPools together; undefined when none is in the
 * snapshot.
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
  return ciliumPools(objects);
}

/**
 * Cilium multi-pool IPAM: every CiliumPodIPPool's `spec.ipv4.cidrs` and `spec.ipv6.cidrs` (pods
 * take their addresses from these pools, not from the Nodes' podCIDRs), cited at the first.
 */
function ciliumPools(objects: readonly KubeObject[]): ClusterRange | undefined {
  const found: { cidr: Cidr; source: SourceRef }[] = [];
  for (const o of objects) {
    if (o.kind !== "CiliumPodIPPool") continue;
    const spec = (o.raw["spec"] ?? {}) as Record<string, unknown>;
    for (const family of ["ipv4", "ipv6"] as const) {
      const f = (spec[family] ?? {}) as Record<string, unknown>;
      const list = Array.isArray(f["cidrs"]) ? (f["cidrs"] as unknown[]) : [];
      for (const [i, c] of list.entries()) {
        if (typeof c !== "string") continue;
        const source = o.locate(["spec", family, "cidrs", i]) ?? o.source;
        for (const cidr of cidrsOf(c)) found.push({ cidr, source });
      }
    }
  }
  const first = found[0];
  if (!first) return undefined;
  return {
    cidrs: found.map((f) => f.cidr),
    source: first.source,
    what: "Cilium's CiliumPodIPPools",
  };
}

/** The dumps of one node: its name and its iptables-save (IPv4 and IPv6, either may be absent). */
export interface NodeRules {
  readonly node: string;
  readonly dumps: readonly IptablesDump[];
  /** The node's own pod ranges (spec.podCIDRs): a rule naming only one of them is NodeCIDR mode. */
  readonly podCIDRs: readonly Cidr[];
}

/** The chains kube-proxy writes its detector's rules in. */
const DETECTOR_CHAIN = /^KUBE-(SERVICES$|SVC-|EXT-|XLB-)/;

const sameCidr = (a: Cidr, b: Cidr) =>
  a.family === b.family && a.start === b.start && a.end === b.end;

/**
 * The CIDR kube-proxy's local-traffic detector writes, when `rule` is one of its rules: with
 * `--detect-local-mode=ClusterCIDR` (the default with `--cluster-cidr`) it marks traffic to a
 * Service's cluster IP for masquerade unless the source is a pod (`-A KUBE-SVC-… ! -s CIDR -d
 * VIP … -j KUBE-MARK-MASQ`; before v1.26 in KUBE-SERVICES), and sends pod traffic to an external
 * address of a Local-policy Service to the cluster chain (`-A KUBE-EXT-… -s CIDR … -j KUBE-SVC-…`;
 * before v1.25 KUBE-XLB-…). See kubernetes pkg/proxy/iptables/proxier.go and
 * pkg/proxy/util/localdetector.go (NewDetectLocalByCIDR: `-s cidr`, `! -s cidr`).
 */
function detectorCidr(rule: Rule): Cidr | undefined {
  if (rule.table !== "nat" || !rule.chain.startsWith("KUBE-") || !rule.src) return undefined;
  const t = rule.target;
  if (t?.kind !== "chain") return undefined;
  if (rule.src.negated && t.name === "KUBE-MARK-MASQ" && rule.dst && !rule.dst.negated)
    return rule.src.cidr;
  if (
    !rule.src.negated &&
    (rule.chain.startsWith("KUBE-EXT-") || rule.chain.startsWith("KUBE-XLB-")) &&
    (t.name.startsWith("KUBE-SVC-") || t.name.startsWith("KUBE-SVL-"))
  )
    return rule.src.cidr;
  return undefined;
}

/**
 * The cluster's pod range as kube-proxy's own rules on the nodes state it (see
 * {@link detectorCidr}): the first such rule of each family decides, cited by its line. A CIDR
 * equal to the node's own pod range is `--detect-local-mode=NodeCIDR` and says nothing about the
 * cluster's range; it is skipped. Undefined when no dump holds such a rule.
 */
export function kubeProxyRulesRange(nodes: readonly NodeRules[]): ClusterRange | undefined {
  const found: { cidr: Cidr; source: SourceRef }[] = [];
  for (const n of nodes) {
    for (const dump of n.dumps) {
      if (found.some((f) => f.cidr.family === dump.family)) continue;
      const nat = dump.tables.get("nat");
      if (!nat) continue;
      search: for (const chain of nat.chains.values()) {
        if (!DETECTOR_CHAIN.test(chain.name)) continue;
        for (const rule of chain.rules) {
          const cidr = detectorCidr(rule);
          if (!cidr) continue;
          // one detector per family and node: its first rule says which CIDR it matches
          if (!n.podCIDRs.some((p) => sameCidr(p, cidr))) found.push({ cidr, source: rule.source });
          break search;
        }
      }
    }
  }
  const first = found[0];
  if (!first) return undefined;
  return {
    cidrs: found.map((f) => f.cidr),
    source: first.source,
    what: "kube-proxy's rules (--cluster-cidr)",
  };
}
