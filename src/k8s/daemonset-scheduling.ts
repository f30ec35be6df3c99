/**
 * @module k8s/daemonset-scheduling — whether a DaemonSet runs a pod on a node, as the DaemonSet
 * controller decides it (`NodeShouldRunDaemonPod`): nodeSelector, required node affinity, and the
 * node's NoSchedule/NoExecute taints against the template's tolerations plus the ones the
 * controller adds by itself. Answers with the reason and the line when it does not.
 */
import type { SourceRef } from "../model/types.ts";
import type {
  DaemonSetView,
  NodeSelectorRequirement,
  NodeSelectorTerm,
  NodeView,
  Taint,
  Toleration,
} from "./objects.ts";

export type DaemonSetMatch =
  | { readonly matches: true }
  | {
      readonly matches: false;
      readonly rule: "nodeSelector" | "nodeAffinity" | "taint";
      /** Plain English: which label, term or taint keeps the pod off the node. */
      readonly reason: string;
      /** The manifest or node line that decides it. */
      readonly source?: SourceRef;
    };

/**
 * Tolerations the DaemonSet controller adds to every daemon pod (`AddOrUpdateDaemonPodTolerations`,
 * documented under "DaemonSet: Taints and tolerations"); `network-unavailable` only for host-network
 * pods.
 */
export function automaticDaemonSetTolerations(hostNetwork: boolean): Toleration[] {
  const t = (key: string, effect: "NoSchedule" | "NoExecute"): Toleration => ({
    key,
    operator: "Exists",
    effect,
  });
  return [
    t("node.kubernetes.io/not-ready", "NoExecute"),
    t("node.kubernetes.io/unreachable", "NoExecute"),
    t("node.kubernetes.io/disk-pressure", "NoSchedule"),
    t("node.kubernetes.io/memory-pressure", "NoSchedule"),
    t("node.kubernetes.io/pid-pressure", "NoSchedule"),
    t("node.kubernetes.io/unschedulable", "NoSchedule"),
    ...(hostNetwork ? [t("node.kubernetes.io/network-unavailable", "NoSchedule")] : []),
  ];
}

/** Does the toleration tolerate the taint? (core/v1 `Toleration.ToleratesTaint`) */
export function toleratesTaint(tol: Toleration, taint: Taint): boolean {
  if (tol.effect && tol.effect !== taint.effect) return false;
  if (tol.key && tol.key !== taint.key) return false;
  // An empty key with operator Exists matches every taint.
  if (tol.operator === "Exists") return true;
  return (tol.value ?? "") === (taint.value ?? "");
}

/** One requirement against a label set (or the node's fields for matchFields). */
function requirementMatches(
  r: NodeSelectorRequirement,
  labels: Readonly<Record<string, string>>,
): boolean {
  const has = Object.hasOwn(labels, r.key);
  const v = labels[r.key];
  switch (r.operator) {
    case "In":
      return has && r.values.includes(v!);
    case "NotIn":
      return !has || !r.values.includes(v!);
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
    case "Gt":
    case "Lt": {
      // Both sides must be integers; anything else does not match (labels.Requirement.Matches).
      if (!has || r.values.length !== 1) return false;
      const INT = /^[+-]?\d+$/;
      if (!INT.test(v!) || !INT.test(r.values[0]!)) return false;
      const a = BigInt(v!);
      const b = BigInt(r.values[0]!);
      return r.operator === "Gt" ? a > b : a < b;
    }
  }
}

/** Why a requirement is invalid (and so its term matches nothing), as API validation would say. */
function invalidRequirement(r: NodeSelectorRequirement, field: boolean): string | undefined {
  if (field && r.key !== "metadata.name")
    return `matchFields supports only metadata.name, not ${r.key}`;
  if (field && r.operator !== "In" && r.operator !== "NotIn")
    return `matchFields supports only In and NotIn`;
  if (field && r.values.length !== 1) return "matchFields needs exactly one value";
  if ((r.operator === "In" || r.operator === "NotIn") && r.values.length === 0)
    return `${r.operator} needs at least one value`;
  if ((r.operator === "Exists" || r.operator === "DoesNotExist") && r.values.length > 0)
    return `${r.operator} takes no values`;
  return undefined;
}

function termMatches(term: NodeSelectorTerm, node: NodeView): boolean {
  // An empty term matches no node (core/v1 NodeSelectorTerm).
  if (term.matchExpressions.length === 0 && term.matchFields.length === 0) return false;
  const fields = { "metadata.name": node.name };
  return (
    term.matchExpressions.every(
      (r) => !invalidRequirement(r, false) && requirementMatches(r, node.labels),
    ) &&
    term.matchFields.every((r) => !invalidRequirement(r, true) && requirementMatches(r, fields))
  );
}

function describeRequirement(r: NodeSelectorRequirement): string {
  return r.values.length
    ? `${r.key} ${r.operator} (${r.values.join(", ")})`
    : `${r.key} ${r.operator}`;
}

/**
 * Would the DaemonSet's controller place a pod on the node? Checks, in the controller's order,
 * nodeSelector, required node affinity, and untolerated NoSchedule/NoExecute taints
 * (PreferNoSchedule never blocks). `spec.nodeName` pinning, resources and ports are not modelled.
 *
 * @example
 *   nodeMatchesDaemonSet(gpuNode, ipMasqAgent)
 *   // { matches: false, rule: "taint", reason: "taint nvidia.com/gpu=present:NoSchedule is not tolerated", source }
 */
export function nodeMatchesDaemonSet(node: NodeView, ds: DaemonSetView): DaemonSetMatch {
  for (const [key, want] of Object.entries(ds.nodeSelector)) {
    const have = node.labels[key];
    if (have !== want) {
      return {
        matches: false,
        rule: "nodeSelector",
        reason:
          have === undefined
            ? `node ${node.name} has no label ${key} (nodeSelector wants ${key}=${want})`
            : `node ${node.name} has ${key}=${have}, nodeSelector wants ${key}=${want}`,
        ...(ds.nodeSelectorSource ? { source: ds.nodeSelectorSource } : {}),
      };
    }
  }
  const terms = ds.requiredNodeAffinity;
  if (terms !== undefined && !terms.some((t) => termMatches(t, node))) {
    const first = terms[0];
    const failing = first
      ? [...first.matchExpressions, ...first.matchFields].find(
          (r) =>
            invalidRequirement(r, first.matchFields.includes(r)) !== undefined ||
            !requirementMatches(
              r,
              first.matchFields.includes(r) ? { "metadata.name": node.name } : node.labels,
            ),
        )
      : undefined;
    const invalid =
      failing && invalidRequirement(failing, first?.matchFields.includes(failing) ?? false);
    return {
      matches: false,
      rule: "nodeAffinity",
      reason:
        terms.length === 0
          ? "required node affinity has no nodeSelectorTerms, so it matches no node"
          : `node ${node.name} matches none of the ${terms.length} required node affinity term(s)${
              failing
                ? `; the first fails on ${describeRequirement(failing)}${invalid ? ` (${invalid})` : ""}`
                : " (an empty term matches no node)"
            }`,
      ...(failing ? { source: failing.source } : first ? { source: first.source } : {}),
    };
  }
  const tolerations = [...ds.tolerations, ...automaticDaemonSetTolerations(ds.hostNetwork)];
  for (const taint of node.taints) {
    if (taint.effect === "PreferNoSchedule") continue;
    if (tolerations.some((t) => toleratesTaint(t, taint))) continue;
    return {
      matches: false,
      rule: "taint",
      reason: `node ${node.name} has taint ${taint.key}${taint.value ? `=${taint.value}` : ""}:${taint.effect}, which the DaemonSet does not tolerate`,
      source: taint.source,
    };
  }
  return { matches: true };
}
