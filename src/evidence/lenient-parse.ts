/**
 * @module evidence/lenient-parse — validating a document against a zod schema while keeping what
 * is valid: each bad field becomes a diagnostic at its file line and is dropped, and the rest of
 * the document is still read.
 */
import type { z } from "zod";
import type { Diagnostic, SourceRef } from "../model/types.ts";
import type { KubeObject } from "./kube-objects.ts";

/** What the parser needs to know about the document: its value, and where its fields are written. */
export interface LocatedValue {
  readonly raw: unknown;
  /** Where the field at `path` is written, if it is. */
  locate(path: readonly (string | number)[]): SourceRef | undefined;
  /** Where the document starts: the fallback position. */
  readonly source: SourceRef;
  /** Names the document in messages (`Node gke-a-1`, `remote/onprem.yaml`). */
  readonly label: string;
}

/** A Kubernetes object as a {@link LocatedValue}. */
export function locatedObject(obj: KubeObject): LocatedValue {
  return {
    raw: obj.raw,
    locate: obj.locate,
    source: obj.source,
    label: `${obj.kind} ${obj.namespace ? `${obj.namespace}/` : ""}${obj.name}`,
  };
}

const MAX_ROUNDS = 8;

/**
 * Parses `doc.raw` with `schema`. Fields that fail are reported (with `code`, at the field's line)
 * and removed, then parsing is retried; undefined only when the document cannot be read at all.
 */
export function parseLenient<S extends z.ZodType>(
  schema: S,
  doc: LocatedValue,
  diagnostics: Diagnostic[],
  code = "KUBE_SCHEMA",
): z.output<S> | undefined {
  const obj = doc;
  let value: unknown = structuredClone(obj.raw);
  const removed = new Set<string>();
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const r = schema.safeParse(value);
    if (r.success) return r.data;
    const issues = [...r.error.issues].sort((a, b) => comparePaths(b.path, a.path));
    for (const issue of issues) {
      let path = issue.path.filter((p): p is string | number => typeof p !== "symbol");
      if (issue.code === "unrecognized_keys") {
        // Unknown keys are warnings: newer files still read with an older podpath.
        for (const key of issue.keys) {
          const at = [...path, key];
          diagnostics.push({
            code: "UNKNOWN_KEY",
            severity: "warning",
            message: `${obj.label}: unknown key ${[...path, key].join(".")}; ignored (expected one of the documented keys)`,
            source: nearestRef(obj, at),
          });
          removed.add(JSON.stringify(at));
          value = remove(value, at);
        }
        continue;
      }
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
        code,
        severity: "warning",
        message: `${obj.label}: ${path.join(".") || "(document)"}: ${issue.message}; ${
          path.length ? "the field was ignored" : "the document was skipped"
        }`,
        source: nearestRef(obj, path),
      });
      if (path.length === 0) return undefined;
      value = remove(value, path);
    }
  }
  return undefined;
}

function nearestRef(obj: LocatedValue, path: readonly (string | number)[]): SourceRef {
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
