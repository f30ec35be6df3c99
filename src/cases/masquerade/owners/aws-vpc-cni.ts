/**
 * @module cases/masquerade/owner-aws-vpc-cni — the masquerade case on a node whose pod source is
 * decided by the AWS VPC CNI (`aws-node`): which of its rules kept the pod's address (a VPC CIDR
 * RETURN, an `AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS` RETURN, or no SNAT rule at all with
 * `AWS_VPC_K8S_CNI_EXTERNALSNAT=true`), whether that is the plugin's design (traffic inside the
 * VPC) or the problem, and the fix in the plugin's terms: the aws-node DaemonSet's env.
 */
import { type AwsNodeIntent, readAwsNodeIntent } from "../../agents/aws-vpc-cni/daemonset.ts";
import { ENV_EXCLUDE_SNAT_CIDRS, ENV_EXTERNAL_SNAT } from "../../agents/aws-vpc-cni/env.ts";
import type { Rule } from "../../iptables/dump.ts";
import { type Attribution, attributeRule, factsOfRule, ruleAtLine } from "../../iptables/owners.ts";
import { type Evidence, type Finding, refToEvidence, type SourceRef } from "../../model/types.ts";
import { contains, formatCidr, formatIp, type Ip } from "../../net/cidr.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { TracedDestination } from "./destinations.ts";
import type { Source } from "./sources.ts";

const DS_CMD = "kubectl -n kube-system get daemonset aws-node -o yaml";
const SNAT_CHAIN_RE = /^AWS-SNAT-CHAIN-\d+$/;

/** What the case needs to say about one kept pod source. */
export interface OwnerExemptInput {
  readonly snap: Snapshot;
  readonly src: Source;
  readonly target: TracedDestination;
  /** The rule that decided (decidingRuleOf), when the node's rules decided. */
  readonly rule: SourceRef | undefined;
  /** The far side has no way back to the address on the wire. */
  readonly stops: boolean;
  /** The node's own address toward the destination, for the "why the node works" sentence. */
  readonly hostSource: Ip | undefined;
}

/**
 * "not-mine": another owner decided (the case's own wording applies). "healthy": the plugin's
 * design keeps the address and nothing says the far side cannot answer. "finding": the answer.
 */
export type OwnerExempt =
  | { readonly kind: "not-mine" }
  | { readonly kind: "healthy"; readonly why: string }
  | { readonly kind: "finding"; readonly finding: ExemptWording };

/** The exempt-destination finding in the owner's words (the case gives it its id). */
export type ExemptWording = Omit<Finding, "id">;

/** kube-proxy's mark RETURN only skips its own service masquerade: never cited as an exemption. */
export function exemptionRule(
  snap: Snapshot,
  node: string,
  ref: SourceRef | undefined,
): SourceRef | undefined {
  return ruleOwner(snap, node, ref)?.attribution.owner === "kube-proxy" ? undefined : ref;
}

/** The rule at `ref` in the node's dump, and who wrote it. */
export function ruleOwner(
  snap: Snapshot,
  node: string,
  ref: SourceRef | undefined,
): { rule: Rule; attribution: Attribution } | undefined {
  const dump = snap.nodes.get(node)?.iptables;
  if (!dump || !ref) return undefined;
  const rule = ruleAtLine(dump.tables, ref.file, ref.line);
  return rule ? { rule, attribution: attributeRule(factsOfRule(rule)) } : undefined;
}

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
  const nat = snap.nodes.get(node)?.iptables?.tables.get("nat");
  return [...(nat?.chains.keys() ?? [])].some((c) => SNAT_CHAIN_RE.test(c));
}

function ruleText(ref: SourceRef): string {
  return `${ref.file}:${ref.line}${ref.text ? ` (${ref.text.trim()})` : ""}`;
}

/** The owner's answer for a pod packet that keeps its address, or "not-mine". */
export function awsVpcCniExempt(input: OwnerExemptInput): OwnerExempt {
  const { snap, src, rule } = input;
  const owned = ruleOwner(snap, src.node, rule);
  const intent = readAwsNodeIntent(snap.objects);
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
      ? `kubectl -n kube-system set env daemonset aws-node -c aws-node ${ENV_EXCLUDE_SNAT_CIDRS}=${previous}   # rollback: the previous value`
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
        `iptables-save -t nat | grep -E 'AWS-SNAT-CHAIN|POSTROUTING'   # on ${src.node}`,
        `tcpdump -ni any host ${dstText}   # on ${src.node}: the pod address on the wire, no reply`,
        ...(exclusion
          ? [
              `kubectl -n kube-system set env daemonset aws-node -c aws-node ${setTo}`,
              "kubectl -n kube-system rollout status daemonset aws-node",
              `iptables-save -t nat | grep 'AWS SNAT CHAIN EXCLUSION'   # on ${src.node}: no RETURN for ${cidr} any more`,
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
      `kubectl -n kube-system set env daemonset aws-node -c aws-node ${ENV_EXTERNAL_SNAT}=false`,
      "kubectl -n kube-system rollout status daemonset aws-node",
      `kubectl -n kube-system set env daemonset aws-node -c aws-node ${ENV_EXTERNAL_SNAT}=${env?.value ?? "true"}   # rollback`,
    ],
  };
}

/** How the wire findings word the fix and next steps when the plugin owns the pod's source. */
export interface OwnerWireWording {
  /** Replaces "(narrow the ip-masq-agent exception list)". */
  readonly fix: string;
  readonly next: readonly string[];
}

/**
 * The plugin's wording for the wire findings, when it is the snapshot's only SNAT owner: an
 * aws-node DaemonSet or AWS-SNAT-CHAIN-* chains, and no ip-masq-agent objects or chains.
 */
export function awsWireWording(snap: Snapshot): OwnerWireWording | undefined {
  const nodes = [...snap.nodes.keys()];
  const aws =
    readAwsNodeIntent(snap.objects) !== undefined || nodes.some((n) => hasAwsSnatChain(snap, n));
  const ipMasq =
    snap.objects.some((o) => o.namespace === "kube-system" && /^ip-masq-agent/.test(o.name)) ||
    [...snap.nodes.values()].some((n) =>
      [...(n.iptables?.tables.get("nat")?.chains.keys() ?? [])].some((c) => /^IP-MASQ/.test(c)),
    );
  if (!aws || ipMasq) return undefined;
  return {
    fix: `(the AWS VPC CNI: take the destination out of ${ENV_EXCLUDE_SNAT_CIDRS}, or set ${ENV_EXTERNAL_SNAT}=false, on the aws-node DaemonSet)`,
    next: [
      `${DS_CMD}   # the aws-node container's env`,
      "iptables-save -t nat | grep -E 'AWS-SNAT-CHAIN|POSTROUTING'   # on the node",
    ],
  };
}

const OWNER_NAMES: Partial<Record<Attribution["owner"], string>> = {
  kubenet: "kubenet (the kubelet's --non-masquerade-cidr)",
  "bridge-cni": "the bridge CNI plugin's ipMasq",
  calico: "Calico",
  flannel: "Flannel",
  cilium: "Cilium",
  docker: "Docker",
  kubelet: "the kubelet",
};

/**
 * Where an exemption comes from when the rule that kept the source is neither ip-masq-agent's nor
 * GKE's node startup's (nor the AWS VPC CNI's, worded above): its owner, or that podpath cannot
 * tell, with the reason. Undefined when the rule is theirs or there is no rule.
 */
export function foreignOwnerText(
  snap: Snapshot,
  node: string,
  ref: SourceRef | undefined,
): string | undefined {
  const owned = ruleOwner(snap, node, ref);
  if (!owned) return undefined;
  const { owner, reason } = owned.attribution;
  if (owner === "ip-masq-agent" || owner === "gke-node-startup" || owner === "aws-vpc-cni") {
    return undefined;
  }
  if (owner === "kube-proxy") return undefined;
  const name = OWNER_NAMES[owner];
  return name
    ? `a rule ${name} writes (${reason}), not ip-masq-agent's`
    : `a rule podpath cannot attribute to any component it knows (${reason}); not ip-masq-agent's or GKE's node startup's`;
}
