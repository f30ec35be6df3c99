/**
 * @module live/collect-render — objects as `kubectl get -o yaml` prints them: a `List` with
 * `apiVersion`/`kind` on every item, keys sorted (kubectl goes through JSON → YAML, which sorts
 * map keys), sequences not indented, and `metadata.managedFields` removed (kubectl shows them
 * only with --show-managed-fields). Long strings are not folded (kubectl folds at 80 columns;
 * the content is the same either way). Pure.
 */
import { stringify } from "yaml";
import type { ApiResource, KubeObject } from "../k8s/cluster.ts";

export function apiVersionOf(res: ApiResource): string {
  return res.group === "" ? res.version : `${res.group}/${res.version}`;
}

/** One object as kubectl prints it: typed envelope, no managedFields. */
export function asKubectlObject(res: ApiResource, o: KubeObject): KubeObject {
  const { metadata, ...rest } = o;
  const { managedFields: _drop, ...meta } = metadata ?? {};
  return { ...rest, apiVersion: apiVersionOf(res), kind: res.kind, metadata: meta };
}

const YAML_OPTIONS = {
  sortMapEntries: true,
  // YAML 1.1 scalars (as go-yaml writes): "on", "yes", "0777" stay quoted strings for 1.1 readers
  version: "1.1",
  indentSeq: false,
  lineWidth: 0,
  aliasDuplicateObjects: false,
} as const;

/** `kubectl get <resource> -o yaml` for many objects. */
export function renderKubectlList(res: ApiResource, items: readonly KubeObject[]): string {
  return stringify(
    {
      apiVersion: "v1",
      items: items.map((o) => asKubectlObject(res, o)),
      kind: "List",
      metadata: { resourceVersion: "" },
    },
    YAML_OPTIONS,
  );
}

/** `kubectl get <resource> <name> -o yaml` for one object. */
export function renderKubectlObject(res: ApiResource, o: KubeObject): string {
  return stringify(asKubectlObject(res, o), YAML_OPTIONS);
}
