/**
 * @module policy/manifest-reader — Kubernetes objects from YAML or JSON text (single document,
 * multi-document, `kind: List` / `PodList` …) with the line of any field, for the policy and
 * admission checks. Interim: `evidence/kube-objects.ts` will own this; the shape here is kept
 * small so that switching is a one-line change in the callers.
 */
import { isMap, isSeq, LineCounter, type Node, parseAllDocuments } from "yaml";
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";

/** One object as written, with a way back to the text. */
export interface ManifestObject {
  readonly raw: Record<string, unknown>;
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
  /** The object's first line. */
  readonly source: SourceRef;
  /** Where the value at `path` (keys and indices below the object) is written, or its closest parent. */
  locate(path: readonly (string | number)[]): SourceRef | undefined;
}

type Json = unknown;

function str(v: Json): string | undefined {
  return typeof v === "string" ? v : undefined;
}

function isRecord(v: Json): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Reads every Kubernetes object in `text`. Bad documents become diagnostics naming file and line;
 * the others are kept.
 */
export function readManifestObjects(text: string, file: string): Parsed<ManifestObject[]> {
  const diagnostics: Diagnostic[] = [];
  const objects: ManifestObject[] = [];
  const lc = new LineCounter();
  const lineAt = (offset: number) => lc.linePos(offset).line;
  let docs: ReturnType<typeof parseAllDocuments>;
  try {
    docs = parseAllDocuments(text, { lineCounter: lc, uniqueKeys: false, prettyErrors: false });
  } catch (e) {
    diagnostics.push({
      code: "YAML_SYNTAX",
      severity: "error",
      message: `${file}: not YAML or JSON (${(e as Error).message})`,
      source: { file, line: 1 },
    });
    return { value: objects, diagnostics };
  }
  const list = Array.isArray(docs) ? docs : [docs];
  for (const doc of list) {
    if (!("errors" in doc)) continue;
    if (doc.errors.length > 0) {
      for (const err of doc.errors) {
        const line = err.linePos?.[0]?.line ?? lineAt(err.pos[0]);
        diagnostics.push({
          code: "YAML_SYNTAX",
          severity: "error",
          message: `${file}:${line}: ${err.message.split("\n")[0]}; this document is skipped`,
          source: { file, line },
        });
      }
      continue;
    }
    let value: Json;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (e) {
      const line = lineAt(doc.range?.[0] ?? 0);
      diagnostics.push({
        code: "YAML_SYNTAX",
        severity: "error",
        message: `${file}:${line}: ${(e as Error).message}; this document is skipped`,
        source: { file, line },
      });
      continue;
    }
    if (value === null || value === undefined) continue;
    const root = doc.contents as Node | null;
    const nodeAt = (base: readonly (string | number)[], path: readonly (string | number)[]) => {
      let node: unknown = root;
      let best = root?.range ? lineAt(root.range[0]) : 1;
      for (const key of [...base, ...path]) {
        let next: unknown;
        if (isMap(node)) next = node.get(key, true);
        else if (isSeq(node) && typeof key === "number") next = node.get(key, true);
        if (next === undefined || next === null) break;
        node = next;
        const r = (node as Node).range;
        if (r) best = lineAt(r[0]);
      }
      return best;
    };
    const add = (raw: Json, base: readonly (string | number)[], listKind?: string) => {
      const line = nodeAt(base, []);
      if (!isRecord(raw)) {
        diagnostics.push({
          code: "SCHEMA",
          severity: "error",
          message: `${file}:${line}: expected a Kubernetes object (a mapping with kind and metadata)`,
          source: { file, line },
        });
        return;
      }
      // items of a typed list (PodList) omit kind, as the API returns them
      const kind = str(raw["kind"]) ?? listKind;
      const items = raw["items"];
      if (kind?.endsWith("List") && Array.isArray(items)) {
        const itemKind = kind === "List" ? undefined : kind.slice(0, -"List".length);
        for (const [i, item] of items.entries()) add(item, [...base, "items", i], itemKind);
        return;
      }
      const meta = isRecord(raw["metadata"]) ? raw["metadata"] : {};
      if (kind === undefined) {
        diagnostics.push({
          code: "SCHEMA",
          severity: "warning",
          message: `${file}:${line}: object without kind; skipped`,
          source: { file, line },
        });
        return;
      }
      const name = str(meta["name"]) ?? str(meta["generateName"]) ?? "";
      objects.push({
        raw,
        kind,
        name,
        ...(str(meta["namespace"]) === undefined
          ? {}
          : { namespace: str(meta["namespace"]) as string }),
        source: { file, line, text: `${kind}/${name}` },
        locate: (path) => ({ file, line: nodeAt(base, path) }),
      });
    };
    add(value, []);
  }
  return { value: objects, diagnostics };
}
