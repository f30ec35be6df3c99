/**
 * @module k8s/workloads — which workload (Deployment, StatefulSet, DaemonSet, ReplicaSet) makes a
 * pod: the one whose `spec.selector` selects the pod's labels (matchLabels and matchExpressions,
 * matched as the API machinery does), else the one whose name prefixes the pod's.
 */
import type { KubeObject } from "../evidence/kube-objects.ts";
import type { Diagnostic } from "../model/types.ts";
import { parseLabelSelector, selectorMatches } from "../policy/label-selector.ts";

/** The kinds whose pod template makes pods. */
export const WORKLOAD_KINDS: readonly string[] = [
  "Deployment",
  "StatefulSet",
  "DaemonSet",
  "ReplicaSet",
];

/**
 * Does the workload's `spec.selector` select these labels? A selector with no requirement (or an
 * invalid one) selects nothing here: apps/v1 refuses a workload with an empty selector.
 */
export function workloadSelects(
  workload: KubeObject,
  labels: Readonly<Record<string, string>>,
): boolean {
  const spec = workload.raw["spec"];
  const raw =
    typeof spec === "object" && spec !== null ? (spec as Record<string, unknown>)["selector"] : {};
  const diagnostics: Diagnostic[] = [];
  const where = workload.locate(["spec", "selector"]) ?? workload.source;
  const selector = parseLabelSelector(raw, where, diagnostics);
  return selector.requirements.length > 0 && selectorMatches(selector, labels);
}

/**
 * The workload that makes a pod in `namespace`: among those whose selector selects the pod's
 * labels, else those whose name prefixes the pod's name (`web-7d9f…` of Deployment `web`), a
 * Deployment first, then any other kind than ReplicaSet, then a ReplicaSet.
 */
export function workloadOf(
  objects: readonly KubeObject[],
  namespace: string,
  podName: string,
  labels?: Readonly<Record<string, string>>,
): KubeObject | undefined {
  const inNs = objects.filter(
    (o) => WORKLOAD_KINDS.includes(o.kind) && (o.namespace ?? "default") === namespace,
  );
  const byKind = (list: KubeObject[]) =>
    list.find((o) => o.kind === "Deployment") ??
    list.find((o) => o.kind !== "ReplicaSet") ??
    list[0];
  if (labels) {
    const chosen = byKind(inNs.filter((o) => workloadSelects(o, labels)));
    if (chosen) return chosen;
  }
  return byKind(inNs.filter((o) => podName.startsWith(`${o.name}-`)));
}
