/**
 * @module agents/pod-security/check-result — the result of one Pod Security check and the text
 * helpers every check uses to word it exactly as upstream (policy/checks.go, policy/helpers.go).
 */
import type { PodSpecView } from "./pod-spec.ts";

export interface CheckResult {
  readonly allowed: boolean;
  readonly reason?: string;
  readonly detail?: string;
}

export type CheckFn = (pod: PodSpecView) => CheckResult;

export const ALLOWED: CheckResult = { allowed: true };

export function forbidden(reason: string, detail: string): CheckResult {
  return { allowed: false, reason, detail };
}

/** `"a", "b"` — upstream joinQuote. */
export function joinQuote(items: readonly string[]): string {
  return items.length === 0 ? "" : `"${items.join('", "')}"`;
}

export function pluralize(singular: string, plural: string, count: number): string {
  return count === 1 ? singular : plural;
}

/** A sorted, de-duplicated list: Go's `sets.NewString(...).List()` (byte-wise order). */
export function sortedSet(items: Iterable<string>): string[] {
  return [...new Set(items)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** `container "a"` / `containers "a", "b"`. */
export function containersPhrase(names: readonly string[]): string {
  return `${pluralize("container", "containers", names.length)} ${joinQuote(names)}`;
}

/** Upstream relaxPolicyForUserNamespacePod: `hostUsers: false` relaxes some checks from v1.35. */
export function inUserNamespace(pod: PodSpecView): boolean {
  return pod.spec["hostUsers"] === false;
}

export function isWindowsPod(pod: PodSpecView): boolean {
  const os = pod.spec["os"];
  return (
    typeof os === "object" && os !== null && (os as Record<string, unknown>)["name"] === "windows"
  );
}
