/**
 * @module k8s/workload-ref — a workload named as kubectl names one on its command line
 * (`deployment/web`, `deploy/web`, `statefulset/db`, `sts/db`, `daemonset/agent`, `ds/agent`).
 * Pure and dependency-free, so the CLI can tell it from a pod's `NAMESPACE/NAME` before loading
 * anything.
 */

/** The workload kinds `--pod KIND/NAME` names, by every spelling kubectl accepts. */
const WORKLOAD_SPELLINGS: Readonly<Record<string, string>> = {
  deployment: "Deployment",
  deployments: "Deployment",
  deploy: "Deployment",
  statefulset: "StatefulSet",
  statefulsets: "StatefulSet",
  sts: "StatefulSet",
  daemonset: "DaemonSet",
  daemonsets: "DaemonSet",
  ds: "DaemonSet",
};

/** A workload named as kubectl names one: `deployment/NAME` (or `deploy/`, `statefulset/`, …). */
export interface WorkloadRef {
  readonly kind: string;
  readonly name: string;
}

/**
 * The workload `text` names (`deployment/web`, `deploy/web`, `sts/db`, `daemonset/agent`, any
 * case of the kind), or undefined when it is no such reference (`NAMESPACE/NAME` of a pod).
 */
export function parseWorkloadRef(text: string): WorkloadRef | undefined {
  const m = /^([A-Za-z]+)(?:\.apps)?\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(text);
  const kind = m?.[1] ? WORKLOAD_SPELLINGS[m[1].toLowerCase()] : undefined;
  return kind && m?.[2] ? { kind, name: m[2] } : undefined;
}
