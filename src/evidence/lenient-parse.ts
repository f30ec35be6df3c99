/**
 * @module k8s/lenient-parse — validating a Kubernetes object against a narrow zod schema while
 * keeping what is valid: each bad field becomes a diagnostic at its file line and is dropped,
 * and the rest of the object is still read.
 */
import type { z } from "zod";
import type { KubeObject } from "../evidence/kube-objects.ts";
import type { Diagnostic } from "../model/types.ts";

const MAX_ROUNDS = 8;

/**
 * Parses `obj.raw` with `schema`. Fields that fail are reported (code `KUBE_SCHEMA`, at the field's
 * line) and removed, then parsing is retried; undefined only when the object cannot be read at all.
 */
export function parseLenient<S extends z.ZodType>(
  schema: S,
  obj: KubeObject,
  diagnostics: Diagnostic[],
): z.output<S> | undefined {
  let value: unknown = structuredClone(obj.raw);
  const removed = new Set<string>();
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const r = schema.safeParse(value);
    if (r.success) return r.data;
    const issues = [...r.error.issues].sort((a, b) => comparePaths(b.path, a.path));
    for (const issue of issues) {
      let path = issue.path.filter((p): p is string | number => typeof p !== "symbol");
      // A required field that was removed is reported again: remove its parent instead.
      if (removed.has(JSON.stringify(path))) {
        while (path.length > 0 && removed.has(JSON.stringify(path))) path = path.slice(0, -1);
        if (path.length === 0) return undefined;
        removed.add(JSON.stringify(path));
        value = remove(value, path);
        continue;
      }
      removed.add(JSON.stringify(path));
      diagnostics.push({
        code: "KUBE_SCHEMA",
        severity: "warning",
        message: `${obj.kind} ${obj.namespace ? `${obj.namespace}/` : ""}${obj.name}: ${path.join(".") || "(object)"}: ${issue.message}; the field was ignored`,
        source: nearestRef(obj, path),
      });
      if (path.length === 0) return undefined;
      value = remove(value, path);
    }
  }
  return undefined;
}

function nearestRef(obj: KubeObject, path: readonly (string | number)[]) {
  for (let n = path.length; n > 0; n--) {
    const ref = obj.locate(path.slice(0, n));
    if (ref) return ref;
  }
  return obj.source;
}

function comparePaths(a: readonly PropertyKey[], b: readonly PropertyKey[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === y) continue;
    if (typeof x === "number" && typeof y === "number") return x - y;
    return String(x) < String(y) ? -1 : 1;
  }
  return a.length - b.length;
}

/** A copy of `value` without the element at `path` (array elements are spliced out). */
function remove(value: unknown, path: readonly (string | number)[]): unknown {
  let parent: unknown = value;
  for (const seg of path.slice(0, -1)) {
    if (parent === null || typeof parent !== "object") return value;
    parent = (parent as Record<string | number, unknown>)[seg];
  }
  const last = path[path.length - 1]!;
  if (Array.isArray(parent) && typeof last === "number") parent.splice(last, 1);
  else if (parent !== null && typeof parent === "object")
    delete (parent as Record<string | number, unknown>)[last];
  return value;
}
