/**
 * @module evidence/kube-objects — Kubernetes objects as `kubectl get -o yaml|json` prints them (one
 * object, a `List`/`*List` with `items`, or a multi-document YAML stream), each with the file line
 * of any of its fields.
 */
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { readYamlSource, type YamlPath } from "./yaml-source.ts";

/** One object read from a file. `raw` is the plain JS value; positions come from `locate`. */
export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly raw: Readonly<Record<string, unknown>>;
  /** The line where the object starts. */
  readonly source: SourceRef;
  /** Where the field at `path` (relative to the object, e.g. `["spec", "containers", 0, "image"]`) is written. */
  locate(path: YamlPath): SourceRef | undefined;
  /**
   * The file line of line `lineWithinString` (1-based) of the string field at `path`, e.g. line 3
   * of a ConfigMap's `data.config` block: where a `nonMasqueradeCIDRs` entry is written.
   */
  locateInString(path: YamlPath, lineWithinString: number): SourceRef | undefined;
}

type Json = Record<string, unknown>;

const isRecord = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Reads every Kubernetes object in `text`. Lists are flattened into their items; items of typed
 * lists that omit `apiVersion`/`kind` (as the API returns them) take them from the list.
 * Documents with syntax errors are skipped with a diagnostic; the others are still read.
 *
 * @example
 *   const { value, diagnostics } = readKubeObjects(text, "cluster/configmaps.yaml");
 *   const cm = value.find((o) => o.kind === "ConfigMap" && o.name === "ip-masq-agent");
 *   cm?.locateInString(["data", "config"], 2); // { file, line: 8, col: 7, text: "- 10.0.0.0/8" }
 */
export function readKubeObjects(text: string, file: string): Parsed<KubeObject[]> {
  const { source, diagnostics } = readYamlSource(text, file);
  const objects: KubeObject[] = [];

  const make = (
    root: unknown,
    base: YamlPath,
    value: Json,
    inherited?: { apiVersion: string; kind: string },
  ) => {
    const here = (path: YamlPath) => [...base, ...path];
    const at = source.locate(root, base) ?? source.refAt(0);
    const meta = isRecord(value.metadata) ? value.metadata : {};
    const apiVersion =
      typeof value.apiVersion === "string" ? value.apiVersion : inherited?.apiVersion;
    const kind = typeof value.kind === "string" ? value.kind : inherited?.kind;
    if (apiVersion === undefined || kind === undefined) {
      diagnostics.push({
        code: "KUBE_NOT_OBJECT",
        severity: "error",
        message: `expected a Kubernetes object with string fields apiVersion and kind; this ${
          base.length ? "list item" : "document"
        } was skipped`,
        source: at,
      });
      return;
    }
    const name = typeof meta.name === "string" ? meta.name : "";
    if (name === "") {
      diagnostics.push({
        code: "KUBE_MISSING_NAME",
        severity: "warning",
        message: `${kind} has no metadata.name; expected the name kubectl prints for every object`,
        source: at,
      });
    }
    const labels = stringMap(
      meta.labels,
      "labels",
      kind,
      () => source.locate(root, here(["metadata", "labels"])) ?? at,
      diagnostics,
    );
    const annotations = stringMap(
      meta.annotations,
      "annotations",
      kind,
      () => source.locate(root, here(["metadata", "annotations"])) ?? at,
      diagnostics,
    );
    const obj: KubeObject = {
      apiVersion,
      kind,
      name,
      ...(typeof meta.namespace === "string" ? { namespace: meta.namespace } : {}),
      labels,
      annotations,
      raw: value,
      source: at,
      locate: (path) => source.locate(root, here(path)),
      locateInString: (path, line) => source.locateInString(root, here(path), line),
    };
    objects.push(obj);
  };

  for (const d of source.documents) {
    if (!d.ok) continue;
    const root = d.doc.contents;
    const v = d.value;
    if (v === null || v === undefined) continue; // an empty document, e.g. after a trailing `---`
    if (!isRecord(v)) {
      diagnostics.push({
        code: "KUBE_NOT_OBJECT",
        severity: "error",
        message: `expected a Kubernetes object (a mapping with apiVersion and kind), found ${
          Array.isArray(v) ? "a sequence" : `the scalar ${JSON.stringify(String(v)).slice(0, 60)}`
        }`,
        source: source.refAt((root as { range?: number[] } | null)?.range?.[0] ?? 0),
      });
      continue;
    }
    const kind = typeof v.kind === "string" ? v.kind : "";
    const unnamed = !isRecord(v.metadata) || typeof v.metadata.name !== "string";
    if (kind.endsWith("List") && (Array.isArray(v.items) || (v.items == null && unnamed))) {
      // `kubectl get pods -o yaml` prints `kind: List`; the API's own lists are `PodList` etc.
      const inherited =
        kind !== "List" && typeof v.apiVersion === "string"
          ? { apiVersion: v.apiVersion, kind: kind.slice(0, -"List".length) }
          : undefined;
      (Array.isArray(v.items) ? v.items : []).forEach((item: unknown, i: number) => {
        if (isRecord(item)) make(root, ["items", i], item, inherited);
        else
          diagnostics.push({
            code: "KUBE_NOT_OBJECT",
            severity: "error",
            message: `items[${i}] of the ${kind} is not a mapping; expected a Kubernetes object`,
            source: source.locate(root, ["items", i]) ?? source.refAt(0),
          });
      });
      continue;
    }
    make(root, [], v);
  }
  return { value: objects, diagnostics };
}

function stringMap(
  v: unknown,
  what: string,
  kind: string,
  where: () => SourceRef,
  diagnostics: Diagnostic[],
): Record<string, string> {
  const out: Record<string, string> = {};
  if (v === undefined || v === null) return out;
  if (!isRecord(v)) {
    diagnostics.push({
      code: "KUBE_SCHEMA",
      severity: "warning",
      message: `${kind} metadata.${what} is not a mapping; expected string keys and values, ignored`,
      source: where(),
    });
    return out;
  }
  for (const [k, val] of Object.entries(v)) {
    if (typeof val === "string") out[k] = val;
    else
      diagnostics.push({
        code: "KUBE_SCHEMA",
        severity: "warning",
        message: `${kind} metadata.${what}.${k} is ${typeof val}; expected a string (quote it), ignored`,
        source: where(),
      });
  }
  return out;
}
