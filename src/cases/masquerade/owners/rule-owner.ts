/**
 * @module cases/masquerade/owners/rule-owner — who wrote the rule that decided a pod's source
 * (iptables/owners attribution on the node's dump), and the sentence for a rule whose owner has no
 * case module of its own, or that podpath cannot attribute at all.
 */
import type { Rule } from "../../../iptables/dump.ts";
import {
  type Attribution,
  attributeRule,
  factsOfRule,
  ruleAtLine,
} from "../../../iptables/owners.ts";
import type { SourceRef } from "../../../model/types.ts";
import type { Snapshot } from "../../../snapshot/load.ts";
import { anyNodeHasNatChain } from "./nat-chains.ts";

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

/** kube-proxy's mark RETURN only skips its own service masquerade: never cited as an exemption. */
export function exemptionRule(
  snap: Snapshot,
  node: string,
  ref: SourceRef | undefined,
): SourceRef | undefined {
  return ruleOwner(snap, node, ref)?.attribution.owner === "kube-proxy" ? undefined : ref;
}

const OWNER_NAMES: Partial<Record<Attribution["owner"], string>> = {
  "aws-vpc-cni": "the AWS VPC CNI",
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
 * GKE's node startup's and its owner's case module did not word it: its owner, or that podpath
 * cannot tell, with the reason. Undefined when the rule is theirs or there is no rule.
 */
export function foreignOwnerText(
  snap: Snapshot,
  node: string,
  ref: SourceRef | undefined,
): string | undefined {
  const owned = ruleOwner(snap, node, ref);
  if (!owned) return undefined;
  const { owner, reason } = owned.attribution;
  if (owner === "ip-masq-agent" || owner === "gke-node-startup" || owner === "kube-proxy") {
    return undefined;
  }
  const name = OWNER_NAMES[owner];
  return name
    ? `a rule ${name} writes (${reason}), not ip-masq-agent's`
    : `a rule podpath cannot attribute to any component it knows (${reason}); not ip-masq-agent's or GKE's node startup's`;
}

/** ip-masq-agent (or GKE's startup chain) is at work: its objects or its chains are there. */
export function ipMasqAgentPresent(snap: Snapshot): boolean {
  return (
    snap.objects.some((o) => o.namespace === "kube-system" && /^ip-masq-agent/.test(o.name)) ||
    anyNodeHasNatChain(snap, /^IP-MASQ/)
  );
}
