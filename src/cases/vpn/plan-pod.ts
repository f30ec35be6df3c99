/**
 * @module cases/vpn/plan-pod — which pods of a snapshot are VPN servers, so `plan vpn` needs no
 * `--pod` when there is exactly one: pods whose evidence holds a tunnel kind's own config or a
 * tunnel device, else Pods and controllers a kind recognises (the OpenVPN chart, a WireGuard
 * image); and the pods of a workload named as kubectl names it (`--pod deployment/NAME`,
 * `deploy/`, `statefulset/`, `daemonset/`). Pure.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { WorkloadRef } from "../../k8s/workload-ref.ts";
import { WORKLOAD_KINDS, workloadSelects } from "../../k8s/workloads.ts";
import type { VpnInput } from "./input.ts";
import { detectKind } from "./kinds/index.ts";

const isTun = (name: string) => /^(tun|tap|wg)/.test(name);

/** `NS/NAME` of every VPN server pod the snapshot shows, in a stable order. */
export function vpnPodCandidates(input: VpnInput): string[] {
  const fromEvidence = input.pods
    .filter(
      (p) =>
        detectKind(p, [], input)?.strength === "config" ||
        p.ipAddr?.interfaces.some((i) => isTun(i.name)),
    )
    .map((p) => `${p.namespace}/${p.name}`);
  if (fromEvidence.length > 0) return [...new Set(fromEvidence)].sort();
  const byManifest = (o: KubeObject) => detectKind(undefined, [o], input) !== undefined;
  const pods = input.objects.filter((o) => o.kind === "Pod" && byManifest(o));
  const chosen =
    pods.length > 0
      ? pods
      : input.objects.filter((o) => WORKLOAD_KINDS.includes(o.kind) && byManifest(o));
  return [...new Set(chosen.map((o) => `${o.namespace ?? "default"}/${o.name}`))].sort();
}

/** The pods a workload makes, as `plan vpn` takes them, or why there is none to take. */
export type WorkloadPods =
  | {
      readonly kind: "found";
      /** `NAMESPACE/NAME` of the workload. */
      readonly workload: string;
      /**
       * `NAMESPACE/NAME` of each of its pods the snapshot shows (a Pod object or a `pods/NS/NAME/`
       * folder), those with evidence from inside the pod first; the workload itself when the
       * snapshot holds only its manifest (a rendered chart), as `plan vpn` reads it.
       */
      readonly pods: readonly string[];
    }
  | { readonly kind: "none" | "ambiguous"; readonly message: string };

/**
 * Whether `podName` is the name the controller of `ref` gives its pods (for a pod known only by its
 * folder): a Deployment's `NAME-<pod-template-hash>-<5>`, a StatefulSet's `NAME-<ordinal>`, a
 * DaemonSet's `NAME-<5>` (the API server's generateName suffix: 5 characters).
 */
function madeBy(ref: WorkloadRef, podName: string): boolean {
  if (!podName.startsWith(`${ref.name}-`)) return false;
  const rest = podName.slice(ref.name.length + 1);
  if (ref.kind === "StatefulSet") return /^\d+$/.test(rest);
  if (ref.kind === "DaemonSet") return /^[a-z0-9]{5}$/.test(rest);
  return /^[a-z0-9]{1,10}-[a-z0-9]{5}$/.test(rest);
}

/**
 * The pods of the workload `ref` names, in `namespace` or (when undefined) in whichever namespace
 * of the snapshot holds it. A pod is the workload's when its labels are selected by the workload's
 * `spec.selector` (k8s/workloads) or, for a pod known only by its folder, its name is one its
 * controller gives (`web-7d9f5c6b8-x2x7k`, `db-0`, `agent-x7k2p`).
 */
export function podsOfWorkload(
  input: VpnInput,
  ref: WorkloadRef,
  namespace?: string,
): WorkloadPods {
  const said = `${ref.kind.toLowerCase()}/${ref.name}`;
  const matches = input.objects.filter(
    (o) =>
      o.kind === ref.kind &&
      o.name === ref.name &&
      (namespace === undefined || (o.namespace ?? "default") === namespace),
  );
  const namespaces = [...new Set(matches.map((o) => o.namespace ?? "default"))].sort();
  if (namespaces.length === 0) {
    return {
      kind: "none",
      message: `the snapshot holds no ${ref.kind} ${ref.name}${namespace === undefined ? "" : ` in namespace ${namespace}`} (kubectl get ${ref.kind.toLowerCase()} ${ref.name}${namespace === undefined ? "" : ` -n ${namespace}`} -o yaml > cluster/${ref.name}.yaml)`,
    };
  }
  if (namespaces.length > 1) {
    return {
      kind: "ambiguous",
      message: `${said} is in several namespaces (${namespaces.join(", ")}): give -n NAMESPACE`,
    };
  }
  const ns = namespaces[0]!;
  const workload = matches[0]!;
  const fromObjects = input.objects
    .filter((o) => o.kind === "Pod" && (o.namespace ?? "default") === ns)
    .filter((o) => workloadSelects(workload, o.labels))
    .map((o) => o.name);
  const known = new Set(
    input.objects
      .filter((o) => o.kind === "Pod")
      .map((o) => `${o.namespace ?? "default"}/${o.name}`),
  );
  const withEvidence = input.pods
    .filter((p) => p.namespace === ns)
    .filter((p) =>
      known.has(`${ns}/${p.name}`) ? fromObjects.includes(p.name) : madeBy(ref, p.name),
    )
    .map((p) => p.name);
  const names = [...new Set([...[...withEvidence].sort(), ...[...fromObjects].sort()])];
  return {
    kind: "found",
    workload: `${ns}/${ref.name}`,
    pods: names.length > 0 ? names.map((n) => `${ns}/${n}`) : [`${ns}/${ref.name}`],
  };
}
