/**
 * @module k8s/address-ranges — the cluster's Service range and its nodes' addresses, from all the
 * evidence a snapshot may hold, each part cited: the Service range as kube-apiserver's
 * `--service-cluster-ip-range` (its static pod), the ServiceCIDR objects (networking.k8s.io, 1.33+)
 * or, as a lower bound only, the Services' cluster IPs (kube-proxy is given no Service range: its
 * flags and config do not name one); the nodes' addresses as their InternalIPs and, where a node's
 * `ip addr` shows the interface holding that address, the subnet it is on. Cilium's per-node pod
 * ranges (CiliumNode `spec.ipam.podCIDRs`) are pod ranges like a Node's `spec.podCIDRs`.
 */

import type { NetInterface } from "../evidence/ip-addr.ts";
import { primaryAddress } from "../evidence/ip-addr.ts";
import type { KubeObject } from "../evidence/kube-objects.ts";
import type { Located, SourceRef } from "../model/types.ts";
import { type Cidr, tryParseCidr } from "../net/cidr.ts";

/** The Service range and how far the evidence pins it. */
export interface ServiceRange {
  readonly cidrs: readonly Located<Cidr>[];
  /** What states it, for the reader: `kube-apiserver --service-cluster-ip-range`. */
  readonly what: string;
  /**
   * `stated`: a component's configuration names the range. `lower-bound`: only the Services'
   * cluster IPs are known; the range holds them and may be (much) bigger.
   */
  readonly extent: "stated" | "lower-bound";
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function cidrsOf(text: string): Cidr[] {
  return text.split(",").flatMap((t) => {
    const r = tryParseCidr(t.trim(), { allowBareAddress: false });
    return "cidr" in r ? [r.cidr] : [];
  });
}

const FLAG = "--service-cluster-ip-range";

/** `--service-cluster-ip-range` of a kube-apiserver static pod: each CIDR at its argument's line. */
function apiServerFlag(o: KubeObject): Located<Cidr>[] | undefined {
  if (o.kind !== "Pod" || o.namespace !== "kube-system" || !o.name.startsWith("kube-apiserver"))
    return undefined;
  const spec = isRecord(o.raw["spec"]) ? o.raw["spec"] : {};
  const containers = Array.isArray(spec["containers"]) ? spec["containers"] : [];
  for (const [ci, c] of containers.entries()) {
    if (!isRecord(c)) continue;
    for (const key of ["command", "args"] as const) {
      const list = Array.isArray(c[key]) ? (c[key] as unknown[]) : [];
      for (const [i, arg] of list.entries()) {
        if (typeof arg !== "string") continue;
        const value = arg.startsWith(`${FLAG}=`)
          ? arg.slice(FLAG.length + 1)
          : arg === FLAG && typeof list[i + 1] === "string"
            ? (list[i + 1] as string)
            : undefined;
        if (value === undefined) continue;
        const at = arg === FLAG ? i + 1 : i;
        const source = o.locate(["spec", "containers", ci, key, at]) ?? o.source;
        return cidrsOf(value).map((cidr) => ({ value: cidr, source }));
      }
    }
  }
  return undefined;
}

/** `spec.cidrs` of the ServiceCIDR objects (the default one is named `kubernetes`). */
function serviceCidrObjects(objects: readonly KubeObject[]): Located<Cidr>[] {
  return objects.flatMap((o) => {
    if (o.kind !== "ServiceCIDR") return [];
    const spec = isRecord(o.raw["spec"]) ? o.raw["spec"] : {};
    const list = Array.isArray(spec["cidrs"]) ? spec["cidrs"] : [];
    return list.flatMap((c, i) =>
      typeof c === "string"
        ? cidrsOf(c).map((cidr) => ({
            value: cidr,
            source: o.locate(["spec", "cidrs", i]) ?? o.source,
          }))
        : [],
    );
  });
}

/**
 * The Service range: kube-apiserver's flag where its static pod is in the snapshot, else the
 * ServiceCIDR objects, else the given cluster IPs as single addresses (a lower bound); undefined
 * when none is known.
 */
export function serviceRangeOf(
  objects: readonly KubeObject[],
  clusterIps: readonly Located<Cidr>[],
): ServiceRange | undefined {
  for (const o of objects) {
    const flag = apiServerFlag(o);
    if (flag && flag.length > 0)
      return { cidrs: flag, what: `kube-apiserver ${FLAG}`, extent: "stated" };
  }
  const objs = serviceCidrObjects(objects);
  if (objs.length > 0)
    return { cidrs: objs, what: "the ServiceCIDR objects (spec.cidrs)", extent: "stated" };
  if (clusterIps.length > 0)
    return {
      cidrs: clusterIps,
      what: "the Services' cluster IPs (the range holds them; its size is not in the snapshot)",
      extent: "lower-bound",
    };
  return undefined;
}

/** CiliumNode `spec.ipam.podCIDRs` (cluster-pool IPAM): each node's pod ranges, cited. */
export function ciliumNodePodCidrs(
  objects: readonly KubeObject[],
): { readonly node: string; readonly cidr: Cidr; readonly source: SourceRef }[] {
  return objects.flatMap((o) => {
    if (o.kind !== "CiliumNode") return [];
    const spec = isRecord(o.raw["spec"]) ? o.raw["spec"] : {};
    const ipam = isRecord(spec["ipam"]) ? spec["ipam"] : {};
    const list = Array.isArray(ipam["podCIDRs"]) ? ipam["podCIDRs"] : [];
    return list.flatMap((c, i) =>
      typeof c === "string"
        ? cidrsOf(c).map((cidr) => ({
            node: o.name,
            cidr,
            source: o.locate(["spec", "ipam", "podCIDRs", i]) ?? o.source,
          }))
        : [],
    );
  });
}

/** One node's interfaces as its `ip addr` shows them (`nodes/<node>/ip-addr`). */
export interface NodeInterfaces {
  readonly node: string;
  readonly interfaces: readonly NetInterface[];
}

/**
 * The subnet of each node's own address: the interface whose primary address is the node's
 * InternalIP, cited at the `ip addr` line. Nodes without `ip addr` give none.
 */
export function nodeSubnetsOf(
  internalIps: readonly { readonly node: string; readonly ip: { family: 4 | 6; value: bigint } }[],
  nodes: readonly NodeInterfaces[],
): { readonly node: string; readonly cidr: Cidr; readonly source: SourceRef }[] {
  const out: { node: string; cidr: Cidr; source: SourceRef }[] = [];
  for (const n of nodes) {
    for (const iface of n.interfaces) {
      if (iface.name === "lo") continue;
      for (const family of [4, 6] as const) {
        const a = primaryAddress(iface, family);
        if (!a) continue;
        if (
          internalIps.some(
            (x) => x.node === n.node && x.ip.family === family && x.ip.value === a.local.value,
          )
        )
          out.push({ node: n.node, cidr: a.cidr, source: a.source });
      }
    }
  }
  return out;
}
