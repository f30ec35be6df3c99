/**
 * @module agents/cilium/bpf-masquerade — whether Cilium's BPF masquerade rewrites a pod packet's
 * source, in the order bpf/lib/nat.h `snat_v4_needs_masquerade` (and its v6 twin) asks: a
 * destination inside IPV4_SNAT_EXCLUSION_DST_CIDR (the native-routing CIDR) keeps the pod's
 * address; then, with the ip-masq-agent on, a destination in the `cilium_ipmasq_v4` LPM map keeps
 * it; then a remote node of the cluster keeps it in native routing; anything else from a local
 * endpoint is masqueraded to the node's address on the egress device. Egress gateway policies
 * (checked first by the datapath) are not modelled. Pure: the caller gathers the facts and cites.
 */
import type { SourceRef } from "../../model/types.ts";
import { type Cidr, contains, type Ip, sameIp } from "../../net/cidr.ts";

/** One CIDR of the map (as listed on the node, or as Cilium would write it from its config). */
export interface MapEntry {
  readonly text: string;
  readonly cidr: Cidr;
  readonly source?: SourceRef;
}

export interface BpfMasqFacts {
  /** The SNAT exclusion CIDR (status line, else the native-routing CIDR of cilium-config). */
  readonly exclusion?: { readonly cidr: Cidr; readonly source?: SourceRef };
  /** The exclusion CIDR is known to be unset (cilium-config read, no native-routing CIDR). */
  readonly exclusionKnown: boolean;
  readonly ipMasqAgent: boolean;
  /** The map's entries; undefined when neither the node's listing nor the config says. */
  readonly map?: { readonly entries: readonly MapEntry[]; readonly from: "node" | "config" };
  readonly nodeIps: readonly Ip[];
  readonly nativeRouting?: boolean;
}

export type BpfVerdict =
  | {
      readonly kind: "keep";
      readonly why: "snat-exclusion-cidr" | "ip-masq-agent" | "remote-node";
      readonly entry?: MapEntry;
      readonly source?: SourceRef;
    }
  | { readonly kind: "masquerade" }
  | { readonly kind: "unknown"; readonly missing: "exclusion" | "map" };

/** The longest-prefix entry of `entries` holding `dst` (the map is an LPM trie). */
export function lpmLookup(entries: readonly MapEntry[], dst: Ip): MapEntry | undefined {
  return entries
    .filter((e) => e.cidr.family === dst.family && contains(e.cidr, dst))
    .sort((a, b) => b.cidr.prefix - a.cidr.prefix)[0];
}

/** What the datapath does to a pod packet toward `dst`. */
export function bpfMasqueradeVerdict(facts: BpfMasqFacts, dst: Ip): BpfVerdict {
  const ex = facts.exclusion;
  if (ex && ex.cidr.family === dst.family && contains(ex.cidr, dst)) {
    return {
      kind: "keep",
      why: "snat-exclusion-cidr",
      ...(ex.source ? { source: ex.source } : {}),
    };
  }
  if (!ex && !facts.exclusionKnown) return { kind: "unknown", missing: "exclusion" };
  if (facts.ipMasqAgent) {
    if (!facts.map) return { kind: "unknown", missing: "map" };
    const e = lpmLookup(facts.map.entries, dst);
    if (e)
      return {
        kind: "keep",
        why: "ip-masq-agent",
        entry: e,
        ...(e.source ? { source: e.source } : {}),
      };
  }
  if (facts.nativeRouting && facts.nodeIps.some((n) => sameIp(n, dst))) {
    return { kind: "keep", why: "remote-node" };
  }
  return { kind: "masquerade" };
}
