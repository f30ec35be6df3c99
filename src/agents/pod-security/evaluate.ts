/**
 * @module agents/pod-security/evaluate — Pod Security Admission's verdict on a Pod or pod
 * controller: the checks of a level and version, the aggregated reasons, and the exact text the
 * API server returns (enforce: `pods "x" is forbidden: violates PodSecurity …`; warn:
 * `would violate PodSecurity …`, printed by kubectl as `Warning: …`).
 */

import { type JsonObject, type PodSpecView, podViewOf } from "./pod-spec.ts";
import {
  effectiveMinor,
  formatLevelVersion,
  LATEST,
  type Level,
  type LevelVersion,
  type NamespacePolicy,
  type PolicyVersion,
  parseVersion,
} from "./policy-level.ts";
import { checksFor } from "./registry.ts";

/** One failed check, as upstream reports it: `reason (detail)`. */
export interface Violation {
  readonly check: string;
  readonly reason: string;
  readonly detail: string;
}

export interface PodSecurityResult {
  readonly allowed: boolean;
  readonly level: Level;
  /** `latest` or `v1.N`, as asked. */
  readonly version: string;
  readonly violations: readonly Violation[];
  /** Upstream ForbiddenDetail(): the violations joined as `reason (detail), …`; "" when allowed. */
  readonly detail: string;
  /**
   * What the user sees. Pod: `pods "x" is forbidden: violates PodSecurity "baseline:latest": …`.
   * Controller: `Warning: would violate PodSecurity "baseline:latest": …` (controllers are only
   * warned about; the pods they create are rejected with {@link PodSecurityResult.podMessage}).
   * "" when allowed.
   */
  readonly message: string;
  /** The rejection of the pod itself (for a controller: of each pod it tries to create). */
  readonly podMessage: string;
  readonly kind: string;
  readonly name: string;
}

/** Runs the checks of one level and version over a pod view. */
export function evaluatePod(
  pod: PodSpecView,
  lv: LevelVersion,
  clusterMinor?: number,
): Violation[] {
  const out: Violation[] = [];
  for (const check of checksFor(lv.level, effectiveMinor(lv.version, clusterMinor))) {
    const r = check.fn(pod);
    if (!r.allowed) {
      out.push({
        check: check.id,
        reason: r.reason && r.reason.length > 0 ? r.reason : "unknown forbidden reason",
        detail: r.detail ?? "",
      });
    }
  }
  return out;
}

/** Upstream AggregateCheckResult.ForbiddenDetail(). */
export function forbiddenDetail(violations: readonly Violation[]): string {
  return violations
    .map((v) => (v.detail === "" ? v.reason : `${v.reason} (${v.detail})`))
    .join(", ");
}

/** apierrors.NewForbidden for resource `pods`. */
export function podForbiddenMessage(name: string, lv: LevelVersion, detail: string): string {
  const who = name === "" ? "pods" : `pods ${JSON.stringify(name)}`;
  return `${who} is forbidden: violates PodSecurity ${JSON.stringify(formatLevelVersion(lv))}: ${detail}`;
}

export function warningMessage(lv: LevelVersion, detail: string): string {
  return `would violate PodSecurity ${JSON.stringify(formatLevelVersion(lv))}: ${detail}`;
}

function nameOf(object: JsonObject): string {
  const meta = object["metadata"];
  if (typeof meta !== "object" || meta === null) return "";
  const m = meta as Record<string, unknown>;
  return typeof m["name"] === "string" ? m["name"] : "";
}

/**
 * Checks a Pod, a pod controller (Deployment, DaemonSet, StatefulSet, ReplicaSet, Job, CronJob,
 * ReplicationController, PodTemplate) or a bare PodSpec against one level and version. Undefined
 * when the object carries no pod spec.
 *
 * @example
 * checkPodSecurity(pod, { level: "baseline" }).message
 * // pods "vpn" is forbidden: violates PodSecurity "baseline:latest": forbidden sysctls (net.ipv4.ip_forward)
 */
export function checkPodSecurity(
  object: JsonObject,
  opts: { readonly level: Level; readonly version?: PolicyVersion | string },
): PodSecurityResult | undefined {
  // a bare PodSpec is checked as an unnamed Pod
  if (object["kind"] === undefined && Array.isArray(object["containers"])) {
    return checkPodSecurity({ kind: "Pod", metadata: {}, spec: object }, opts);
  }
  const pod = podViewOf(object);
  if (!pod) return undefined;
  const version =
    typeof opts.version === "string"
      ? parseVersion(opts.version).version
      : (opts.version ?? LATEST);
  const lv: LevelVersion = { level: opts.level, version };
  const violations = evaluatePod(pod, lv);
  const detail = forbiddenDetail(violations);
  const name = nameOf(object);
  const kind = String(object["kind"]);
  const allowed = violations.length === 0;
  const podName = pod.isController ? `${name}-…` : name;
  const podMessage = allowed ? "" : podForbiddenMessage(podName, lv, detail);
  const message = allowed
    ? ""
    : pod.isController
      ? `Warning: ${warningMessage(lv, detail)}`
      : podMessage;
  return {
    allowed,
    level: lv.level,
    version: lv.version.latest ? "latest" : `v1.${lv.version.minor}`,
    violations,
    detail,
    message,
    podMessage,
    kind,
    name,
  };
}

/** What the API server does with a create request under a namespace's full policy. */
export interface AdmissionResponse {
  /** False only when enforce rejects a Pod (controllers are never rejected by PSA). */
  readonly allowed: boolean;
  /** The error returned when rejected. */
  readonly error?: string;
  /** `Warning: would violate PodSecurity …` lines kubectl prints (only when allowed). */
  readonly warnings: readonly string[];
  /** The `pod-security.kubernetes.io/audit-violations` annotation, when audit finds violations. */
  readonly auditViolations?: string;
  /** For a controller: the error each pod it creates would meet under enforce. */
  readonly podError?: string;
}

/**
 * `clusterMinor` is the API server's own minor version: `latest` means that version there.
 * Upstream admission.go: Pods are checked against enforce, audit and warn; controllers against
 * warn and audit only (and their pods later meet enforce). Warnings are not added to a rejected
 * request.
 */
export function admit(
  object: JsonObject,
  policy: NamespacePolicy,
  clusterMinor?: number,
): AdmissionResponse | undefined {
  const pod = podViewOf(object);
  if (!pod) return undefined;
  const name = nameOf(object);
  const detailFor = (lv: LevelVersion) => forbiddenDetail(evaluatePod(pod, lv, clusterMinor));
  const enforceDetail = detailFor(policy.enforce);
  const auditDetail = detailFor(policy.audit);
  const warnDetail = detailFor(policy.warn);
  const audit =
    auditDetail === "" ? {} : { auditViolations: warningMessage(policy.audit, auditDetail) };
  if (!pod.isController && enforceDetail !== "") {
    return {
      allowed: false,
      error: podForbiddenMessage(name, policy.enforce, enforceDetail),
      warnings: [],
      ...audit,
    };
  }
  const warnings = warnDetail === "" ? [] : [`Warning: ${warningMessage(policy.warn, warnDetail)}`];
  const podError =
    pod.isController && enforceDetail !== ""
      ? { podError: podForbiddenMessage(`${name}-…`, policy.enforce, enforceDetail) }
      : {};
  return { allowed: true, warnings, ...audit, ...podError };
}
