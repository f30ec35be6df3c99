/**
 * @module cases/masquerade/owners/cilium-facts — what a snapshot says about Cilium's masquerade on
 * one node (or GKE Dataplane V2's anetd, which runs Cilium): the mode (the node's `cilium-dbg
 * status` Masquerading line, else cilium-config, else Cilium's masquerade rule in the node's
 * iptables dump), the SNAT exclusion CIDR, the ip-masq-agent map (the node's `cilium-dbg bpf
 * ipmasq list`, else what Cilium writes from the ip-masq-agent ConfigMap and GKE's
 * EgressNATPolicy objects), and from these the source a pod packet leaves with
 * (agents/cilium/bpf-masquerade), each part with the line that says it.
 */
import {
  type BpfVerdict,
  bpfMasqueradeVerdict,
  type MapEntry,
} from "../../../agents/cilium/bpf-masquerade.ts";
import {
  type CiliumConfig,
  KEY_BPF_MASQ,
  KEY_IPV4_MASQ,
  KEY_IPV6_MASQ,
  readCiliumConfig,
} from "../../../agents/cilium/config.ts";
import {
  type EgressNatPolicy,
  readEgressNatPolicies,
} from "../../../agents/cilium/egress-nat-policy.ts";
import {
  type CiliumIpMasqIntent,
  findIpMasqConfigMap,
  readCiliumIpMasqIntent,
} from "../../../agents/cilium/ip-masq-agent.ts";
import { type IpMasqList, readIpMasqList } from "../../../agents/cilium/ipmasq-list.ts";
import { MASQ_COMMENT, POST_NAT_CHAIN } from "../../../agents/cilium/rules.ts";
import { type MasqueradingStatus, readCiliumStatus } from "../../../agents/cilium/status.ts";
import type { KubeObject } from "../../../evidence/kube-objects.ts";
import type { Rule } from "../../../iptables/dump.ts";
import { factsOfRule } from "../../../iptables/owners.ts";
import type { Diagnostic, SourceRef } from "../../../model/types.ts";
import type { Cidr, Ip } from "../../../net/cidr.ts";
import { rawWord, sh } from "../../../report/shell-quote.ts";
import { ownerTexts, type Snapshot } from "../../../snapshot/load.ts";
import type { ClusterFacts } from "../facts.ts";
import { anyNodeHasNatChain, natChainsMatching } from "./nat-chains.ts";

const EBPF_DAEMONSETS = /^(anetd|cilium)$/;

/** Cluster-wide Cilium objects of a snapshot. */
export interface CiliumObjects {
  readonly daemonSet?: KubeObject;
  readonly config?: CiliumConfig;
  readonly ipMasq: CiliumIpMasqIntent;
  readonly ipMasqConfigMap?: KubeObject;
  readonly policies: readonly EgressNatPolicy[];
  readonly diagnostics: readonly Diagnostic[];
}

export function ciliumObjects(snap: Snapshot): CiliumObjects {
  const cfg = readCiliumConfig(snap.objects);
  const ipm = readCiliumIpMasqIntent(snap.objects);
  const pol = readEgressNatPolicies(snap.objects);
  const daemonSet = snap.objects.find(
    (o) => o.kind === "DaemonSet" && o.namespace === "kube-system" && EBPF_DAEMONSETS.test(o.name),
  );
  const ipMasqConfigMap = findIpMasqConfigMap(snap.objects);
  return {
    ...(daemonSet ? { daemonSet } : {}),
    ...(cfg.value ? { config: cfg.value } : {}),
    ipMasq: ipm.value,
    ...(ipMasqConfigMap ? { ipMasqConfigMap } : {}),
    policies: pol.value,
    diagnostics: [
      ...cfg.diagnostics,
      ...(ipMasqConfigMap ? ipm.diagnostics : []),
      ...pol.diagnostics,
    ],
  };
}

/** The DaemonSet's name for commands: anetd on GKE Dataplane V2, else cilium. */
export function agentName(objs: CiliumObjects): string {
  return objs.daemonSet?.name ?? "cilium";
}

/** `kubectl exec` into the agent (the pod on `node` when the snapshot has it). */
export function execCommand(
  snap: Snapshot,
  objs: CiliumObjects,
  node: string,
  cmd: string,
): string {
  const pod = snap.objects.find(
    (o) =>
      o.kind === "Pod" &&
      o.namespace === "kube-system" &&
      EBPF_DAEMONSETS.test(o.labels["k8s-app"] ?? "") &&
      (o.raw["spec"] as Record<string, unknown> | undefined)?.["nodeName"] === node,
  );
  const target = pod ? `pod/${pod.name}` : `ds/${agentName(objs)}`;
  // the pod and the node come from the snapshot; `cmd` is podpath's own words
  return pod
    ? sh`kubectl -n kube-system exec ${target} -- ${rawWord(cmd)}`
    : sh`kubectl -n kube-system exec ${target} -- ${rawWord(cmd)}   # the agent pod on ${node}`;
}

export function nodeStatus(
  snap: Snapshot,
  node: string,
): { status?: MasqueradingStatus; diagnostics: Diagnostic[] } {
  const t = ownerTexts(snap.nodes.get(node), "cilium-status")[0];
  if (!t) return { diagnostics: [] };
  const r = readCiliumStatus(t.text, t.file);
  return { ...(r.value ? { status: r.value } : {}), diagnostics: r.diagnostics };
}

export function nodeIpMasqList(
  snap: Snapshot,
  node: string,
): { list?: IpMasqList; diagnostics: Diagnostic[] } {
  const t = ownerTexts(snap.nodes.get(node), "cilium-bpf-ipmasq")[0];
  if (!t) return { diagnostics: [] };
  const r = readIpMasqList(t.text, t.file);
  return { list: r.value, diagnostics: r.diagnostics };
}

/** Cilium's catch-all masquerade rule in the node's dump (iptables mode), if there. */
export function ciliumMasqRules(snap: Snapshot, node: string): Rule[] {
  const out: Rule[] = [];
  for (const dump of [snap.nodes.get(node)?.iptables, snap.nodes.get(node)?.ip6tables]) {
    const chain = dump?.tables.get("nat")?.chains.get(POST_NAT_CHAIN);
    for (const r of chain?.rules ?? []) if (factsOfRule(r).comment === MASQ_COMMENT) out.push(r);
  }
  return out;
}

export type CiliumMode = "BPF" | "IPTables" | "Disabled";

/** The mode on a node and the line that says it, or undefined when nothing says. */
export interface ModeFact {
  readonly mode: CiliumMode;
  readonly via: "status" | "config" | "rules";
  readonly source: SourceRef;
  readonly status?: MasqueradingStatus;
}

export function nodeMode(
  snap: Snapshot,
  objs: CiliumObjects,
  node: string,
  family: 4 | 6 = 4,
): ModeFact | undefined {
  const { status } = nodeStatus(snap, node);
  if (status) {
    const famOff = family === 4 ? status.ipv4 === false : status.ipv6 === false;
    return {
      mode: famOff ? "Disabled" : status.mode,
      via: "status",
      source: status.source,
      status,
    };
  }
  const cfg = objs.config;
  if (cfg) {
    const s = cfg.settings;
    const masqKey = family === 4 ? KEY_IPV4_MASQ : KEY_IPV6_MASQ;
    const on = family === 4 ? s.ipv4Masquerade : s.ipv6Masquerade;
    const ref = (key: string) => cfg.entries.get(key)?.source ?? cfg.configMap.source;
    if (!on) return { mode: "Disabled", via: "config", source: ref(masqKey) };
    return { mode: s.bpfMasquerade ? "BPF" : "IPTables", via: "config", source: ref(KEY_BPF_MASQ) };
  }
  const rule = ciliumMasqRules(snap, node)[0];
  if (rule) return { mode: "IPTables", via: "rules", source: rule.source };
  return undefined;
}

/** The BPF datapath's facts on a node, each part cited. */
export function bpfFacts(
  snap: Snapshot,
  facts: ClusterFacts,
  objs: CiliumObjects,
  node: string,
  mode: ModeFact,
  family: 4 | 6,
): {
  facts: Parameters<typeof bpfMasqueradeVerdict>[0];
  mapFrom?: "node" | "config" | "egress-nat-policy";
} {
  const cfg = objs.config;
  const st = mode.status;
  const view = facts.nodes.find((n) => n.name === node);
  let exclusion: { cidr: Cidr; source?: SourceRef } | undefined;
  const stCidr = family === 4 ? st?.snatExclusionCidr : st?.snatExclusionCidrV6;
  if (stCidr) exclusion = { cidr: stCidr, source: st!.source };
  else if (cfg) {
    const c =
      family === 4 ? cfg.settings.ipv4NativeRoutingCidr : cfg.settings.ipv6NativeRoutingCidr;
    const e = family === 4 ? cfg.nativeRoutingEntry : cfg.entries.get("ipv6-native-routing-cidr");
    if (c) exclusion = { cidr: c, ...(e ? { source: e.source } : {}) };
    else {
      // no native-routing CIDR: the datapath excludes the node's own pod CIDR
      const pc = view?.podCIDRs.find((p) => p.cidr.family === family);
      if (pc) exclusion = { cidr: pc.cidr, source: pc.source };
    }
  }
  const ipMasqAgent = st ? st.ipMasqAgent : (cfg?.settings.ipMasqAgent ?? false);
  let map: { entries: MapEntry[]; from: "node" | "config" } | undefined;
  let mapFrom: "node" | "config" | "egress-nat-policy" | undefined;
  const listed = nodeIpMasqList(snap, node).list;
  if (listed && (listed.entries.length > 0 || listed.empty)) {
    map = {
      entries: listed.entries.map((e) => ({ text: e.text, cidr: e.cidr, source: e.source })),
      from: "node",
    };
    mapFrom = "node";
  } else if (objs.policies.some((p) => p.destinations.length > 0)) {
    map = {
      entries: objs.policies.flatMap((p) =>
        p.destinations.map((d) => ({ text: d.text, cidr: d.cidr, source: d.source })),
      ),
      from: "config",
    };
    mapFrom = "egress-nat-policy";
  } else if (objs.ipMasqConfigMap && objs.ipMasq.entries) {
    map = {
      entries: objs.ipMasq.entries.map((e) => ({
        text: e.text,
        cidr: e.cidr,
        ...(e.source ? { source: e.source } : {}),
      })),
      from: "config",
    };
    mapFrom = "config";
  }
  const nodeIps = facts.nodes.flatMap((n) => n.internalIPs.map((a) => a.ip));
  return {
    facts: {
      ...(exclusion ? { exclusion } : {}),
      exclusionKnown: cfg !== undefined || st !== undefined,
      ipMasqAgent,
      ...(map ? { map } : {}),
      nodeIps,
      ...(cfg ? { nativeRouting: cfg.settings.nativeRouting } : {}),
    },
    ...(mapFrom ? { mapFrom } : {}),
  };
}

/** The BPF verdict for a pod packet on `node` toward `dst`, with the facts it stood on. */
export function bpfDecision(
  snap: Snapshot,
  facts: ClusterFacts,
  objs: CiliumObjects,
  node: string,
  mode: ModeFact,
  dst: Ip,
): { verdict: BpfVerdict; mapFrom?: "node" | "config" | "egress-nat-policy"; exclusion?: Cidr } {
  const f = bpfFacts(snap, facts, objs, node, mode, dst.family);
  return {
    verdict: bpfMasqueradeVerdict(f.facts, dst),
    ...(f.mapFrom ? { mapFrom: f.mapFrom } : {}),
    ...(f.facts.exclusion ? { exclusion: f.facts.exclusion.cidr } : {}),
  };
}

/** Cilium is at work in this snapshot: its objects, its node files, or its chains. */
export function ciliumPresent(snap: Snapshot): boolean {
  const objs = snap.objects;
  if (
    objs.some(
      (o) =>
        o.namespace === "kube-system" &&
        ((o.kind === "DaemonSet" && EBPF_DAEMONSETS.test(o.name)) ||
          (o.kind === "ConfigMap" && o.name === "cilium-config")),
    )
  ) {
    return true;
  }
  for (const n of snap.nodes.values()) {
    if (ownerTexts(n, "cilium-status").length > 0 || ownerTexts(n, "cilium-bpf-ipmasq").length > 0)
      return true;
    if (natChainsMatching(n.iptables, /^CILIUM_/).length > 0) return true;
  }
  return false;
}

/** The upstream ip-masq-agent (or GKE's node startup) writes rules here: its DaemonSet or chains. */
export function upstreamAgentAtWork(snap: Snapshot): boolean {
  return (
    snap.objects.some(
      (o) =>
        o.kind === "DaemonSet" && o.namespace === "kube-system" && /^ip-masq-agent/.test(o.name),
    ) || anyNodeHasNatChain(snap, /^IP-MASQ/)
  );
}
