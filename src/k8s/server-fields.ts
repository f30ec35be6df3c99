/**
 * @module k8s/server-fields — the metadata the API server sets on an object (`resourceVersion`,
 * `uid`, `managedFields`, …): what a manifest read back from a cluster carries and a manifest one
 * applies must not.
 */

/** The metadata keys the API server sets; `kubectl apply` of a file that keeps them conflicts. */
export const SERVER_FIELDS = [
  "resourceVersion",
  "uid",
  "creationTimestamp",
  "managedFields",
  "generation",
  "selfLink",
] as const;

/** Deletes the server-set keys from an object's `metadata`, in place. */
export function deleteServerFields(meta: Record<string, unknown>): void {
  for (const k of SERVER_FIELDS) delete meta[k];
}
