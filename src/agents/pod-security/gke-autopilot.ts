/**
 * @module agents/pod-security/gke-autopilot — GKE Autopilot's GKE Warden admission rules that
 * matter for VPN pods, as public reports document them (2023–2025): no privileged containers, a
 * fixed capability list, no host namespaces, and no node kubelet configuration (so an unsafe
 * sysctl cannot be allowlisted). Google changes the capability list over time: treat it as a
 * documented snapshot, not a contract.
 */
import { BASELINE_CAPABILITIES } from "./checks-baseline.ts";
import { asArray, asObject, asString, type PodSpecView } from "./pod-spec.ts";

/**
 * Capabilities Autopilot admitted in the reports (`autogke-default-linux-capabilities`): the
 * baseline set plus NET_RAW and SYS_PTRACE.
 */
export const AUTOPILOT_CAPABILITIES: readonly string[] = [
  ...BASELINE_CAPABILITIES,
  "NET_RAW",
  "SYS_PTRACE",
];

export interface AutopilotViolation {
  /** The Warden constraint, e.g. `autogke-disallow-privilege`. */
  readonly constraint: string;
  readonly message: string;
}

export interface AutopilotVerdict {
  readonly allowed: boolean;
  readonly violations: readonly AutopilotViolation[];
  /** The API server's answer, as `kubectl apply` prints it; "" when allowed. */
  readonly message: string;
  /** What Autopilot cannot offer at all (e.g. unsafe sysctls: no node kubelet configuration). */
  readonly notes: readonly string[];
}

/**
 * Predicts GKE Warden's answer for a pod (or pod template). NET_ADMIN is admitted when the
 * cluster was created with `--workload-policies=allow-net-admin` (`allowNetAdmin`).
 */
export function checkAutopilot(
  pod: PodSpecView,
  opts: { readonly allowNetAdmin?: boolean; readonly safeSysctls?: readonly string[] } = {},
): AutopilotVerdict {
  const violations: AutopilotViolation[] = [];
  const allowedCaps = new Set<string>(AUTOPILOT_CAPABILITIES);
  if (opts.allowNetAdmin) allowedCaps.add("NET_ADMIN");
  for (const c of pod.containers) {
    if (c.securityContext?.["privileged"] === true) {
      violations.push({
        constraint: "autogke-disallow-privilege",
        message: `container ${c.name} is privileged; not allowed in Autopilot`,
      });
    }
  }
  for (const c of pod.containers) {
    const caps = asArray(asObject(c.securityContext?.["capabilities"])?.["add"]).map(String);
    for (const cap of caps) {
      if (!allowedCaps.has(cap)) {
        violations.push({
          constraint: "autogke-default-linux-capabilities",
          message: `linux capability '${cap}' on container '${c.name}' not allowed; Autopilot only allows the capabilities: '${[...allowedCaps].sort().join(",")}'.`,
        });
      }
    }
  }
  for (const key of ["hostNetwork", "hostPID", "hostIPC"] as const) {
    if (pod.spec[key] === true) {
      violations.push({
        constraint: "autogke-disallow-hostnamespaces",
        // reported wording for hostNetwork (CrowdStrike/falcon-helm#310); hostPID/hostIPC by analogy
        message: `enabling ${key} is not allowed in Autopilot.`,
      });
    }
  }
  const notes: string[] = [];
  const safe = new Set(opts.safeSysctls ?? []);
  const unsafe = asArray(pod.securityContext?.["sysctls"])
    .map((s) => asString(asObject(s)?.["name"]) ?? "")
    .filter((n) => !safe.has(n));
  if (unsafe.length > 0) {
    notes.push(
      `Autopilot offers no node kubelet configuration, so ${unsafe.join(", ")} cannot be allowlisted: expect the pod to be rejected (how Warden treats unsafe pod sysctls is not documented)`,
    );
  }
  const grouped = new Map<string, string[]>();
  for (const v of violations) {
    const key = `[denied by ${v.constraint}]`;
    grouped.set(key, [...(grouped.get(key) ?? []), v.message]);
  }
  const message =
    violations.length === 0
      ? ""
      : `admission webhook "warden-validating.common-webhooks.networking.gke.io" denied the request: GKE Warden rejected the request because it violates one or more constraints. Violations details: ${JSON.stringify(Object.fromEntries(grouped))}`;
  return { allowed: violations.length === 0, violations, message, notes };
}
