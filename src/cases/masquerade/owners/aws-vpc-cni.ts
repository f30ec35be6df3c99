/**
 * @module cases/masquerade/owners/aws-vpc-cni — the masquerade case on a node whose pod source is
 * decided by the AWS VPC CNI (`aws-node`): which of its rules kept the pod's address (a VPC CIDR
 * RETURN, an `AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS` RETURN, or no SNAT rule at all with
 * `AWS_VPC_K8S_CNI_EXTERNALSNAT=true`), whether that is the plugin's design (traffic inside the
 * VPC) or the problem, and the fix in the plugin's terms: the aws-node DaemonSet's env.
 */
import {
  type AwsNodeIntent,
  type EnvEntry,
  readAwsNodeIntent,
} from "../../../agents/aws-vpc-cni/daemonset.ts";
import {
  ENV_EXCLUDE_SNAT_CIDRS,
  ENV_EXTERNAL_SNAT,
  ENV_RANDOMIZE_SNAT,
} from "../../../agents/aws-vpc-cni/env.ts";
import type { Rule } from "../../../iptables/dump.ts";
import { type Attribution, attributeRule, factsOfRule } from "../../../iptables/owners.ts";
import { renderRule } from "../../../iptables/render.ts";
import { type Evidence, refToEvidence, type SourceRef } from "../../../model/types.ts";
import { contains, formatCidr, formatIp, type Ip, tryParseCidr } from "../../../net/cidr.ts";
import { rawWord, sh } from "../../../report/shell-quote.ts";
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

const DS_CMD = "kubectl -n kube-system get daemonset aws-node -o yaml";
const SNAT_CHAIN_RE = /^AWS-SNAT-CHAIN-\d+$/;

/**
 * In the plugin's older chained form (`-A AWS-SNAT-CHAIN-<n> ! -d <cidr> … -j AWS-SNAT-CHAIN-<n+1>`)
 * the rule that keeps an address is the first whose CIDR holds the destination: the walk stops
 * there without a RETURN of its own.
 */
function chainedRuleNotTaken(snap: Snapshot, node: string, dst: Ip): Rule | undefined {
  const nat = snap.nodes.get(node)?.iptables?.tables.get("nat");
  const chains = [...(nat?.chains.values() ?? [])]
    .filter((c) => SNAT_CHAIN_RE.test(c.name))
    .sort((a, b) => Number(a.name.split("-").pop()) - Number(b.name.split("-").pop()));
  for (const c of chains) {
    for (const r of c.rules) {
      if (r.dst?.negated && r.target?.kind === "chain" && contains(r.dst.cidr, dst)) return r;
    }
  }
  return undefined;
}

/** The node's dump has the plugin's SNAT chain (an older node may name it -1…). */
function hasAwsSnatChain(snap: Snapshot, node: string): boolean {
  return natChainsMatching(snap.nodes.get(node)?.iptables, SNAT_CHAIN_RE).length > 0;
}

function ruleText(ref: SourceRef): string {
  return `${ref.file}:${ref.line}${ref.text ? ` (${ref.text.trim()})` : ""}`;
}

/** The owner's answer for a pod packet that keeps its address, or "not-mine". */
function awsVpcCniExempt(input: OwnerExemptInput): OwnerExempt {
  const { snap, src, rule } = input;
  const owned = ruleOwner(snap, src.node, rule);
  const intent = readAwsNodeIntent(snap.objects);
  if (
    input.target.ip.family === 6 &&
    awsPresent(snap) &&
    (!owned || owned.attribution.owner === "kube-proxy")
  ) {
    return ipv6Exempt(input, intent);
  }
  if (owned?.attribution.owner === "aws-vpc-cni" && owned.rule.target?.kind === "verdict") {
    return returnedByPlugin(input, owned.rule, owned.attribution, intent);
  }
  // No AWS rule kept it: the plugin installed no SNAT (external SNAT), or kube-proxy's mark
  // RETURN is the last RETURN on the way (it only skips kube-proxy's own service masquerade).
  const keptByNoRule = !owned || owned.attribution.owner === "kube-proxy";
  const notTaken = keptByNoRule ? chainedRuleNotTaken(snap, src.node, input.target.ip) : undefined;
  if (notTaken) {
    return returnedByPlugin(input, notTaken, attributeRule(factsOfRule(notTaken)), intent);
  }
  if (keptByNoRule && intent && !hasAwsSnatChain(snap, src.node) && intent.settings.externalSnat) {
    return { kind: "finding", finding: externalSnatFinding(input, intent, owned?.rule) };
  }
  return { kind: "not-mine" };
}

/**
 * An IPv6 pod packet on an AWS VPC CNI node: the plugin writes no IPv6 SNAT or connmark rule at all
 * (pkg/networkutils/network.go UpdateHostSNATRules returns at once when v6Enabled; v1.23.1 line
 * 443): EKS IPv6 pods keep their own global address by design, the VPC routes it. Said as the
 * plugin's, never guessed as another owner's exemption.
 */
function ipv6Exempt(input: OwnerExemptInput, intent: AwsNodeIntent | undefined): OwnerExempt {
  const { src, target, stops } = input;
  const dstText = formatIp(target.ip);
  const why = `the AWS VPC CNI writes no IPv6 SNAT rule (pkg/networkutils/network.go UpdateHostSNATRules returns at once for IPv6): pods keep their own IPv6 address toward every destination, by design`;
  if (!stops) return { kind: "healthy", why: `${dstText}: ${why}` };
  const evidence: Evidence[] = [];
  if (intent) evidence.push(refToEvidence(intent.envSource));
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  return {
    kind: "finding",
    finding: {
      severity: "error",
      title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (AWS VPC CNI: no IPv6 SNAT)`,
      subject: `node/${src.node}`,
      explanation:
        `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: ${why}. ` +
        "No setting of the plugin (AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS, EXTERNALSNAT) changes that: it has no IPv6 masquerade to configure. " +
        "The far side has no route back to the pod's address, so the replies vanish. " +
        `Fix: route the pods' IPv6 range back at the far side (its VPC route tables, the VPN's IPv6 selectors), or put ${dstText} behind something that translates (a NAT gateway or proxy in the VPC).`,
      evidence,
      next: [
        "kubectl -n kube-system get daemonset aws-node -o yaml   # ENABLE_IPv6",
        `ip6tables-save -t nat   # on ${src.node}: no AWS-SNAT-CHAIN for IPv6`,
        sh`tcpdump -ni any host ${dstText}   # on ${src.node}: the pod address on the wire, no reply`,
      ],
    },
  };
}

function returnedByPlugin(
  input: OwnerExemptInput,
  rule: Rule,
  attribution: Attribution,
  intent: AwsNodeIntent | undefined,
): OwnerExempt {
  const { src, target, stops } = input;
  const dstText = formatIp(target.ip);
  const comment = factsOfRule(rule).comment ?? "";
  const exclusion = /EXCLUSION/.test(comment);
  const cidr = rule.dst ? formatCidr(rule.dst.cidr) : "0.0.0.0/0";
  // the plugin's chained form before v1.16 (#2697): `! -d <cidr> -j AWS-SNAT-CHAIN-<n+1>`
  const verb =
    rule.target?.kind === "chain"
      ? "does not pass it on toward its SNAT rule (the older chained form: `! -d` each CIDR)"
      : "returns before its SNAT rule";
  const ref = rule.source;
  if (!exclusion && !stops) {
    return {
      kind: "healthy",
      why: `${dstText} is inside the VPC CIDR ${cidr} (${ruleText(ref)}): the AWS VPC CNI keeps pod addresses inside the VPC by design, and the VPC routes them`,
    };
  }
  const envEntry = intent?.env.get(ENV_EXCLUDE_SNAT_CIDRS);
  const evidence: Evidence[] = [refToEvidence(ref)];
  if (exclusion && envEntry) evidence.push(refToEvidence(envEntry.source));
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const remaining = (intent?.settings.excludeSnatCidrs ?? []).filter((c) => c !== cidr);
  const previous = envEntry?.value;
  const why = exclusion
    ? `the AWS VPC CNI's rule ${ruleText(ref)} ${verb} because ${cidr} is listed in ${ENV_EXCLUDE_SNAT_CIDRS}` +
      (envEntry
        ? ` on the aws-node DaemonSet (${envEntry.source.file}:${envEntry.source.line}: "${envEntry.value ?? "(valueFrom)"}")`
        : " (the aws-node DaemonSet is not in the snapshot to show the env line)")
    : `the AWS VPC CNI's rule ${ruleText(ref)} ${verb} because ${cidr} is a VPC CIDR (the plugin writes one rule per VPC CIDR, always)`;
  const explanation =
    `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: ${why}. ` +
    `(Attribution: ${attribution.reason}.) ` +
    `The node's own traffic carries the node's address${input.hostSource ? ` (${formatIp(input.hostSource)})` : ""}, which the far side knows: that is why the node reaches ${dstText} and the pod does not. ` +
    (stops
      ? "The far side has no route back to the pod's address, so the replies vanish. "
      : "Unless the far side routes the pod's address back, the replies vanish. ") +
    (exclusion
      ? `Fix: take ${cidr} out of ${ENV_EXCLUDE_SNAT_CIDRS} on the aws-node DaemonSet, so the plugin SNATs pod traffic to it to the node's primary address (a behaviour change: ${dstText} then sees node addresses, not pod addresses; allowlists naming pod addresses stop matching), or keep pod addresses and route the pod subnets back at the far side.`
      : "Fix: the plugin always exempts its VPC CIDRs, so the far side must route the pod subnets back (the VPC route tables, the VPN or Direct Connect prefixes).");
  const setTo =
    remaining.length > 0
      ? `${ENV_EXCLUDE_SNAT_CIDRS}=${remaining.join(",")}`
      : `${ENV_EXCLUDE_SNAT_CIDRS}-`;
  const rollback =
    previous !== undefined
      ? sh`kubectl -n kube-system set env daemonset aws-node -c aws-node ${`${ENV_EXCLUDE_SNAT_CIDRS}=${previous}`}   # rollback: the previous value`
      : "kubectl -n kube-system rollout undo daemonset aws-node   # rollback";
  return {
    kind: "finding",
    finding: {
      severity: stops ? "error" : "warning",
      title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (AWS VPC CNI: ${exclusion ? `${ENV_EXCLUDE_SNAT_CIDRS} entry ${cidr}` : `VPC CIDR ${cidr}`})`,
      subject: `node/${src.node}`,
      explanation,
      evidence,
      next: [
        `${DS_CMD}   # the aws-node container's env`,
        sh`iptables-save -t nat | grep -E 'AWS-SNAT-CHAIN|POSTROUTING'   # on ${src.node}`,
        sh`tcpdump -ni any host ${dstText}   # on ${src.node}: the pod address on the wire, no reply`,
        ...(exclusion
          ? [
              sh`kubectl -n kube-system set env daemonset aws-node -c aws-node ${setTo}`,
              "kubectl -n kube-system rollout status daemonset aws-node",
              sh`iptables-save -t nat | grep 'AWS SNAT CHAIN EXCLUSION'   # on ${src.node}: no RETURN for ${rawWord(String(cidr))} any more`,
              rollback,
            ]
          : []),
      ],
    },
  };
}

function externalSnatFinding(
  input: OwnerExemptInput,
  intent: AwsNodeIntent,
  lastReturn: Rule | undefined,
): ExemptWording {
  const { src, target, stops } = input;
  const dstText = formatIp(target.ip);
  const env = intent.env.get(ENV_EXTERNAL_SNAT);
  const evidence: Evidence[] = [];
  if (env) evidence.push(refToEvidence(env.source));
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  return {
    severity: stops ? "error" : "warning",
    title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (AWS VPC CNI: ${ENV_EXTERNAL_SNAT}=true)`,
    subject: `node/${src.node}`,
    explanation:
      `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: the aws-node DaemonSet sets ${ENV_EXTERNAL_SNAT}=${env?.value ?? "true"}` +
      `${env ? ` (${env.source.file}:${env.source.line})` : ""}, so the AWS VPC CNI installs no SNAT rule on the node and expects a NAT gateway or routed network to handle pod addresses. ` +
      (lastReturn
        ? `kube-proxy's RETURN (${ruleText(lastReturn.source)}) only skips kube-proxy's own service masquerade; it is not the exemption. `
        : "") +
      (stops
        ? "The far side has no route back to the pod's address, so the replies vanish. "
        : "Unless the far side routes the pod's address back, the replies vanish. ") +
      `Fix: route the pod subnets back at the far side, or set ${ENV_EXTERNAL_SNAT}=false on the aws-node DaemonSet (the plugin then SNATs every off-VPC destination to the node's primary address, unless listed in ${ENV_EXCLUDE_SNAT_CIDRS}).`,
    evidence,
    next: [
      `${DS_CMD}   # the aws-node container's env`,
      sh`kubectl -n kube-system set env daemonset aws-node -c aws-node ${ENV_EXTERNAL_SNAT}=false`,
      "kubectl -n kube-system rollout status daemonset aws-node",
      sh`kubectl -n kube-system set env daemonset aws-node -c aws-node ${ENV_EXTERNAL_SNAT}=${env?.value ?? "true"}   # rollback`,
    ],
  };
}

/** The plugin is at work: an aws-node DaemonSet or AWS-SNAT-CHAIN-* chains. */
function awsPresent(snap: Snapshot): boolean {
  return (
    readAwsNodeIntent(snap.objects) !== undefined ||
    [...snap.nodes.keys()].some((n) => hasAwsSnatChain(snap, n))
  );
}

/** The wire findings' wording, when the plugin is the snapshot's only SNAT owner. */
function awsWireWording(snap: Snapshot): OwnerWireWording | undefined {
  if (!awsPresent(snap) || ipMasqAgentPresent(snap)) return undefined;
  return {
    fix: `(the AWS VPC CNI: take the destination out of ${ENV_EXCLUDE_SNAT_CIDRS}, or set ${ENV_EXTERNAL_SNAT}=false, on the aws-node DaemonSet)`,
    next: [
      `${DS_CMD}   # the aws-node container's env`,
      "iptables-save -t nat | grep -E 'AWS-SNAT-CHAIN|POSTROUTING'   # on the node",
    ],
  };
}

const SETTING_KEYS = [ENV_EXTERNAL_SNAT, ENV_EXCLUDE_SNAT_CIDRS, ENV_RANDOMIZE_SNAT] as const;

function awsSettings(snap: Snapshot): OwnerSetting[] {
  const intent = readAwsNodeIntent(snap.objects);
  if (!intent) return [];
  return SETTING_KEYS.map((key) => {
    const e = intent.env.get(key);
    return {
      key,
      ...(e?.value !== undefined
        ? { value: e.value }
        : e?.valueFrom
          ? { value: "(valueFrom)" }
          : {}),
      ...(e ? { source: e.source } : {}),
    };
  });
}

/** The plugin's RETURN rules on the nodes' dumps: VPC CIDRs and exclusions, each cited. */
function returnRules(snap: Snapshot): { rule: Rule; exclusion: boolean }[] {
  const out: { rule: Rule; exclusion: boolean }[] = [];
  for (const n of snap.nodes.values()) {
    const nat = n.iptables?.tables.get("nat");
    for (const c of nat?.chains.values() ?? []) {
      if (!SNAT_CHAIN_RE.test(c.name)) continue;
      for (const r of c.rules) {
        if (r.target?.kind === "verdict" && r.dst && !r.dst.negated) {
          const comment = factsOfRule(r).comment ?? "";
          out.push({ rule: r, exclusion: /EXCLUSION/.test(comment) });
        }
      }
    }
  }
  return out;
}

function awsIntendedFor(snap: Snapshot, dst: Ip) {
  const intent = readAwsNodeIntent(snap.objects);
  const evidence: Evidence[] = [];
  if (intent?.settings.externalSnat) {
    const e = intent.env.get(ENV_EXTERNAL_SNAT);
    if (e) evidence.push(refToEvidence(e.source));
    return { intended: "keep-pod-source" as const, evidence };
  }
  const excluded = intent?.settings.excludeSnatCidrs.find((c) => {
    const p = tryParseCidr(c);
    return "cidr" in p && contains(p.cidr, dst);
  });
  if (excluded !== undefined && intent) {
    const e = intent.env.get(ENV_EXCLUDE_SNAT_CIDRS);
    if (e) evidence.push(refToEvidence(e.source));
    return { intended: "keep-pod-source" as const, evidence };
  }
  const rules = returnRules(snap);
  const vpc = rules.find((r) => !r.exclusion && r.rule.dst && contains(r.rule.dst.cidr, dst));
  if (vpc) {
    evidence.push(refToEvidence(vpc.rule.source));
    return { intended: "keep-pod-source" as const, evidence };
  }
  // off the VPC and not excluded: the plugin SNATs it, once its VPC CIDRs are known from a dump
  if (intent && rules.some((r) => !r.exclusion)) {
    const e = intent.env.get(ENV_EXCLUDE_SNAT_CIDRS);
    if (e) evidence.push(refToEvidence(e.source));
    return { intended: "masquerade" as const, evidence };
  }
  return { intended: "unknown" as const, evidence };
}

/**
 * The plan in the plugin's terms: take the destinations out of AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS
 * (or turn external SNAT off); a VPC CIDR is always exempt, so its only fix is the way back.
 */
function awsPlan(input: OwnerPlanInput): OwnerPlan | undefined {
  const { snap, targets } = input;
  const intent = readAwsNodeIntent(snap.objects);
  if (!awsPresent(snap) || ipMasqAgentPresent(snap) || input.strategy !== "narrow")
    return undefined;
  const before = awsSettings(snap);
  const base: PlanBase = {
    owner: "aws-vpc-cni" as const,
    name: "the AWS VPC CNI (aws-node)",
    files: [],
    missing: intent
      ? []
      : [
          {
            file: "cluster/aws-node.yaml",
            would_decide: "the aws-node container's env, which the fix changes",
            command: DS_CMD,
          },
        ],
  };
  const v6 = targets.filter((t) => t.ip.family === 6);
  if (v6.length > 0 && v6.length === targets.length) return ipv6Plan(base, before, v6);
  if (intent?.settings.externalSnat) return externalSnatPlan(base, before, intent, targets);
  const kept = keptBy(snap, targets, intent);
  if (kept.remove.size === 0) {
    return kept.vpcKept.length > 0 ? vpcOnlyPlan(base, before, kept, targets) : undefined;
  }
  return exclusionPlan(snap, base, before, kept);
}

/** IPv6 destinations: the plugin has no IPv6 SNAT to set; the far side must route pods back. */
function ipv6Plan(
  base: PlanBase,
  before: readonly OwnerSetting[],
  targets: OwnerPlanInput["targets"],
): OwnerPlan {
  const names = targets.map((t) => formatIp(t.ip)).join(", ");
  return {
    ...base,
    knob: "none: the AWS VPC CNI writes no IPv6 SNAT",
    title: `The AWS VPC CNI cannot masquerade IPv6: route the pods' IPv6 range back for ${names}`,
    why: "The plugin writes no IPv6 SNAT or connmark rule (pkg/networkutils/network.go UpdateHostSNATRules returns at once for IPv6): pods keep their own IPv6 address, and no aws-node setting changes that.",
    evidence: [],
    change: { before, after: before },
    apply: [],
    announcement: "Nothing changes on the nodes; the far side's routes change.",
    nowMasqueraded: [],
    expected: [],
    checks: targets.map(
      (t) =>
        sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the pod address on the wire, replies once the far side routes it back`,
    ),
    rollback: [],
    rollbackChecks: [],
  };
}

/** What every plan of the plugin carries. */
type PlanBase = Pick<OwnerPlan, "owner" | "name" | "files" | "missing">;

/** External SNAT on: the plugin installs no SNAT rule; the fix turns it off. */
function externalSnatPlan(
  base: PlanBase,
  before: readonly OwnerSetting[],
  intent: AwsNodeIntent,
  targets: OwnerPlanInput["targets"],
): OwnerPlan {
  const e = intent.env.get(ENV_EXTERNAL_SNAT);
  return {
    ...base,
    knob: `the aws-node DaemonSet's env ${ENV_EXTERNAL_SNAT}`,
    title: `Set ${ENV_EXTERNAL_SNAT}=false on the aws-node DaemonSet`,
    why: `${ENV_EXTERNAL_SNAT}=${e?.value ?? "true"}${e ? ` (${e.source.file}:${e.source.line})` : ""}: the plugin installs no SNAT rule, so every pod packet leaves with the pod's address.`,
    evidence: e ? [e.source] : [],
    change: {
      before,
      after: before.map((b) => (b.key === ENV_EXTERNAL_SNAT ? { key: b.key, value: "false" } : b)),
    },
    apply: [
      sh`kubectl -n kube-system set env daemonset aws-node -c aws-node ${ENV_EXTERNAL_SNAT}=false`,
      "kubectl -n kube-system rollout status daemonset aws-node",
    ],
    announcement:
      "Every destination outside the VPC CIDRs (and outside AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS) will see the node's primary address instead of pod addresses: announce it to the owners of those destinations; allowlists naming pod addresses stop matching.",
    nowMasqueraded: ["0.0.0.0/0 outside the VPC CIDRs"],
    // the chain's RETURNs depend on the VPC CIDRs, which only a node's dump shows
    expected: [],
    checks: [
      "iptables-save -t nat | grep -E 'AWS-SNAT-CHAIN|POSTROUTING'   # on each node: the plugin's SNAT chain is there",
      ...targets.map(
        (t) =>
          sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the node's address on the wire`,
      ),
    ],
    rollback: [
      sh`kubectl -n kube-system set env daemonset aws-node -c aws-node ${ENV_EXTERNAL_SNAT}=${e?.value ?? "true"}`,
      "kubectl -n kube-system rollout status daemonset aws-node",
    ],
    rollbackChecks: [
      "iptables-save -t nat | grep -c 'AWS, SNAT'   # on each node: 0 again (the plugin removes its SNAT rule)",
    ],
  };
}

/** Which entries of the exclusion list keep the destinations, and which VPC CIDRs do. */
interface KeptBy {
  readonly remove: Set<string>;
  readonly evidence: SourceRef[];
  readonly vpcKept: string[];
  readonly fixed: Ip[];
  readonly listed: readonly string[];
  readonly envEntry: EnvEntry | undefined;
}

function keptBy(
  snap: Snapshot,
  targets: OwnerPlanInput["targets"],
  intent: AwsNodeIntent | undefined,
): KeptBy {
  const rules = returnRules(snap);
  const excludedFor = (dst: Ip) =>
    rules.find((r) => r.exclusion && r.rule.dst && contains(r.rule.dst.cidr, dst));
  const vpcFor = (dst: Ip) =>
    rules.find((r) => !r.exclusion && r.rule.dst && contains(r.rule.dst.cidr, dst));
  const listed = intent?.settings.excludeSnatCidrs ?? [];
  const remove = new Set<string>();
  const evidence: SourceRef[] = [];
  const vpcKept: string[] = [];
  const fixed: Ip[] = [];
  for (const t of targets) {
    const ex = excludedFor(t.ip);
    if (ex?.rule.dst) {
      remove.add(formatCidr(ex.rule.dst.cidr));
      evidence.push(ex.rule.source);
      fixed.push(t.ip);
      continue;
    }
    // without the node's dump, the env alone says which entry keeps the destination
    const entry = listed.find((c) => {
      const p = tryParseCidr(c);
      return "cidr" in p && contains(p.cidr, t.ip);
    });
    if (entry !== undefined) {
      remove.add(entry);
      fixed.push(t.ip);
      continue;
    }
    const vpc = vpcFor(t.ip);
    if (vpc?.rule.dst) {
      vpcKept.push(`${formatIp(t.ip)} (VPC CIDR ${formatCidr(vpc.rule.dst.cidr)})`);
      evidence.push(vpc.rule.source);
    }
  }
  const envEntry = intent?.env.get(ENV_EXCLUDE_SNAT_CIDRS);
  if (envEntry) evidence.push(envEntry.source);
  return { remove, evidence, vpcKept, fixed, listed, envEntry };
}

/** Only VPC CIDRs keep the destinations: no setting changes that; the far side routes back. */
function vpcOnlyPlan(
  base: PlanBase,
  before: readonly OwnerSetting[],
  kept: KeptBy,
  targets: OwnerPlanInput["targets"],
): OwnerPlan {
  const { evidence, vpcKept } = kept;
  return {
    ...base,
    knob: "none: the plugin always exempts its VPC CIDRs",
    title:
      "No setting of the AWS VPC CNI masquerades a VPC destination: route the pod subnets back",
    why: `${vpcKept.join(", ")}: the plugin writes a RETURN for every VPC CIDR, whatever its env says. The far side must route the pod subnets back (VPC route tables, the VPN's or Direct Connect's prefixes).`,
    evidence,
    change: { before, after: before },
    apply: [],
    announcement: "Nothing changes on the nodes; the far side's routes change.",
    nowMasqueraded: [],
    expected: [],
    checks: targets.map(
      (t) =>
        sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: replies to the pod address come back`,
    ),
    rollback: [],
    rollbackChecks: [],
  };
}

/** The exclusion list's entries that keep the destinations come out of the env. */
function exclusionPlan(
  snap: Snapshot,
  base: PlanBase,
  before: readonly OwnerSetting[],
  kept: KeptBy,
): OwnerPlan {
  const { remove, evidence, vpcKept, fixed, listed, envEntry } = kept;
  const remaining = listed.filter((c) => !remove.has(c));
  const setTo =
    remaining.length > 0
      ? `${ENV_EXCLUDE_SNAT_CIDRS}=${remaining.join(",")}`
      : `${ENV_EXCLUDE_SNAT_CIDRS}-`;
  const previous = envEntry?.value;
  const removed = [...remove];
  const expected = [...snap.nodes.values()].flatMap((n) =>
    [...(n.iptables?.tables.get("nat")?.chains.values() ?? [])]
      .filter((c) => SNAT_CHAIN_RE.test(c.name))
      .flatMap((c) =>
        c.rules
          .filter(
            (r) =>
              !(
                r.dst &&
                !r.dst.negated &&
                /EXCLUSION/.test(factsOfRule(r).comment ?? "") &&
                remove.has(formatCidr(r.dst.cidr))
              ),
          )
          .map((r) => renderRule(r)),
      ),
  );
  return {
    ...base,
    knob: `the aws-node DaemonSet's env ${ENV_EXCLUDE_SNAT_CIDRS}`,
    title: `Take ${removed.join(", ")} out of ${ENV_EXCLUDE_SNAT_CIDRS} on the aws-node DaemonSet`,
    why: `${removed.join(", ")} ${removed.length === 1 ? "is" : "are"} listed in ${ENV_EXCLUDE_SNAT_CIDRS}${envEntry ? ` (${envEntry.source.file}:${envEntry.source.line}: "${envEntry.value ?? "(valueFrom)"}")` : ""}, so the plugin returns before its SNAT rule and pod packets to ${fixed.map(formatIp).join(", ")} keep the pod's address.${vpcKept.length > 0 ? ` Unchanged by design: ${vpcKept.join(", ")}, which the plugin always exempts.` : ""}`,
    evidence,
    change: {
      before,
      after: before.map((b) =>
        b.key === ENV_EXCLUDE_SNAT_CIDRS
          ? remaining.length > 0
            ? { key: b.key, value: remaining.join(",") }
            : { key: b.key }
          : b,
      ),
    },
    apply: [
      sh`kubectl -n kube-system set env daemonset aws-node -c aws-node ${setTo}`,
      "kubectl -n kube-system rollout status daemonset aws-node",
    ],
    announcement: `Destinations in ${removed.join(", ")} will see the node's primary address instead of pod addresses: announce it to their owners; allowlists and logs there that name pod addresses stop matching.`,
    nowMasqueraded: removed,
    expected: [...new Set(expected)],
    checks: [
      `iptables-save -t nat | grep 'AWS SNAT CHAIN EXCLUSION'   # on each node: no RETURN for ${removed.join(", ")}`,
      ...fixed.map(
        (ip) =>
          sh`tcpdump -ni any host ${formatIp(ip)}   # on a node: the node's address on the wire, replies back`,
      ),
      "podpath verify <before-snapshot> <after-snapshot>",
    ],
    rollbackChecks: [
      `iptables-save -t nat | grep 'AWS SNAT CHAIN EXCLUSION'   # on each node: the RETURN for ${removed.join(", ")} is back`,
    ],
    rollback: [
      previous !== undefined
        ? sh`kubectl -n kube-system set env daemonset aws-node -c aws-node ${`${ENV_EXCLUDE_SNAT_CIDRS}=${previous}`}`
        : "kubectl -n kube-system rollout undo daemonset aws-node",
      "kubectl -n kube-system rollout status daemonset aws-node",
    ],
  };
}

/** The AWS VPC CNI (`aws-node`) as an owner of the pods' source address. */
export const awsVpcCniOwner: SourceOwnerCase = {
  id: "aws-vpc-cni",
  name: "the AWS VPC CNI",
  present: awsPresent,
  replacesAgent: (snap) => awsPresent(snap) && !ipMasqAgentPresent(snap),
  exempt: awsVpcCniExempt,
  wireWording: awsWireWording,
  plan: awsPlan,
  settings: awsSettings,
  intendedFor: awsIntendedFor,
};
