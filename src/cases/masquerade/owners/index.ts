/**
 * @module cases/masquerade/owners — every owner of a pod's source address the masquerade case
 * knows besides ip-masq-agent, each one module implementing `SourceOwnerCase` (owner.ts), and the
 * case's questions to all of them. Order matters only where two owners claim one snapshot: the
 * first that answers wins.
 */
import type { Diagnostic, Finding, Missing } from "../../../model/types.ts";
import type { Snapshot } from "../../../snapshot/load.ts";
import type { ClusterFacts } from "../facts.ts";
import { awsVpcCniOwner } from "./aws-vpc-cni.ts";
import { bridgeCniOwner } from "./bridge-cni.ts";
import { calicoOwner } from "./calico.ts";
import { ciliumOwner } from "./cilium.ts";
import { flannelOwner } from "./flannel.ts";
import { kubenetOwner } from "./kubenet.ts";
import type {
  OwnerDecideInput,
  OwnerExempt,
  OwnerExemptInput,
  OwnerPlan,
  OwnerPlanInput,
  OwnerSourceDecision,
  OwnerWireWording,
  SourceOwnerCase,
} from "./owner.ts";

export type {
  OwnerExemptInput,
  OwnerPlan,
  OwnerSetting,
  OwnerSourceDecision,
  SourceOwnerCase,
} from "./owner.ts";
export { ownerHop } from "./owner.ts";
export { exemptionRule, foreignOwnerText, ipMasqAgentPresent, ruleOwner } from "./rule-owner.ts";

/** The registered owners, asked in this order. */
export const SOURCE_OWNERS: readonly SourceOwnerCase[] = [
  awsVpcCniOwner,
  kubenetOwner,
  bridgeCniOwner,
  calicoOwner,
  flannelOwner,
  ciliumOwner,
];

/** The owners at work in this snapshot. */
export function ownersPresent(snap: Snapshot, owners = SOURCE_OWNERS): SourceOwnerCase[] {
  return owners.filter((o) => o.present(snap));
}

/** Some owner makes ip-masq-agent's intent (ConfigMap, defaults) beside the point. */
export function agentReplaced(snap: Snapshot, owners = SOURCE_OWNERS): boolean {
  return owners.some((o) => o.replacesAgent(snap));
}

/** The first owner's answer for a kept pod source, or "not-mine" when none claims it. */
export function ownerExempt(input: OwnerExemptInput, owners = SOURCE_OWNERS): OwnerExempt {
  for (const o of owners) {
    const r = o.exempt(input);
    if (r.kind !== "not-mine") return r;
  }
  return { kind: "not-mine" };
}

export function ownerWireWording(
  snap: Snapshot,
  owners = SOURCE_OWNERS,
): OwnerWireWording | undefined {
  for (const o of owners) {
    const w = o.wireWording(snap);
    if (w) return w;
  }
  return undefined;
}

/** The source decided outside iptables by an owner (eBPF), else undefined. */
export function ownerDecision(
  input: OwnerDecideInput,
  owners = SOURCE_OWNERS,
): OwnerSourceDecision | undefined {
  for (const o of owners) {
    const d = o.decideSource?.(input);
    if (d) return d;
  }
  return undefined;
}

/** The owners' own findings, what would decide more for them, and their readers' problems. */
export function ownerFindings(
  snap: Snapshot,
  facts: ClusterFacts,
  owners = SOURCE_OWNERS,
): { findings: Finding[]; missing: Missing[]; diagnostics: Diagnostic[] } {
  const findings: Finding[] = [];
  const missing: Missing[] = [];
  const diagnostics: Diagnostic[] = [];
  for (const o of ownersPresent(snap, owners)) {
    findings.push(...(o.findings?.(snap, facts) ?? []));
    missing.push(...(o.missing?.(snap, facts) ?? []));
  }
  // a file an owner reads is said unreadable even when, unread, nothing shows the owner at work
  for (const o of owners) diagnostics.push(...(o.diagnostics?.(snap) ?? []));
  return { findings, missing, diagnostics };
}

/** The fix in the terms of the first owner that plans for these destinations. */
export function ownerPlan(input: OwnerPlanInput, owners = SOURCE_OWNERS): OwnerPlan | undefined {
  for (const o of owners) {
    const p = o.plan?.(input);
    if (p) return p;
  }
  return undefined;
}

/** The owner whose settings `verify` compares: the first present in either snapshot. */
export function verifyOwner(
  before: Snapshot,
  after: Snapshot,
  owners = SOURCE_OWNERS,
): SourceOwnerCase | undefined {
  return owners.find((o) => o.replacesAgent(before) || o.replacesAgent(after));
}
