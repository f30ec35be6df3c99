/**
 * @module cases/masquerade/owners/cilium — the masquerade case on a node whose pod source is
 * decided by Cilium (or GKE Dataplane V2's anetd, which runs it). With BPF masquerade
 * (`Masquerading: BPF …`) the source is decided outside iptables, from the SNAT exclusion CIDR
 * (native-routing CIDR), the ip-masq-agent map (`cilium-dbg bpf ipmasq list`, else the
 * ip-masq-agent ConfigMap Cilium reads, or GKE's EgressNATPolicy) and the cluster's nodes; with
 * iptables masquerade (`Masquerading: IPTables`) the node's CILIUM_POST_nat rules decide and this
 * module words what they kept. Fixes are in Cilium's terms: the ip-masq-agent ConfigMap (picked
 * up by the agent without a restart) or cilium-config keys with a rollout restart of the agent.
 */

import type { BpfVerdict } from "../../../agents/cilium/bpf-masquerade.ts";
import {
  CILIUM_SETTING_KEYS,
  type CiliumConfig,
  type ConfigEntry,
  KEY_IPV4_MASQ,
  KEY_IPV4_NATIVE,
  KEY_IPV6_MASQ,
  KEY_IPV6_NATIVE,
} from "../../../agents/cilium/config.ts";
import { noSnatDestinationFor } from "../../../agents/cilium/egress-nat-policy.ts";
import {
  CILIUM_DEFAULT_NON_MASQ_CIDRS,
  nonMasqEntryFor,
  renderCiliumIpMasqConfig,
} from "../../../agents/cilium/ip-masq-agent.ts";
import { NODE_SET_COMMENT, NODE_SET_V4, NODE_SET_V6 } from "../../../agents/cilium/rules.ts";
import { attributeRule, factsOfRule, ruleAtLine } from "../../../iptables/owners.ts";
import { renderRule } from "../../../iptables/render.ts";
import {
  type Diagnostic,
  type Evidence,
  type Missing,
  refToEvidence,
  type SourceRef,
} from "../../../model/types.ts";
import {
  contains,
  type Family,
  formatCidr,
  formatIp,
  type Ip,
  tryParseCidr,
} from "../../../net/cidr.ts";
import { quoted, rawWord, sh } from "../../../report/shell-quote.ts";
import type { Snapshot } from "../../../snapshot/load.ts";
import { type ClusterFacts, clusterFacts } from "../facts.ts";
import {
  agentName,
  bpfDecision,
  type CiliumObjects,
  ciliumMasqRules,
  ciliumObjects,
  ciliumPresent,
  execCommand,
  type ModeFact,
  nodeIpMasqList,
  nodeMode,
  nodeStatus,
  upstreamAgentAtWork,
} from "./cilium-facts.ts";
import type {
  ExemptWording,
  OwnerDecideInput,
  OwnerExempt,
  OwnerExemptInput,
  OwnerPlan,
  OwnerPlanInput,
  OwnerSetting,
  OwnerSourceDecision,
  OwnerWireWording,
  SourceOwnerCase,
} from "./owner.ts";
import { ruleOwner } from "./rule-owner.ts";

const CM_CMD = "kubectl -n kube-system get configmap cilium-config ip-masq-agent -o yaml";
const IPMASQ_LIST = "cilium-dbg bpf ipmasq list";
const STATUS = "cilium-dbg status --verbose";
const restart = (ds: string) => sh`kubectl -n kube-system rollout restart ds/${ds}`;
const rolloutStatus = (ds: string) => sh`kubectl -n kube-system rollout status ds/${ds}`;

const refText = (ref: SourceRef) =>
  `${ref.file}:${ref.line}${ref.text ? ` (${ref.text.trim()})` : ""}`;

/** cilium-config's masquerade switch for a family (enable-ipv4-masquerade / enable-ipv6-masquerade). */
const masqKey = (family: Family) => (family === 4 ? KEY_IPV4_MASQ : KEY_IPV6_MASQ);

/**
 * The entry that sets the family's native-routing CIDR (IPv4: either key name), and the key a fix
 * writes: Cilium's SNAT exclusion CIDR is ipv4-native-routing-cidr / ipv6-native-routing-cidr
 * (pkg/datapath/iptables/iptables.go remoteSNATDstAddrExclusionCIDR, one per family).
 */
function nativeEntry(
  cfg: CiliumConfig | undefined,
  family: Family,
): { key: string; entry?: ConfigEntry } {
  if (family === 4) {
    const entry = cfg?.nativeRoutingEntry;
    return { key: entry?.key ?? KEY_IPV4_NATIVE, ...(entry ? { entry } : {}) };
  }
  const entry = cfg?.entries.get(KEY_IPV6_NATIVE);
  return { key: KEY_IPV6_NATIVE, ...(entry ? { entry } : {}) };
}

/** The family's pod ranges (the native-routing CIDR of one family must hold that family's pods). */
const rangesOf = (ranges: readonly string[], family: Family) =>
  ranges.filter((r) => {
    const c = tryParseCidr(r);
    return "cidr" in c && c.cidr.family === family;
  });

/** Why Cilium kept the pod's address, with the line that says so. */
interface Kept {
  readonly why:
    | "ip-masq-agent"
    | "snat-exclusion-cidr"
    | "remote-node"
    | "disabled"
    | "iptables-exclusion"
    | "node-set";
  /** The CIDR (map entry, exclusion CIDR) that kept it. */
  readonly cidr?: string;
  readonly ref?: SourceRef;
  /** ip-masq-agent map entries: where the entry comes from. */
  readonly mapFrom?: "node" | "config" | "egress-nat-policy";
  readonly mode: ModeFact;
  /** The flow's family: Cilium's settings and rules are per family. */
  readonly family: Family;
}

function keptOf(
  verdict: BpfVerdict,
  mode: ModeFact,
  family: Family,
  mapFrom: Kept["mapFrom"],
  exclusion?: string,
): Kept | undefined {
  if (verdict.kind !== "keep") return undefined;
  if (verdict.why === "ip-masq-agent") {
    return {
      why: "ip-masq-agent",
      ...(verdict.entry ? { cidr: formatCidr(verdict.entry.cidr) } : {}),
      ...(verdict.source ? { ref: verdict.source } : {}),
      ...(mapFrom ? { mapFrom } : {}),
      mode,
      family,
    };
  }
  if (verdict.why === "snat-exclusion-cidr") {
    return {
      why: "snat-exclusion-cidr",
      ...(exclusion ? { cidr: exclusion } : {}),
      ...(verdict.source ? { ref: verdict.source } : {}),
      mode,
      family,
    };
  }
  return { why: "remote-node", mode, family };
}

/** The source decided by Cilium's BPF masquerade (undefined: iptables decides, or not Cilium's). */
function ciliumDecide(input: OwnerDecideInput): OwnerSourceDecision | undefined {
  const { snap, facts, src, target } = input;
  if (src.kind !== "pod" || !ciliumPresent(snap)) return undefined;
  const objs = ciliumObjects(snap);
  const mode = nodeMode(snap, objs, src.node, target.ip.family);
  if (!mode) return undefined;
  const nodeIp = facts.nodes
    .find((n) => n.name === src.node)
    ?.internalIPs.find((a) => a.ip.family === target.ip.family)?.ip;
  const dst = formatIp(target.ip);
  if (mode.mode === "Disabled") {
    return {
      decision: "keep",
      sourceOut: src.ip,
      decidedBy: mode.source,
      label: `Cilium: masquerading disabled (${mode.via === "status" ? "cilium-dbg status" : masqKey(target.ip.family)}): source kept`,
    };
  }
  if (mode.mode === "IPTables") {
    const nodeEv = snap.nodes.get(src.node);
    if (target.ip.family === 4 ? nodeEv?.iptables : nodeEv?.ip6tables) return undefined; // the rules decide
    const save = target.ip.family === 4 ? "iptables-save" : "ip6tables-save";
    return {
      decision: "cannot-decide",
      label: "Cilium masquerades with iptables: the node's rules are not in the snapshot",
      undecided: `Cilium masquerades with ${target.ip.family === 4 ? "iptables" : "ip6tables"} on ${src.node} (${refText(mode.source)}); its CILIUM_POST_nat rules decide`,
      missing: [
        {
          file: `nodes/${src.node}/${save}.txt`,
          would_decide: `Cilium's CILIUM_POST_nat rules on ${src.node}, and so the source its pods' packets to ${dst} leave with`,
          command: `${save} -t nat   # on ${src.node}`,
        },
      ],
    };
  }
  const d = bpfDecision(snap, facts, objs, src.node, mode, target.ip);
  const v = d.verdict;
  if (v.kind === "unknown") {
    const missing: Missing[] =
      v.missing === "map"
        ? [
            {
              file: `nodes/${src.node}/cilium-bpf-ipmasq.txt`,
              would_decide: `whether ${dst} is in Cilium's ip-masq-agent map on ${src.node} (not masqueraded) or not (masqueraded to the node's address)`,
              command: execCommand(snap, objs, src.node, IPMASQ_LIST),
            },
          ]
        : [
            {
              file: `nodes/${src.node}/cilium-status.txt`,
              would_decide: `Cilium's SNAT exclusion CIDR on ${src.node} (the Masquerading line): destinations in it keep the pod's address`,
              command: execCommand(snap, objs, src.node, STATUS),
            },
          ];
    return {
      decision: "cannot-decide",
      label: `Cilium BPF masquerade: ${v.missing === "map" ? "the ip-masq-agent map is not in the snapshot" : "the SNAT exclusion CIDR is not known"}`,
      undecided: `Cilium masquerades in eBPF on ${src.node} (${refText(mode.source)}) and ${v.missing === "map" ? "its ip-masq-agent map decides; neither the node's listing nor the ip-masq-agent ConfigMap is in the snapshot" : "neither cilium-config nor the node's status gives the SNAT exclusion CIDR"}`,
      missing,
    };
  }
  if (v.kind === "masquerade") {
    return {
      decision: "masquerade",
      ...(nodeIp ? { sourceOut: nodeIp } : {}),
      decidedBy: mode.source,
      label: `Cilium BPF masquerade: ${dst} is outside ${d.exclusion ? formatCidr(d.exclusion) : "the SNAT exclusion CIDR"}${objs.config?.settings.ipMasqAgent || mode.status?.ipMasqAgent ? " and not in the ip-masq-agent map" : ""}: MASQUERADE → ${nodeIp ? formatIp(nodeIp) : "the node's address"}`,
    };
  }
  const kept = keptOf(
    v,
    mode,
    target.ip.family,
    d.mapFrom,
    d.exclusion ? formatCidr(d.exclusion) : undefined,
  )!;
  return {
    decision: "keep",
    sourceOut: src.ip,
    ...(kept.ref ? { decidedBy: kept.ref } : { decidedBy: mode.source }),
    label:
      kept.why === "ip-masq-agent"
        ? `Cilium BPF ip-masq-agent: ${dst} is in ${kept.cidr} (${kept.mapFrom === "node" ? "cilium_ipmasq map" : kept.mapFrom === "egress-nat-policy" ? "EgressNATPolicy NoSNAT" : "ip-masq-agent ConfigMap"}): not masqueraded`
        : kept.why === "snat-exclusion-cidr"
          ? `Cilium BPF masquerade: ${dst} is inside the SNAT exclusion CIDR ${kept.cidr ?? ""} (native-routing CIDR): not masqueraded`
          : `Cilium BPF masquerade: ${dst} is a node of the cluster (native routing): not masqueraded`,
  };
}

/** Why the pod's address was kept, when Cilium kept it (BPF verdict or its iptables rules). */
function keptBy(input: OwnerExemptInput): Kept | undefined {
  const { snap, src, target, rule } = input;
  if (src.kind !== "pod" || !ciliumPresent(snap)) return undefined;
  const objs = ciliumObjects(snap);
  const family = target.ip.family;
  const mode = nodeMode(snap, objs, src.node, family);
  if (!mode) return undefined;
  if (mode.mode === "Disabled") return { why: "disabled", ref: mode.source, mode, family };
  if (mode.mode === "BPF") {
    const d = bpfDecision(snap, factsFor(snap), objs, src.node, mode, target.ip);
    return keptOf(
      d.verdict,
      mode,
      family,
      d.mapFrom,
      d.exclusion ? formatCidr(d.exclusion) : undefined,
    );
  }
  // iptables: another owner's rule decided → not Cilium's
  const owned = ruleOwner(snap, src.node, rule) ?? ip6RuleOwner(snap, src.node, rule);
  if (owned && owned.attribution.owner !== "cilium" && owned.attribution.owner !== "kube-proxy")
    return undefined;
  if (
    owned?.attribution.owner === "cilium" &&
    factsOfRule(owned.rule).comment === NODE_SET_COMMENT
  ) {
    return { why: "node-set", ref: owned.rule.source, mode, family };
  }
  const masq = ciliumMasqRules(snap, src.node).find(
    (r) =>
      r.dst?.negated && r.dst.cidr.family === target.ip.family && contains(r.dst.cidr, target.ip),
  );
  if (!masq?.dst) return undefined;
  return {
    why: "iptables-exclusion",
    cidr: formatCidr(masq.dst.cidr),
    ref: masq.source,
    mode,
    family,
  };
}

const factsFor = (snap: Snapshot) => clusterFacts(snap.objects);

/** The rule at `ref` in the node's ip6tables dump (an IPv6 flow's rule), and who wrote it. */
function ip6RuleOwner(snap: Snapshot, node: string, ref: SourceRef | undefined) {
  const dump = snap.nodes.get(node)?.ip6tables;
  const rule = dump && ref ? ruleAtLine(dump.tables, ref.file, ref.line) : undefined;
  return rule ? { rule, attribution: attributeRule(factsOfRule(rule)) } : undefined;
}

/** The fix for one kept destination, in Cilium's terms. */
interface Fix {
  readonly text: string;
  readonly commands: readonly string[];
  readonly rollback: readonly string[];
  readonly evidence: readonly SourceRef[];
  /** The manifest the plan writes (the ip-masq-agent ConfigMap Cilium reads). */
  readonly file?: { readonly file: string; readonly content: string };
  /** The nonMasqueradeCIDRs afterwards. */
  readonly keep?: readonly string[];
}

function nativeRoutingFix(
  objs: CiliumObjects,
  podRanges: string[],
  cidr: string | undefined,
  family: Family,
): Fix {
  const { key, entry: e } = nativeEntry(objs.config, family);
  const ds = agentName(objs);
  const to = coveringCidr(rangesOf(podRanges, family)) ?? "<the pods' CIDR>";
  return {
    text: `narrow ${key} in the cilium-config ConfigMap from ${cidr ?? e?.value ?? "its value"} to the pods' own range (${to}), so that only pod-to-pod traffic keeps pod addresses, and restart the agent (it reads cilium-config at start): a behaviour change, every destination outside ${to} then sees node addresses`,
    commands: [
      sh`kubectl -n kube-system patch configmap cilium-config --type merge -p ${quoted(JSON.stringify({ data: { [key]: to } }))}`,
      restart(ds),
      rolloutStatus(ds),
    ],
    rollback: [
      sh`kubectl -n kube-system patch configmap cilium-config --type merge -p ${quoted(JSON.stringify({ data: { [key]: e?.value ?? cidr ?? "" } }))}   # rollback: the previous value`,
      restart(ds),
    ],
    evidence: e ? [e.source] : [],
  };
}

/** The ip-masq-agent ConfigMap Cilium reads, with `keep` as its nonMasqueradeCIDRs. */
function ipMasqManifest(keep: readonly string[], intent: CiliumObjects["ipMasq"]): string {
  const config = renderCiliumIpMasqConfig(keep, intent)
    .trimEnd()
    .split("\n")
    .map((l) => `    ${l}`)
    .join("\n");
  return `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ip-masq-agent\n  namespace: kube-system\ndata:\n  config: |\n${config}\n`;
}

function ipMasqFix(objs: CiliumObjects, kept: Kept, dst: Ip, podRanges: string[]): Fix {
  const cidr = kept.cidr ?? "";
  if (kept.mapFrom === "egress-nat-policy") {
    const d = noSnatDestinationFor(objs.policies, dst);
    const name = d?.policy ?? "default";
    if (d?.managed) {
      return {
        text: `${cidr} is listed by the GKE-managed EgressNATPolicy ${name}, which cannot be edited: route the pod range back at the far side`,
        commands: [sh`kubectl get egressnatpolicy ${name} -o yaml`],
        rollback: [],
        evidence: d ? [d.source] : [],
      };
    }
    return {
      text: `take ${cidr} out of spec.destinations of the EgressNATPolicy ${name} (GKE Dataplane V2 then masquerades it to the node's address)`,
      commands: [
        sh`kubectl get egressnatpolicy ${name} -o yaml > egressnatpolicy-${name}.before.yaml`,
        sh`kubectl edit egressnatpolicy ${name}   # remove the destination ${cidr}`,
      ],
      rollback: [sh`kubectl replace -f egressnatpolicy-${name}.before.yaml   # rollback`],
      evidence: d ? [d.source] : [],
    };
  }
  const intent = objs.ipMasq;
  const listed = (intent.entries ?? []).filter((e) => e.origin === "config").map((e) => e.text);
  const base =
    objs.ipMasqConfigMap && !intent.usesDefaults ? listed : [...CILIUM_DEFAULT_NON_MASQ_CIDRS];
  const keep = base.filter((c) => c !== cidr);
  // pod-to-pod traffic stays unmasqueraded: the native-routing CIDR already exempts what it holds
  const native =
    dst.family === 4
      ? objs.config?.settings.ipv4NativeRoutingCidr
      : objs.config?.settings.ipv6NativeRoutingCidr;
  for (const r of rangesOf(podRanges, dst.family)) {
    const c = tryParseCidr(r);
    const covered = "cidr" in c && native !== undefined && contains(native, c.cidr);
    if (!covered && !keep.includes(r)) keep.push(r);
  }
  const content = ipMasqManifest(keep, intent);
  const entry = nonMasqEntryFor(intent.entries ?? [], dst);
  const ds = agentName(objs);
  return {
    text:
      `take ${cidr} out of nonMasqueradeCIDRs in the ip-masq-agent ConfigMap that Cilium reads (kube-system/ip-masq-agent, key config, at /etc/config/ip-masq-agent)` +
      (intent.usesDefaults || !objs.ipMasqConfigMap
        ? `; Cilium runs on its eleven defaults without one, and a list replaces all of them, so the new list names what stays (${keep.join(", ")})`
        : "") +
      `; the agent reloads the file when the kubelet refreshes the mount (about a minute), no restart: a behaviour change, ${cidr} then sees node addresses`,
    commands: [
      "kubectl -n kube-system get configmap ip-masq-agent -o yaml > ip-masq-agent.before.yaml",
      sh`kubectl -n kube-system edit configmap ip-masq-agent   # nonMasqueradeCIDRs: ${rawWord(keep.join(", "))}`,
      sh`kubectl -n kube-system exec ${`ds/${ds}`} -- ${rawWord(IPMASQ_LIST)}   # after about a minute, on each node's agent: ${rawWord(String(cidr))} gone`,
    ],
    rollback: [
      objs.ipMasqConfigMap
        ? "kubectl replace -f ip-masq-agent.before.yaml   # rollback"
        : "kubectl -n kube-system delete configmap ip-masq-agent   # rollback: back to Cilium's defaults",
    ],
    evidence: [
      ...(kept.ref ? [kept.ref] : []),
      ...(entry?.source ? [entry.source] : []),
      ...(intent.configSource ? [intent.configSource] : []),
    ],
    file: { file: "ip-masq-agent.cilium.yaml", content },
    keep,
  };
}

function fixFor(objs: CiliumObjects, kept: Kept, dst: Ip, podRanges: string[]): Fix {
  switch (kept.why) {
    case "ip-masq-agent":
      return ipMasqFix(objs, kept, dst, podRanges);
    case "snat-exclusion-cidr":
    case "iptables-exclusion":
      return nativeRoutingFix(objs, podRanges, kept.cidr, kept.family);
    case "disabled": {
      const ds = agentName(objs);
      const key = masqKey(kept.family);
      return {
        text: `set ${key}: "true" in cilium-config and restart the agent: every ${kept.family === 4 ? "IPv4" : "IPv6"} destination outside the native-routing CIDR then sees node addresses`,
        commands: [
          sh`kubectl -n kube-system patch configmap cilium-config --type merge -p ${quoted(JSON.stringify({ data: { [key]: "true" } }))}`,
          restart(ds),
          rolloutStatus(ds),
        ],
        rollback: [
          sh`kubectl -n kube-system patch configmap cilium-config --type merge -p ${quoted(JSON.stringify({ data: { [key]: "false" } }))}   # rollback`,
          restart(ds),
        ],
        evidence: kept.ref ? [kept.ref] : [],
      };
    }
    case "remote-node":
    case "node-set":
      return {
        text: "the destination is a node of the cluster, which Cilium never masquerades to: pod-to-node traffic keeps pod addresses by design",
        commands: [],
        rollback: [],
        evidence: kept.ref ? [kept.ref] : [],
      };
  }
}

/**
 * The smallest CIDR that holds every pod range (the native-routing CIDR must hold all pods of the
 * cluster, not one node's range), or undefined when there is none or they mix families.
 */
export function coveringCidr(ranges: readonly string[]): string | undefined {
  const cidrs = ranges.flatMap((r) => {
    const c = tryParseCidr(r);
    return "cidr" in c ? [c.cidr] : [];
  });
  const first = cidrs[0];
  if (!first || cidrs.some((c) => c.family !== first.family)) return undefined;
  const bits = first.family === 4 ? 32 : 128;
  let start = first.start;
  let end = first.end;
  for (const c of cidrs) {
    if (c.start < start) start = c.start;
    if (c.end > end) end = c.end;
  }
  let prefix = Math.min(...cidrs.map((c) => c.prefix));
  const all = (1n << BigInt(bits)) - 1n;
  for (; prefix > 0; prefix--) {
    const host = (1n << BigInt(bits - prefix)) - 1n;
    const net = start & (all ^ host);
    if (net + host >= end) break;
  }
  const host = (1n << BigInt(bits - prefix)) - 1n;
  return formatCidr({
    family: first.family,
    start: start & (all ^ host),
    end: (start & (all ^ host)) + host,
    prefix,
  });
}

const podRangeTexts = (snap: Snapshot) => factsFor(snap).podRanges.map(formatCidr);

function whyText(kept: Kept, dst: string): string {
  const m =
    kept.mode.via === "status"
      ? `the node's cilium-dbg status says ${refText(kept.mode.source)}`
      : kept.mode.via === "config"
        ? `cilium-config says so (${refText(kept.mode.source)})`
        : `Cilium's own rule is installed (${refText(kept.mode.source)})`;
  switch (kept.why) {
    case "ip-masq-agent":
      return `Cilium masquerades in eBPF (${m}) and its ip-masq-agent map holds ${kept.cidr}${kept.ref ? ` (${refText(kept.ref)})` : ""}, so the datapath does not masquerade ${dst} (${kept.mapFrom === "node" ? "the node's cilium_ipmasq map as cilium-dbg bpf ipmasq list prints it" : kept.mapFrom === "egress-nat-policy" ? "GKE's EgressNATPolicy NoSNAT destination" : "as Cilium writes it from the ip-masq-agent ConfigMap; the node's listing is not in the snapshot"})`;
    case "snat-exclusion-cidr":
      return `Cilium masquerades in eBPF (${m}) but never inside its SNAT exclusion CIDR ${kept.cidr ?? ""}${kept.ref ? ` (${refText(kept.ref)})` : ""}, the native-routing CIDR, which holds ${dst}`;
    case "iptables-exclusion":
      return `Cilium masquerades with ${kept.family === 4 ? "iptables" : "ip6tables"} (${m}) and its rule ${kept.ref ? refText(kept.ref) : ""} masquerades only destinations outside ${kept.cidr}, the ${kept.family === 4 ? "" : "IPv6 "}native-routing CIDR (remoteSNATDstAddrExclusionCIDR), which holds ${dst}`;
    case "disabled":
      return `Cilium's masquerading is off (${refText(kept.ref ?? kept.mode.source)})`;
    case "node-set":
      return `Cilium's rule ${kept.ref ? refText(kept.ref) : ""} exempts the cluster's nodes (ipset ${kept.family === 4 ? NODE_SET_V4 : NODE_SET_V6}), and ${dst} is one`;
    case "remote-node":
      return `${dst} is a node of the cluster, which Cilium's datapath does not masquerade to in native routing`;
  }
}

function ciliumExempt(input: OwnerExemptInput): OwnerExempt {
  const kept = keptBy(input);
  if (!kept) return { kind: "not-mine" };
  const { snap, src, target, stops } = input;
  const dst = formatIp(target.ip);
  const why = whyText(kept, dst);
  const byDesign =
    kept.why === "remote-node" ||
    kept.why === "node-set" ||
    ((kept.why === "snat-exclusion-cidr" || kept.why === "iptables-exclusion") && !stops);
  if (byDesign) return { kind: "healthy", why };
  const objs = ciliumObjects(snap);
  const fix = fixFor(objs, kept, target.ip, podRangeTexts(snap));
  const evidence: Evidence[] = [];
  for (const r of [kept.ref, ...fix.evidence, kept.mode.source]) {
    if (r && !evidence.some((e) => e.file === r.file && e.line === r.line))
      evidence.push(refToEvidence(r));
  }
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const tag =
    kept.why === "ip-masq-agent"
      ? `Cilium ip-masq-agent: ${kept.mapFrom === "egress-nat-policy" ? "EgressNATPolicy" : "nonMasqueradeCIDRs"} entry ${kept.cidr}`
      : kept.why === "disabled"
        ? `Cilium: ${masqKey(kept.family)} false`
        : `Cilium: native-routing CIDR ${kept.cidr}`;
  const finding: ExemptWording = {
    severity: stops ? "error" : "warning",
    title: `Pod traffic to ${dst} keeps its pod source address ${formatIp(src.ip)} (${tag})`,
    subject: `node/${src.node}`,
    explanation:
      `A packet from pod ${formatIp(src.ip)} to ${dst} leaves ${src.node} with the pod's own address: ${why}. ` +
      `The node's own traffic carries the node's address${input.hostSource ? ` (${formatIp(input.hostSource)})` : ""}, which the far side knows: that is why the node reaches ${dst} and the pod does not. ` +
      (stops
        ? "The far side has no route back to the pod's address, so the replies vanish. "
        : "Unless the far side routes the pod's address back, the replies vanish. ") +
      `Fix: ${fix.text}; or keep pod addresses and route the pod range back at the far side.`,
    evidence,
    next: [
      CM_CMD,
      execCommand(snap, objs, src.node, `${STATUS} | grep -i masquerading`),
      ...(kept.mode.mode === "BPF"
        ? [execCommand(snap, objs, src.node, IPMASQ_LIST)]
        : [
            `${kept.family === 4 ? "iptables-save" : "ip6tables-save"} -t nat | grep CILIUM_POST_nat   # on ${src.node}`,
          ]),
      sh`tcpdump -ni any host ${dst}   # on ${src.node}: the pod address on the wire, no reply`,
      ...fix.commands,
      ...fix.rollback,
    ],
  };
  return { kind: "finding", finding };
}

function ciliumWireWording(snap: Snapshot): OwnerWireWording | undefined {
  if (!ciliumPresent(snap) || upstreamAgentAtWork(snap)) return undefined;
  const objs = ciliumObjects(snap);
  const modes = [...snap.nodes.keys()].flatMap((n) => nodeMode(snap, objs, n) ?? []);
  if (!objs.config && modes.length === 0) return undefined;
  const ipMasqAgent =
    objs.config?.settings.ipMasqAgent === true || modes.some((m) => m.status?.ipMasqAgent);
  const bpf = modes.some((m) => m.mode === "BPF") || objs.config?.settings.bpfMasquerade === true;
  // the wording is per snapshot, not per flow: with IPv6 masquerade on, both families' keys
  const v6 = objs.config?.settings.ipv6Masquerade ? ` (IPv6: ${KEY_IPV6_NATIVE})` : "";
  const native = `narrow ${objs.config?.nativeRoutingEntry?.key ?? KEY_IPV4_NATIVE}${v6} in cilium-config and restart the agent`;
  return {
    fix:
      bpf && ipMasqAgent
        ? `(Cilium: take the destination out of nonMasqueradeCIDRs in the ip-masq-agent ConfigMap it reads, or ${native})`
        : `(Cilium: ${native})`,
    next: [
      CM_CMD,
      sh`kubectl -n kube-system exec ds/${agentName(objs)} -- ${rawWord(STATUS)} | grep -i masquerading`,
    ],
  };
}

function ciliumSettings(snap: Snapshot): OwnerSetting[] {
  const objs = ciliumObjects(snap);
  const out: OwnerSetting[] = [];
  const cfg = objs.config;
  if (cfg) {
    for (const key of CILIUM_SETTING_KEYS) {
      const e = cfg.entries.get(key);
      if (e) out.push({ key: `cilium-config ${key}`, value: e.value, source: e.source });
      else if (
        key === KEY_IPV4_MASQ ||
        key === "enable-bpf-masquerade" ||
        key === "enable-ip-masq-agent"
      )
        out.push({ key: `cilium-config ${key}` });
    }
  }
  if (objs.ipMasqConfigMap) {
    const listed = (objs.ipMasq.entries ?? [])
      .filter((e) => e.origin === "config")
      .map((e) => e.text);
    out.push({
      key: "ip-masq-agent nonMasqueradeCIDRs (read by Cilium)",
      ...(objs.ipMasq.entries
        ? { value: objs.ipMasq.usesDefaults ? "(Cilium's defaults)" : listed.join(",") }
        : {}),
      ...(objs.ipMasq.configSource ? { source: objs.ipMasq.configSource } : {}),
    });
  }
  for (const p of objs.policies) {
    out.push({
      key: `EgressNATPolicy ${p.object.name} NoSNAT destinations`,
      value: p.destinations.map((d) => d.text).join(","),
      source: p.object.source,
    });
  }
  return out;
}

function ciliumIntendedFor(snap: Snapshot, dst: Ip) {
  const objs = ciliumObjects(snap);
  const node = [...snap.nodes.keys()][0] ?? factsFor(snap).nodes[0]?.name ?? "";
  const mode = nodeMode(snap, objs, node, dst.family);
  const evidence: Evidence[] = [];
  if (!mode) return { intended: "unknown" as const, evidence };
  if (mode.mode === "Disabled") {
    evidence.push(refToEvidence(mode.source));
    return { intended: "keep-pod-source" as const, evidence };
  }
  if (mode.mode === "IPTables") {
    const masq = ciliumMasqRules(snap, node).find(
      (r) => r.dst?.negated && r.dst.cidr.family === dst.family,
    );
    const c =
      masq?.dst?.cidr ??
      (dst.family === 4
        ? objs.config?.settings.ipv4NativeRoutingCidr
        : objs.config?.settings.ipv6NativeRoutingCidr);
    const ref = masq?.source ?? nativeEntry(objs.config, dst.family).entry?.source;
    if (!c) return { intended: "unknown" as const, evidence };
    if (ref) evidence.push(refToEvidence(ref));
    return {
      intended: contains(c, dst) ? ("keep-pod-source" as const) : ("masquerade" as const),
      evidence,
    };
  }
  const d = bpfDecision(snap, factsFor(snap), objs, node, mode, dst);
  const v = d.verdict;
  if (v.kind === "unknown") return { intended: "unknown" as const, evidence };
  if (v.kind === "keep") {
    if (v.source) evidence.push(refToEvidence(v.source));
    return { intended: "keep-pod-source" as const, evidence };
  }
  evidence.push(refToEvidence(mode.source));
  return { intended: "masquerade" as const, evidence };
}

function ciliumPlan(input: OwnerPlanInput): OwnerPlan | undefined {
  const { snap, targets } = input;
  if (!ciliumPresent(snap) || upstreamAgentAtWork(snap) || input.strategy !== "narrow")
    return undefined;
  const objs = ciliumObjects(snap);
  const facts = factsFor(snap);
  const node = [...snap.nodes.keys()][0] ?? facts.nodes[0]?.name;
  if (!node) return undefined;
  const podRanges = input.podRanges.map(formatCidr);
  const fixes: { kept: Kept; fix: Fix; dst: Ip }[] = [];
  for (const t of targets) {
    // the pod's address of the destination's family (a dual-stack pod sends from it)
    const ipOf = (p: (typeof facts.pods)[number] | undefined) =>
      p?.podIPs.find((a) => a.ip.family === t.ip.family)?.ip;
    const pod = facts.pods.find((p) => p.nodeName === node && ipOf(p)) ?? facts.pods[0];
    const podIp = ipOf(pod) ?? t.ip;
    const kept = keptBy({
      snap,
      src: { kind: "pod", namespace: "?", name: "?", node, ip: podIp },
      target: t,
      rule: undefined,
      stops: true,
      hostSource: undefined,
    });
    if (!kept || kept.why === "remote-node" || kept.why === "node-set") continue;
    fixes.push({ kept, fix: fixFor(objs, kept, t.ip, podRanges), dst: t.ip });
  }
  const first = fixes[0];
  if (!first) return undefined;
  const before = ciliumSettings(snap);
  const ds = agentName(objs);
  const family = first.kept.family;
  const nativeKey = nativeEntry(objs.config, family).key;
  const save = family === 4 ? "iptables-save" : "ip6tables-save";
  const knob =
    first.kept.why === "ip-masq-agent"
      ? first.kept.mapFrom === "egress-nat-policy"
        ? "GKE's EgressNATPolicy spec.destinations"
        : "the ip-masq-agent ConfigMap Cilium reads (nonMasqueradeCIDRs)"
      : first.kept.why === "disabled"
        ? `cilium-config ${masqKey(family)}`
        : `cilium-config ${nativeKey}`;
  const removed = [...new Set(fixes.map((f) => f.kept.cidr ?? ""))].filter((c) => c !== "");
  const ipMasq = first.kept.why === "ip-masq-agent" && first.kept.mapFrom !== "egress-nat-policy";
  const finalKeep = (first.fix.keep ?? []).filter((c) => !removed.includes(c));
  const narrowTo =
    first.kept.why === "snat-exclusion-cidr" || first.kept.why === "iptables-exclusion"
      ? coveringCidr(rangesOf(podRanges, family))
      : undefined;
  const after = before.map((b) => {
    if (ipMasq && b.key.startsWith("ip-masq-agent"))
      return { key: b.key, value: finalKeep.join(",") };
    if (
      (first.kept.why === "snat-exclusion-cidr" || first.kept.why === "iptables-exclusion") &&
      b.key === `cilium-config ${nativeKey}`
    ) {
      return { key: b.key, value: narrowTo ?? "<the pods' CIDR>" };
    }
    if (first.kept.why === "disabled" && b.key === `cilium-config ${masqKey(family)}`)
      return { key: b.key, value: "true" };
    return b;
  });
  const dir = input.fileDir ? `${input.fileDir.replace(/\/$/, "")}/` : "";
  return {
    owner: "cilium",
    name: objs.daemonSet?.name === "anetd" ? "GKE Dataplane V2 (anetd, Cilium)" : "Cilium",
    knob,
    title: `Cilium: ${first.fix.text.split(";")[0]}`,
    why: fixes.map((f) => whyText(f.kept, formatIp(f.dst))).join("; "),
    evidence: fixes.flatMap((f) => [...(f.kept.ref ? [f.kept.ref] : []), ...f.fix.evidence]),
    change: { before, after },
    files: ipMasq
      ? [{ file: "ip-masq-agent.cilium.yaml", content: ipMasqManifest(finalKeep, objs.ipMasq) }]
      : [],
    apply: ipMasq
      ? [
          "kubectl -n kube-system get configmap ip-masq-agent -o yaml > ip-masq-agent.before.yaml",
          sh`kubectl apply -f ${`${dir}ip-masq-agent.cilium.yaml`}`,
        ]
      : first.fix.commands.filter((c) => !c.includes(IPMASQ_LIST)),
    announcement: `Destinations in ${removed.join(", ") || "the changed range"}${narrowTo ? ` outside ${narrowTo}` : ""} will see the nodes' addresses instead of pod addresses: announce it to their owners; allowlists and logs there that name pod addresses stop matching.`,
    nowMasqueraded: removed,
    // iptables mode: Cilium's catch-all rule with the narrowed `! -d` (BPF mode has no rules)
    expected:
      first.kept.why === "iptables-exclusion" && narrowTo
        ? [...snap.nodes.keys()].flatMap((n) =>
            ciliumMasqRules(snap, n)
              .filter((r) => r.dst?.cidr.family === family)
              .map((r) => renderRule(r).replace(`! -d ${first.kept.cidr}`, `! -d ${narrowTo}`)),
          )
        : [],
    checks: [
      first.kept.mode.mode === "BPF"
        ? sh`kubectl -n kube-system exec ${`ds/${ds}`} -- ${rawWord(IPMASQ_LIST)}   # on each node: ${rawWord(removed.join(", "))} gone`
        : `${save} -t nat | grep 'cilium masquerade non-cluster'   # on each node: ! -d ${narrowTo ?? "<the pods' CIDR>"}`,
      ...targets.map(
        (t) =>
          sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the node's address on the wire, replies back`,
      ),
      "podpath verify <before-snapshot> <after-snapshot>",
    ],
    rollback: first.fix.rollback,
    rollbackChecks: [
      first.kept.mode.mode === "BPF"
        ? sh`kubectl -n kube-system exec ${`ds/${ds}`} -- ${rawWord(IPMASQ_LIST)}   # ${rawWord(removed.join(", "))} back`
        : `${save} -t nat | grep 'cilium masquerade non-cluster'   # the previous ! -d CIDR is back`,
    ],
    missing: objs.config
      ? []
      : [
          {
            file: "cluster/cilium-config.yaml",
            would_decide: "Cilium's masquerade settings, which the fix changes",
            command: CM_CMD,
          },
        ],
  };
}

function ciliumFindings(_snap: Snapshot, _facts: ClusterFacts) {
  return [];
}

function ciliumMissing(snap: Snapshot, facts: ClusterFacts): Missing[] {
  const objs = ciliumObjects(snap);
  const out: Missing[] = [];
  if (!objs.config) {
    out.push({
      file: "cluster/cilium-config.yaml",
      would_decide:
        "how Cilium masquerades (enable-bpf-masquerade, enable-ip-masq-agent, ipv4-native-routing-cidr)",
      command: "kubectl -n kube-system get configmap cilium-config -o yaml",
    });
  }
  for (const n of facts.nodes) {
    if (!snap.nodes.has(n.name)) continue;
    if (!nodeMode(snap, objs, n.name)) {
      out.push({
        file: `nodes/${n.name}/cilium-status.txt`,
        would_decide: `whether Cilium masquerades in eBPF or with iptables on ${n.name}, and its SNAT exclusion CIDR`,
        command: execCommand(snap, objs, n.name, STATUS),
      });
    }
  }
  return out;
}

/** Cilium (and GKE Dataplane V2's anetd) as an owner of the pods' source address. */
/** Problems reading Cilium's objects and each node's status and ipmasq listing. */
function ciliumDiagnostics(snap: Snapshot): Diagnostic[] {
  const out: Diagnostic[] = [...ciliumObjects(snap).diagnostics];
  for (const node of snap.nodes.keys()) {
    out.push(...nodeStatus(snap, node).diagnostics, ...nodeIpMasqList(snap, node).diagnostics);
  }
  return out;
}

export const ciliumOwner: SourceOwnerCase = {
  id: "cilium",
  name: "Cilium",
  present: ciliumPresent,
  replacesAgent: (snap) =>
    ciliumPresent(snap) && !upstreamAgentAtWork(snap) && ciliumObjects(snap).config !== undefined,
  exempt: ciliumExempt,
  wireWording: ciliumWireWording,
  decideSource: ciliumDecide,
  findings: ciliumFindings,
  diagnostics: ciliumDiagnostics,
  missing: ciliumMissing,
  plan: ciliumPlan,
  settings: ciliumSettings,
  intendedFor: ciliumIntendedFor,
};
