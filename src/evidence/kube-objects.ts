/**
 * @module evidence/kube-objects — Kubernetes objects as `kubectl get -o yaml|json` prints them (one
 * object, a `List`/`*List` with `items`, or a multi-document YAML stream), each with the file line
 * of any of its fields.
 */
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { readBlockYaml } from "./block-yaml.ts";
import { jsonErrorOffset } from "./json-error.ts";
import { jsonLocator, offsetCiter, offsetOfStringLine, splitJsonStream } from "./json-source.ts";
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
  const { documents, diagnostics, start } = readDocuments(text, file);
  const objects: KubeObject[] = [];

  const make = (
    doc: LocatedDocument,
    base: YamlPath,
    value: Json,
    inherited?: { apiVersion: string; kind: string },
  ) => {
    const obj = objectOf(doc, base, value, inherited, start, diagnostics);
    if (obj) objects.push(obj);
  };

  for (const d of documents) {
    const v = d.value;
    if (v === null || v === undefined) continue; // an empty document, e.g. after a trailing `---`
    if (!isRecord(v)) {
      diagnostics.push({
        code: "KUBE_NOT_OBJECT",
        severity: "error",
        message: `expected a Kubernetes object (a mapping with apiVersion and kind), found ${
          Array.isArray(v) ? "a sequence" : `the scalar ${JSON.stringify(String(v)).slice(0, 60)}`
        }`,
        source: d.locate([]) ?? start,
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
        if (isRecord(item)) make(d, ["items", i], item, inherited);
        else
          diagnostics.push({
            code: "KUBE_NOT_OBJECT",
            severity: "error",
            message: `items[${i}] of the ${kind} is not a mapping; expected a Kubernetes object`,
            source: d.locate(["items", i]) ?? start,
          });
      });
      continue;
    }
    make(d, [], v);
  }
  return { value: objects, diagnostics };
}

/**
 * The object `value` at `base` of a document (a list item inherits its list's apiVersion and
 * kind); undefined, with a diagnostic, when it has no apiVersion or kind. Exported for readers
 * that locate values their own way (a List streamed item by item: snapshot/kube-list-stream).
 */
export function objectOf(
  doc: LocatedDocument,
  base: YamlPath,
  value: Json,
  inherited: { apiVersion: string; kind: string } | undefined,
  start: SourceRef,
  diagnostics: Diagnostic[],
): KubeObject | undefined {
  const here = (path: YamlPath) => [...base, ...path];
  const at = doc.locate(base) ?? start;
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
    return undefined;
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
    () => doc.locate(here(["metadata", "labels"])) ?? at,
    diagnostics,
  );
  const annotations = stringMap(
    meta.annotations,
    "annotations",
    kind,
    () => doc.locate(here(["metadata", "annotations"])) ?? at,
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
    locate: (path) => doc.locate(here(path)),
    locateInString: (path, line) => doc.locateInString(here(path), line),
  };
  return obj;
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

/** One document's value and the means to cite its fields. */
export interface LocatedDocument {
  readonly value: unknown;
  locate(path: YamlPath): SourceRef | undefined;
  locateInString(path: YamlPath, lineWithinString: number): SourceRef | undefined;
}

/**
 * The documents of `text`. Valid JSON (what `kubectl get -o json` prints) is read with
 * `JSON.parse` and located on demand; kubectl's plain block YAML with the fast block reader;
 * everything else, and anything with errors (for the error's line), with the full YAML reader.
 */
function readDocuments(
  text: string,
  file: string,
): { documents: LocatedDocument[]; diagnostics: Diagnostic[]; start: SourceRef } {
  const first = /\S/.exec(text)?.[0];
  const isJson = first === "{" || first === "[";
  if (isJson) {
    let parts: { start: number; value: unknown }[] | undefined;
    try {
      parts = [{ start: text.indexOf(first), value: JSON.parse(text) }];
    } catch {
      parts = splitJsonStream(text);
    }
    if (parts) {
      const cite = offsetCiter(text, file);
      const documents = parts.map(({ start, value }): LocatedDocument => {
        const loc = jsonLocator(text, start);
        return {
          value,
          locate: (path) => {
            const spot = loc.find(path);
            if (!spot) return undefined;
            // Collections and nulls are cited at their key, other values where they are written.
            const c = text[spot.value];
            const atKey = c === "{" || c === "[" || c === "n";
            return cite(atKey && spot.key !== undefined ? spot.key : spot.value);
          },
          locateInString: (path, n) => {
            const spot = loc.find(path);
            if (!spot || text[spot.value] !== '"' || !Number.isInteger(n) || n < 1)
              return undefined;
            const at = offsetOfStringLine(text, spot.value, n - 1);
            return at === undefined ? undefined : cite(at);
          },
        };
      });
      return { documents, diagnostics: [], start: cite(parts[0]!.start) };
    }
  }
  // kubectl's plain block YAML: read fast when the text stays within that subset.
  const block = isJson ? undefined : readBlockYaml(text);
  if (block) {
    const cite = offsetCiter(text, file);
    const documents = block.map(
      (d): LocatedDocument => ({
        value: d.value,
        locate: (path) => {
          const at = d.locate(path);
          return at === undefined ? undefined : cite(at);
        },
        locateInString: (path, n) => {
          const at = d.locateInString(path, n);
          return at === undefined ? undefined : cite(at);
        },
      }),
    );
    return { documents, diagnostics: [], start: cite(0) };
  }
  const { source, diagnostics } = readYamlSource(text, file);
  const documents = source.documents
    .filter((d) => d.ok)
    .map((d): LocatedDocument => {
      const root = d.doc.contents;
      return {
        value: d.value,
        locate: (path) => source.locate(root, path),
        locateInString: (path, n) => source.locateInString(root, path, n),
      };
    });
  const jsonAt =
    isJson && diagnostics.some((d) => d.code === "YAML_SYNTAX") ? jsonErrorOffset(text) : undefined;
  if (jsonAt !== undefined) {
    // Text that looks like JSON and is not valid YAML either: say where the JSON goes wrong.
    const rest = diagnostics.filter((d) => d.code !== "YAML_SYNTAX");
    rest.unshift({
      code: "JSON_SYNTAX",
      severity: "error",
      message: `invalid JSON at ${JSON.stringify(text.slice(jsonAt, jsonAt + 20))}; expected JSON as kubectl get -o json prints it, nothing after this point was read`,
      source: offsetCiter(text, file)(jsonAt),
    });
    return { documents, diagnostics: rest, start: source.refAt(0) };
  }
  return { documents, diagnostics, start: source.refAt(0) };
}
