/**
 * @module cases/masquerade/owners/owner — the contract of one owner of a pod's source address
 * (ip-masq-agent's rivals: the AWS VPC CNI, kubenet, the bridge CNI plugin, Calico, Flannel,
 * Cilium, …) toward the masquerade case. The case asks every registered owner in turn; an owner
 * answers only for evidence it wrote (attributed rules, its own objects and files) and says
 * "not-mine" otherwise, so a dump of one owner never produces another owner's finding or fix.
 */
import type { Owner } from "../../../iptables/owners.ts";
import type { ClusterRange } from "../../../k8s/cluster-range.ts";
import type { PathHop } from "../../../model/answer.ts";
import type { Diagnostic, Evidence, Finding, Missing, SourceRef } from "../../../model/types.ts";
import { type Cidr, formatIp, type Ip, sameIp } from "../../../net/cidr.ts";
import type { Snapshot } from "../../../snapshot/load.ts";
import type { TracedDestination } from "../destinations.ts";
import type { ClusterFacts } from "../facts.ts";
import type { Source } from "../sources.ts";

/** What the case knows about one pod packet that leaves its node with the pod's address. */
export interface OwnerExemptInput {
  readonly snap: Snapshot;
  readonly src: Source;
  readonly target: TracedDestination;
  /** The rule (or owner file line) that decided, when something decided. */
  readonly rule: SourceRef | undefined;
  /** The far side has no way back to the address on the wire. */
  readonly stops: boolean;
  /** The node's own address toward the destination, for the "why the node works" sentence. */
  readonly hostSource: Ip | undefined;
}

/** The exempt-destination finding in the owner's words (the case gives it its id). */
export type ExemptWording = Omit<Finding, "id">;

/**
 * "not-mine": another owner decided. "healthy": the owner keeps the address by design and
 * nothing says the far side cannot answer. "finding": the answer, in the owner's words.
 */
export type OwnerExempt =
  | { readonly kind: "not-mine" }
  | { readonly kind: "healthy"; readonly why: string }
  | { readonly kind: "finding"; readonly finding: ExemptWording };

/** How the wire findings word the fix and next steps when this owner decides the pod's source. */
export interface OwnerWireWording {
  /** Replaces "(narrow the ip-masq-agent exception list)". */
  readonly fix: string;
  readonly next: readonly string[];
}

/**
 * The source a pod packet leaves its node with, decided by an owner outside iptables (eBPF
 * masquerade), or undefined when the owner leaves the decision to the node's iptables rules.
 */
export interface OwnerSourceDecision {
  readonly decision: "masquerade" | "keep" | "cannot-decide";
  /** The source on the wire; undefined when not decided. */
  readonly sourceOut?: Ip;
  /** The line that decided (the eBPF map's entry, the config key). */
  readonly decidedBy?: SourceRef;
  /** The node hop's label, e.g. "Cilium eBPF masquerade: 10.20.0.0/16 not masqueraded". */
  readonly label: string;
  /** When not decided: why, and what decides it. */
  readonly undecided?: string;
  readonly missing?: readonly Missing[];
}

export interface OwnerDecideInput {
  readonly snap: Snapshot;
  readonly facts: ClusterFacts;
  readonly src: Source;
  readonly target: TracedDestination;
}

/** One setting of the owner as written (an env entry, an IPPool field, a ConfigMap key). */
export interface OwnerSetting {
  /** e.g. "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS", "IPPool default-ipv4-ippool natOutgoing". */
  readonly key: string;
  /** As written; undefined when not set (the owner's default applies). */
  readonly value?: string;
  readonly source?: SourceRef;
}

export interface OwnerPlanInput {
  readonly snap: Snapshot;
  readonly facts: ClusterFacts;
  /** The destinations the plan is for (from `--dest`, the far sites, the probes). */
  readonly targets: readonly TracedDestination[];
  /** The cluster's pod ranges the case knows (kube-proxy's rules, Nodes, pods). */
  readonly podRanges: readonly Cidr[];
  /** Where the cluster's whole pod range is stated (a flag, kube-proxy's rules), when it is. */
  readonly podRangeStated?: ClusterRange;
  readonly strategy: "narrow" | "keep-pod-identity";
  /** Folder the plan's files are (to be) written to; commands name them there. */
  readonly fileDir?: string;
}

/** The fix in the owner's own terms: its knob, what changes, how to apply, check and undo it. */
export interface OwnerPlan {
  readonly owner: Owner;
  /** The owner's name as the plan shows it, e.g. "the AWS VPC CNI (aws-node)". */
  readonly name: string;
  /** What is changed, e.g. "the aws-node DaemonSet's env AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS". */
  readonly knob: string;
  readonly title: string;
  readonly why: string;
  readonly evidence: readonly SourceRef[];
  /** The knob before and after, as the owner's objects write them. */
  readonly change: {
    readonly before: readonly OwnerSetting[];
    readonly after: readonly OwnerSetting[];
  };
  /** Files the apply lines name (written with `--write`): name → content. */
  readonly files: readonly { readonly file: string; readonly content: string }[];
  readonly apply: readonly string[];
  /** The behaviour change to announce: who sees a different source address afterwards. */
  readonly announcement: string;
  /** Destinations (CIDRs) whose traffic will be translated (or kept) afterwards. */
  readonly nowMasqueraded: readonly string[];
  /** On each node afterwards, in iptables-save form (or the owner's own listing). */
  readonly expected: readonly string[];
  readonly checks: readonly string[];
  readonly rollback: readonly string[];
  /** What shows the rollback took. */
  readonly rollbackChecks: readonly string[];
  readonly missing: readonly Missing[];
}

/** One owner of the pods' source address, as the masquerade case asks it. */
export interface SourceOwnerCase {
  readonly id: Owner;
  /** As sentences name it: "the AWS VPC CNI". */
  readonly name: string;
  /** The snapshot shows this owner at work (its objects, chains, files). */
  present(snap: Snapshot): boolean;
  /** Is ip-masq-agent's intent (ConfigMap, defaults) beside the point for this snapshot? */
  replacesAgent(snap: Snapshot): boolean;
  /** The owner's answer for a pod packet that keeps its address. */
  exempt(input: OwnerExemptInput): OwnerExempt;
  /** The wire findings' fix, when this owner decides the pods' source. */
  wireWording(snap: Snapshot): OwnerWireWording | undefined;
  /** The source decided outside iptables (eBPF), else undefined (the rules decide). */
  decideSource?(input: OwnerDecideInput): OwnerSourceDecision | undefined;
  /** Findings of the owner's own (its config refused, stale state on a node). */
  findings?(snap: Snapshot, facts: ClusterFacts): Finding[];
  /** Problems reading the owner's objects and node files (each names its file and line). */
  diagnostics?(snap: Snapshot): Diagnostic[];
  /** What would decide more, for this owner (its objects, its node files). */
  missing?(snap: Snapshot, facts: ClusterFacts): Missing[];
  /** The fix for the case's destinations, in the owner's terms; undefined when not this owner's. */
  plan?(input: OwnerPlanInput): OwnerPlan | undefined;
  /** The owner's settings as written, for `verify`'s before/after of the intent. */
  settings(snap: Snapshot): readonly OwnerSetting[];
  /**
   * The owner's state on a node beyond its nat rules (Calico's IP set members), one line each as
   * the node's file shows it, for `verify`'s kernel layer; undefined when it has none or the
   * snapshot lacks the file.
   */
  installedState?(
    snap: Snapshot,
    node: string,
  ): { readonly lines: readonly string[]; readonly source?: SourceRef } | undefined;
  /** What the owner's settings intend for a destination, with the line that says so. */
  intendedFor(
    snap: Snapshot,
    dst: Ip,
  ): {
    readonly intended: "masquerade" | "keep-pod-source" | "unknown";
    readonly evidence: Evidence[];
  };
}

/** The node hop for an owner's decision (used by the case's path). */
export function ownerHop(node: string, d: OwnerSourceDecision, podIp: Ip): PathHop {
  return {
    at: `node/${node}`,
    label: d.label,
    ...(d.sourceOut ? { source: formatIp(d.sourceOut) } : {}),
    state:
      d.decision === "cannot-decide"
        ? "unknown"
        : d.sourceOut && !sameIp(d.sourceOut, podIp)
          ? "changes"
          : "ok",
    ...(d.decidedBy ? { evidence: d.decidedBy } : {}),
  };
}
