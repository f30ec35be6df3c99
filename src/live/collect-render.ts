/**
 * @module live/collect-render — objects as `kubectl get -o yaml` prints them: a `List` with
 * `apiVersion`/`kind` on every item, keys sorted (kubectl goes through JSON → YAML, which sorts
 * map keys), sequences not indented, and `metadata.managedFields` removed (kubectl shows them
 * only with --show-managed-fields); string styles, key order and the folding of long strings as
 * kubectl's writer does them (collect-yaml-style.ts). Pure.
 */
import { Document, isScalar, type Pair, visit } from "yaml";
import type { ApiObject, ApiResource } from "../k8s/cluster.ts";
import { compareKubectlKeys, foldLikeKubectl, kubectlScalarStyle } from "./collect-yaml-style.ts";

export function apiVersionOf(res: ApiResource): string {
  return res.group === "" ? res.version : `${res.group}/${res.version}`;
}

/** One object as kubectl prints it: typed envelope, no managedFields. */
export function asKubectlObject(res: ApiResource, o: ApiObject): ApiObject {
  const { metadata, ...rest } = o;
  const { managedFields: _drop, ...meta } = metadata ?? {};
  return { ...rest, apiVersion: apiVersionOf(res), kind: res.kind, metadata: meta };
}

const keyText = (p: Pair) => String(isScalar(p.key) ? p.key.value : p.key);

const YAML_OPTIONS = {
  sortMapEntries: (a: Pair, b: Pair) => compareKubectlKeys(keyText(a), keyText(b)),
  // YAML 1.1 scalars (as go-yaml writes): "on", "yes", "0777" stay quoted strings for 1.1 readers
  version: "1.1",
  indentSeq: false,
  lineWidth: 0,
  // go-yaml escapes in double quotes as JSON does (\n, \t, \"), keeping a space before a newline
  doubleQuotedAsJSON: true,
  aliasDuplicateObjects: false,
} as const;

/** YAML text with kubectl's scalar styles and key order. */
function stringify(value: unknown): string {
  const doc = new Document(value, YAML_OPTIONS);
  visit(doc, {
    Scalar(key, node) {
      if (typeof node.value === "string") node.type = kubectlScalarStyle(node.value, key === "key");
    },
  });
  return foldLikeKubectl(doc.toString(YAML_OPTIONS));
}

/** `kubectl get <resource> -o yaml` for many objects. */
export function renderKubectlList(res: ApiResource, items: readonly ApiObject[]): string {
  return stringify({
    apiVersion: "v1",
    items: items.map((o) => asKubectlObject(res, o)),
    kind: "List",
    metadata: { resourceVersion: "" },
  });
}

/** `kubectl get <resource> <name> -o yaml` for one object. */
export function renderKubectlObject(res: ApiResource, o: ApiObject): string {
  return stringify(asKubectlObject(res, o));
}
