/**
 * @module cases/masquerade/owners/calico — the masquerade case on a Calico node (Felix's iptables
 * dataplane): Felix masquerades a pod packet only when its source is in an IPPool with
 * `natOutgoing: true` (set cali40masq-ipam-pools) and its destination is in no IPPool (set
 * cali40all-ipam-pools, cali40network-ip-pools from v3.32). Which of the two kept the pod's
 * address (the source pool's natOutgoing, or a pool covering the destination), from the IPPools,
 * the node's `ipset save`/`ipset list` and `cali-nat-outgoing`; the fix in Calico's terms: the
 * IPPool's natOutgoing (calicoctl/kubectl patch, with rollback), or the far side routes the pool.
 */
import { type CalicoIpPool, readIpPools } from "../../../agents/calico/ippool.ts";
import {
  calicoIpsetName,
  isAllPoolsSet,
  isMasqPoolsSet,
  SET_ID_ALL_POOLS,
  SET_ID_ALL_POOLS_LEGACY,
  SET_ID_MASQ_POOLS,
} from "../../../agents/calico/ipsets.ts";
import { CHAIN_NAT_OUTGOING, natOutgoingRules } from "../../../agents/calico/rules.ts";
import type { Rule } from "../../../iptables/dump.ts";
import { ipsetMembership } from "../../../iptables/ipset-member.ts";
import type { IpsetDump } from "../../../iptables/ipset-parser.ts";
import {
  type Evidence,
  type Missing,
  refToEvidence,
  type SourceRef,
} from "../../../model/types.ts";
import { contains, type Family, formatIp, type Ip, tryParseIp } from "../../../net/cidr.ts";
import { quoted, sh } from "../../../report/shell-quote.ts";
import type { Snapshot } from "../../../snapshot/load.ts";
import { natChainsMatching } from "./nat-chains.ts";
import type {
  ExemptWording,
  OwnerExempt,
  OwnerExemptInput,
  OwnerPlan,
  OwnerPlanInput,
  OwnerSetting,
  OwnerWireWording,
  SourceOwnerCase,
} from "./owner.ts";
import { ipMasqAgentPresent, ruleOwner } from "./rule-owner.ts";

const POOLS_CMD = "kubectl get ippools.crd.projectcalico.org -o yaml";

/** The pool holding `ip` (the most specific, as Calico's IPAM picks a block's pool). */
function poolOf(pools: readonly CalicoIpPool[], ip: Ip): CalicoIpPool | undefined {
  let best: CalicoIpPool | undefined;
  for (const p of pools) {
    if (p.cidr && contains(p.cidr, ip) && (!best?.cidr || p.cidr.prefix > best.cidr.prefix))
      best = p;
  }
  return best;
}

/** The node's IP sets, when its `ipset save` / `ipset list` is in the snapshot. */
function nodeIpsets(snap: Snapshot, node: string): IpsetDump | undefined {
  return snap.nodes.get(node)?.ipsets;
}

/** The node's nat table of a family (Felix writes the same chains through ip6tables for IPv6). */
function natOf(snap: Snapshot, node: string, family: Family) {
  const ev = snap.nodes.get(node);
  return (family === 6 ? ev?.ip6tables : ev?.iptables)?.tables.get("nat");
}

/** Felix's MASQUERADE (or SNAT) rule in cali-nat-outgoing, the last of the chain. */
function natOutgoingRule(snap: Snapshot, node: string, family: Family = 4): Rule | undefined {
  return natOf(snap, node, family)?.chains.get(CHAIN_NAT_OUTGOING)?.rules.at(-1);
}

/** Where cali-nat-outgoing is declared (cited when Felix left it empty). */
function natOutgoingChainRef(
  snap: Snapshot,
  node: string,
  family: Family = 4,
): SourceRef | undefined {
  return natOf(snap, node, family)?.chains.get(CHAIN_NAT_OUTGOING)?.declared;
}

/** Felix's NAT-outgoing pools set of a family: cali40masq-ipam-pools, cali60masq-ipam-pools. */
const masqSetOf = (family: Family) => calicoIpsetName(family, SET_ID_MASQ_POOLS);
/** The tool that lists a family's nat table. */
const saveOf = (family: Family) => (family === 6 ? "ip6tables-save" : "iptables-save");

function hasCalicoChains(snap: Snapshot, node: string): boolean {
  return natChainsMatching(snap.nodes.get(node)?.iptables, /^cali-/).length > 0;
}

/** Calico is at work: IPPools, the calico-node DaemonSet, or cali-* nat chains on a node. */
function calicoPresent(snap: Snapshot): boolean {
  return (
    readIpPools(snap.objects).pools.length > 0 ||
    snap.objects.some((o) => o.kind === "DaemonSet" && o.name === "calico-node") ||
    [...snap.nodes.keys()].some((n) => hasCalicoChains(snap, n))
  );
}

const refText = (r: SourceRef) => `${r.file}:${r.line}${r.text ? ` (${r.text.trim()})` : ""}`;

/** The set's `create` line (save form) or `Name:` line (list form). */
function setRef(sets: IpsetDump | undefined, test: (n: string) => boolean): SourceRef | undefined {
  for (const s of sets?.sets.values() ?? []) if (test(s.name)) return s.source;
  return undefined;
}

function patchCommands(pool: CalicoIpPool, value: boolean): string[] {
  const body = quoted(`{"spec":{"natOutgoing":${value}}}`);
  return [
    sh`calicoctl patch ippool ${pool.name} -p ${body}`,
    sh`kubectl patch ippools.projectcalico.org ${pool.name} --type merge -p ${body}   # with the Calico API server, instead of calicoctl`,
  ];
}

const previousNat = (p: CalicoIpPool) => p.natOutgoing;

/** The owner's answer for a pod packet that keeps its address, or "not-mine". */
function calicoExempt(input: OwnerExemptInput): OwnerExempt {
  const { snap, src, target, rule, stops } = input;
  if (src.kind !== "pod" || !calicoPresent(snap)) return { kind: "not-mine" };
  const owned = ruleOwner(snap, src.node, rule);
  // another component's rule kept the address (ip-masq-agent, the AWS VPC CNI, …): not Calico's
  if (owned && owned.attribution.owner !== "calico" && owned.attribution.owner !== "kube-proxy")
    return { kind: "not-mine" };
  if (!hasCalicoChains(snap, src.node) && readIpPools(snap.objects).pools.length === 0)
    return { kind: "not-mine" };
  const pools = readIpPools(snap.objects).pools;
  const sets = nodeIpsets(snap, src.node);
  const masqRule = natOutgoingRule(snap, src.node, target.ip.family);
  const dstPool = poolOf(pools, target.ip);
  const dstInSet = sets
    ? [...sets.sets.keys()]
        .filter(isAllPoolsSet)
        .map((n) => ipsetMembership(sets, n, target.ip.family, target.ip.value))
        .find((r) => r.kind === "member")
    : undefined;
  if (dstPool || dstInSet) {
    if (!stops) {
      return {
        kind: "healthy",
        why: `${formatIp(target.ip)} is in Calico IPPool ${dstPool?.name ?? dstInSet?.set?.name}: Felix never masquerades traffic to an IP pool (the pool's routes carry pod addresses)`,
      };
    }
    return { kind: "finding", finding: destinationPoolFinding(input, dstPool, dstInSet, masqRule) };
  }
  const srcPool = poolOf(pools, src.ip);
  const srcInMasq = sets
    ? [...sets.sets.keys()]
        .filter(isMasqPoolsSet)
        .map((n) => ipsetMembership(sets, n, src.ip.family, src.ip.value))
    : [];
  const masqMember = srcInMasq.find((r) => r.kind === "member");
  if (srcPool && !srcPool.natOutgoing) {
    return { kind: "finding", finding: sourcePoolFinding(input, srcPool, sets, masqRule) };
  }
  if (!srcPool && sets && srcInMasq.length > 0 && !masqMember) {
    // no IPPools in the snapshot: the node's set alone says the source's pool is not NATed
    return { kind: "finding", finding: sourcePoolFinding(input, undefined, sets, masqRule) };
  }
  return { kind: "not-mine" };
}

function sourcePoolFinding(
  input: OwnerExemptInput,
  pool: CalicoIpPool | undefined,
  sets: IpsetDump | undefined,
  masqRule: Rule | undefined,
): ExemptWording {
  const { snap, src, target, stops } = input;
  const dstText = formatIp(target.ip);
  const family = target.ip.family;
  const masqSet0 = masqSetOf(family);
  const evidence: Evidence[] = [];
  const chainRef = masqRule?.source ?? natOutgoingChainRef(snap, src.node, family);
  if (chainRef) evidence.push(refToEvidence(chainRef));
  const poolRef = pool ? (pool.natOutgoingSource ?? pool.cidrSource) : undefined;
  if (poolRef) evidence.push(refToEvidence(poolRef));
  const masqSet = setRef(sets, (n) => n === masqSet0);
  if (masqSet) evidence.push(refToEvidence(masqSet));
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const setting = pool
    ? pool.natOutgoingSource
      ? `natOutgoing: false (${pool.natOutgoingSource.file}:${pool.natOutgoingSource.line})`
      : `no natOutgoing (Calico's default is false; the pool's cidr is at ${pool.cidrSource.file}:${pool.cidrSource.line})`
    : "";
  const rule = masqRule
    ? `Felix's rule ${refText(masqRule.source)} masquerades only sources in set ${masqSet0}`
    : `Felix left ${CHAIN_NAT_OUTGOING} empty${chainRef ? ` (${chainRef.file}:${chainRef.line})` : ""}: no IPPool has natOutgoing, so nothing is masqueraded`;
  const why = pool
    ? `pod ${formatIp(src.ip)} has its address from Calico IPPool ${pool.name} (${pool.cidrText}), which has ${setting}; ${rule}${masqSet ? `, and the node's set (${masqSet.file}) does not hold ${pool.cidrText}` : ""}`
    : `${rule}, and the node's set (${masqSet?.file ?? "ipset"}) holds no block with ${formatIp(src.ip)} (the IPPools are not in the snapshot to name the pool)`;
  return {
    severity: stops ? "error" : "warning",
    title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (Calico: IPPool ${pool?.name ?? "of the pod"} natOutgoing ${pool?.natOutgoingSource ? "false" : "not set"})`,
    subject: `node/${src.node}`,
    explanation:
      `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: ${why}. ` +
      `(Attribution: Calico's cali-nat-outgoing and its IP sets; kube-proxy's RETURN only skips kube-proxy's own service masquerade.) ` +
      `The node's own traffic carries the node's address${input.hostSource ? ` (${formatIp(input.hostSource)})` : ""}, which the far side knows: that is why the node reaches ${dstText} and the pod does not. ` +
      (stops
        ? "The far side has no route back to the pod's address, so the replies vanish. "
        : "Unless the far side routes the pool back, the replies vanish. ") +
      `Fix: set natOutgoing: true on ${pool ? `IPPool ${pool.name}` : "the pod's IPPool"} (Felix then adds ${pool?.cidrText ?? "the pool"} to ${masqSet0} and masquerades its pods' traffic to every destination outside the IP pools; a behaviour change: those destinations see node addresses, not pod addresses), or route the pool back at the far side (keep pod identity).`,
    evidence,
    next: [
      `${POOLS_CMD}   # the pools' natOutgoing`,
      sh`ipset list ${masqSet0}   # on ${src.node}: the pools Felix masquerades`,
      `${saveOf(family)} -t nat | grep -E 'cali-nat-outgoing|cali-POSTROUTING'   # on ${src.node}`,
      sh`tcpdump -ni any host ${dstText}   # on ${src.node}: the pod address on the wire, no reply`,
      ...(pool
        ? [
            ...patchCommands(pool, true),
            sh`ipset test ${masqSet0} ${formatIp(src.ip)}   # on ${src.node}: now in the set`,
            `${patchCommands(pool, previousNat(pool))[0]}   # rollback`,
          ]
        : []),
    ],
  };
}

function destinationPoolFinding(
  input: OwnerExemptInput,
  pool: CalicoIpPool | undefined,
  inSet: ReturnType<typeof ipsetMembership> | undefined,
  masqRule: Rule | undefined,
): ExemptWording {
  const { src, target } = input;
  const dstText = formatIp(target.ip);
  const evidence: Evidence[] = [];
  if (masqRule) evidence.push(refToEvidence(masqRule.source));
  if (pool) evidence.push(refToEvidence(pool.cidrSource));
  if (inSet && inSet.kind === "member") evidence.push(refToEvidence(inSet.entry.source));
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const what = pool
    ? `IPPool ${pool.name} (${pool.cidrText}${pool.disabled ? ", disabled: true" : ""}) covers ${dstText}`
    : `the node's all-pools set holds ${dstText} (${inSet?.kind === "member" ? refText(inSet.entry.source) : ""})`;
  return {
    severity: "error",
    title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (Calico: ${dstText} is in ${pool ? `IPPool ${pool.name}` : "the node's all-pools IP set"})`,
    subject: `node/${src.node}`,
    explanation:
      `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: ${what}, and Felix never masquerades traffic to an IP pool${masqRule ? ` (its rule ${refText(masqRule.source)} skips destinations in the all-pools set)` : ""}. ` +
      "A pool made to cover a far range (often disabled, to stop NAT toward it) promises that the far side routes pod addresses back; it does not, so the replies vanish. " +
      `Fix: route the pod pools back at the far side, or delete the pool covering ${dstText}${pool ? ` (calicoctl delete ippool ${pool.name}; it must hold no allocated addresses)` : ""} so Felix masquerades toward it.`,
    evidence,
    next: [
      `${POOLS_CMD}   # which pool covers ${dstText}`,
      sh`ipset list   # on ${src.node}: the all-pools set`,
    ],
  };
}

/** The wire findings' wording, when Calico is the snapshot's SNAT owner. */
function calicoWireWording(snap: Snapshot): OwnerWireWording | undefined {
  if (!calicoPresent(snap) || ipMasqAgentPresent(snap)) return undefined;
  return {
    fix: "(Calico: set natOutgoing: true on the pod's IPPool, or route the pool back at the far side)",
    next: [
      `${POOLS_CMD}   # the pools' natOutgoing`,
      "ipset list cali40masq-ipam-pools   # on the node (cali60masq-ipam-pools for IPv6)",
    ],
  };
}

function calicoSettings(snap: Snapshot): OwnerSetting[] {
  return readIpPools(snap.objects).pools.map((p) => ({
    key: `IPPool ${p.name} natOutgoing`,
    ...(p.natOutgoingSource ? { value: String(p.natOutgoing) } : {}),
    ...(p.natOutgoingSource ? { source: p.natOutgoingSource } : { source: p.cidrSource }),
  }));
}

/** Pod addresses the snapshot's Pods carry (status.podIP), for the pools that hold pods. */
function podIps(snap: Snapshot): Ip[] {
  const out: Ip[] = [];
  for (const o of snap.objects) {
    if (o.kind !== "Pod") continue;
    const status = o.raw["status"] as { podIP?: unknown; podIPs?: unknown } | undefined;
    // a dual-stack pod lists its IPv6 address second, in podIPs
    const listed = Array.isArray(status?.podIPs)
      ? status.podIPs.map((a) => (a as { ip?: unknown } | null)?.ip)
      : [];
    for (const ip of new Set([status?.podIP, ...listed])) {
      const parsed = typeof ip === "string" ? tryParseIp(ip) : undefined;
      if (parsed) out.push(parsed);
    }
  }
  return out;
}

/** The pools the snapshot's (non-host-network) pods draw from. */
function podPools(snap: Snapshot, pools: readonly CalicoIpPool[]): CalicoIpPool[] {
  const used = new Set<CalicoIpPool>();
  for (const ip of podIps(snap)) {
    const p = poolOf(pools, ip);
    if (p) used.add(p);
  }
  return [...used];
}

function calicoIntendedFor(snap: Snapshot, dst: Ip) {
  const pools = readIpPools(snap.objects).pools;
  const evidence: Evidence[] = [];
  const dstPool = poolOf(pools, dst);
  if (dstPool) {
    evidence.push(refToEvidence(dstPool.cidrSource));
    return { intended: "keep-pod-source" as const, evidence };
  }
  const used = podPools(snap, pools);
  if (used.length === 0) return { intended: "unknown" as const, evidence };
  for (const p of used) evidence.push(refToEvidence(p.natOutgoingSource ?? p.cidrSource));
  if (used.every((p) => p.natOutgoing)) return { intended: "masquerade" as const, evidence };
  if (used.every((p) => !p.natOutgoing)) return { intended: "keep-pod-source" as const, evidence };
  return { intended: "unknown" as const, evidence };
}

/** The plan in Calico's terms: natOutgoing: true on the pods' pools without it. */
function calicoPlan(input: OwnerPlanInput): OwnerPlan | undefined {
  const { snap, targets } = input;
  if (!calicoPresent(snap) || ipMasqAgentPresent(snap) || input.strategy !== "narrow")
    return undefined;
  const pools = readIpPools(snap.objects).pools;
  const before = calicoSettings(snap);
  const inPool = targets.filter((t) => poolOf(pools, t.ip));
  // the pools of the destinations' family: an IPv6 destination is fixed by the IPv6 pool only
  const askedFamilies = new Set(targets.map((t) => t.ip.family));
  const toFix = podPools(snap, pools).filter(
    (p) => !p.natOutgoing && (askedFamilies.size === 0 || askedFamilies.has(p.cidr?.family ?? 4)),
  );
  const base = {
    owner: "calico" as const,
    name: "Calico (Felix, IPPools)",
    files: [],
    missing:
      pools.length > 0
        ? []
        : [
            {
              file: "cluster/ippools.yaml",
              would_decide: "the IPPools and their natOutgoing, which the fix changes",
              command: POOLS_CMD,
            },
          ],
  };
  if (toFix.length === 0) {
    if (inPool.length === 0) return undefined;
    const p = poolOf(pools, inPool[0]!.ip)!;
    return {
      ...base,
      knob: "none: Felix never masquerades toward an IP pool",
      title: `${inPool.map((t) => formatIp(t.ip)).join(", ")} ${inPool.length === 1 ? "is" : "are"} inside IPPool ${p.name}: route the pod pools back (or delete that pool)`,
      why: `IPPool ${p.name} (${p.cidrSource.file}:${p.cidrSource.line}) covers the destination; Felix's cali-nat-outgoing skips every destination in the all-pools set.`,
      evidence: [p.cidrSource],
      change: { before, after: before },
      apply: [],
      announcement: "Nothing changes on the nodes; the far side's routes change.",
      nowMasqueraded: [],
      expected: [],
      checks: targets.map(
        (t) => sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: replies to the pod address`,
      ),
      rollback: [],
      rollbackChecks: [],
    };
  }
  const names = toFix.map((p) => p.name);
  const cidrs = toFix.map((p) => p.cidrText);
  // each pool goes into its own family's set (cali40… for IPv4 pools, cali60… for IPv6 ones)
  const setOfPool = (p: CalicoIpPool) => masqSetOf(p.cidr?.family ?? 4);
  const families = [...new Set(toFix.map((p) => p.cidr?.family ?? 4))].sort();
  const asked = new Set(targets.map((t) => t.ip.family));
  const ruleFamilies = asked.size > 0 ? families.filter((f) => asked.has(f)) : families;
  return {
    ...base,
    knob: `the natOutgoing of IPPool ${names.join(", ")}`,
    title: `Set natOutgoing: true on IPPool ${names.join(", ")}`,
    why: `${toFix.map((p) => `IPPool ${p.name} (${p.cidrText}) has ${p.natOutgoingSource ? `natOutgoing: false (${p.natOutgoingSource.file}:${p.natOutgoingSource.line})` : "no natOutgoing (default false)"}`).join("; ")}: Felix leaves ${cidrs.join(", ")} out of ${families.map(masqSetOf).join(" and ")}, so its pods' packets keep their addresses toward ${targets.map((t) => formatIp(t.ip)).join(", ") || "every destination"}.`,
    evidence: toFix.map((p) => p.natOutgoingSource ?? p.cidrSource),
    change: {
      before,
      after: before.map((b) =>
        names.some((n) => b.key === `IPPool ${n} natOutgoing`) ? { key: b.key, value: "true" } : b,
      ),
    },
    apply: toFix.flatMap((p) => patchCommands(p, true).slice(0, 1)),
    announcement: `Pods in ${cidrs.join(", ")} will reach every destination outside the IP pools with their node's address instead of the pod's: announce it to the owners of those destinations; allowlists and logs that name pod addresses stop matching.`,
    nowMasqueraded: ["every destination outside the IP pools"],
    expected: [
      ...toFix.map((p) => `add ${setOfPool(p)} ${p.cidrText}   # ipset save on each node`),
      // Felix's chain of the destinations' family (the same chain name in both nat tables)
      ...ruleFamilies.flatMap((f) => expectedNatOutgoing(snap, f)),
    ],
    checks: [
      ...toFix.map(
        (p) =>
          sh`ipset list ${setOfPool(p)} | grep -x ${quoted(p.cidrText)}   # on each node: the pool is in`,
      ),
      ...targets.map(
        (t) =>
          sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the node's address on the wire, replies back`,
      ),
      "podpath verify <before-snapshot> <after-snapshot>",
    ],
    rollback: toFix.map((p) => patchCommands(p, previousNat(p))[0] ?? ""),
    rollbackChecks: toFix.map(
      (p) =>
        sh`ipset list ${setOfPool(p)} | grep -cx ${quoted(p.cidrText)}   # on each node: 0 again`,
    ),
  };
}

/**
 * Felix's cali-nat-outgoing once some pool has natOutgoing, in iptables-save form: the all-pools
 * set named as on the nodes' IP sets (all-ipam-pools up to v3.31, network-ip-pools from v3.32).
 */
function expectedNatOutgoing(snap: Snapshot, family: Family = 4): string[] {
  let legacy = false;
  for (const n of snap.nodes.keys()) {
    for (const name of nodeIpsets(snap, n)?.sets.keys() ?? []) {
      if (/^cali[46]0all-ipam-pools$/.test(name)) legacy = true;
    }
  }
  return natOutgoingRules(
    { family, allPoolsSetId: legacy ? SET_ID_ALL_POOLS_LEGACY : SET_ID_ALL_POOLS },
    true,
  ).map((r) => r.replaceAll(" --jump ", " -j "));
}

/** What would decide more: the node's IP sets when Felix's rule tests them. */
function calicoMissing(snap: Snapshot): Missing[] {
  const out: Missing[] = [];
  for (const n of snap.nodes.keys()) {
    if (!natOutgoingRule(snap, n) || nodeIpsets(snap, n)) continue;
    out.push({
      file: `nodes/${n}/ipset.txt`,
      would_decide: `which pools Felix masquerades on ${n} (its cali-nat-outgoing rule tests sets cali40masq-ipam-pools, cali60… for IPv6, and the all-pools set)`,
      command: sh`ipset save   # on ${n}`,
    });
  }
  if (readIpPools(snap.objects).pools.length === 0) {
    out.push({
      file: "cluster/ippools.yaml",
      would_decide: "the IPPools and their natOutgoing (the intent behind the IP sets)",
      command: POOLS_CMD,
    });
  }
  return out;
}

/** Felix's NAT-outgoing sets on a node, one `SET MEMBER` line each, from its ipset file. */
function calicoInstalledState(snap: Snapshot, node: string) {
  const sets = nodeIpsets(snap, node);
  if (!sets) return undefined;
  const lines: string[] = [];
  let source: SourceRef | undefined;
  for (const s of sets.sets.values()) {
    if (!isMasqPoolsSet(s.name) && !isAllPoolsSet(s.name)) continue;
    source ??= s.source;
    for (const m of s.members ?? [])
      lines.push(`${s.name} ${m.element}${m.nomatch ? " nomatch" : ""}`);
  }
  return { lines: lines.sort(), ...(source ? { source } : {}) };
}

/** Calico (Felix's iptables dataplane, IPPool natOutgoing) as an owner of the pods' source. */
export const calicoOwner: SourceOwnerCase = {
  id: "calico",
  name: "Calico",
  present: calicoPresent,
  replacesAgent: (snap) => calicoPresent(snap) && !ipMasqAgentPresent(snap),
  exempt: calicoExempt,
  wireWording: calicoWireWording,
  missing: calicoMissing,
  plan: calicoPlan,
  settings: calicoSettings,
  intendedFor: calicoIntendedFor,
  installedState: calicoInstalledState,
};
