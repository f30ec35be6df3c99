/**
 * @module agents/kube-apiserver/strict-decoding — what the API server says of a manifest's fields
 * under strict field validation (kubectl's default `--validate=strict` since 1.25): every field the
 * object's Go type does not have is an error, reported as
 *
 *   Deployment in version "v1" cannot be handled as a Deployment: strict decoding error:
 *   unknown field "spec.template.spec.containers[0].sysctls"
 *
 * with the field paths in the order the server meets them. kubectl sends the object as JSON made
 * from a Go map, so the keys of each object arrive sorted; the server decodes depth first. A
 * misplaced field (a pod-level field inside a container) is an unknown field at the place written.
 *
 * The types are the API's own, from the OpenAPI-generated models of `@kubernetes/client-node`
 * (each model's `attributeTypeMap`, spec v1.34): no field list is written by hand here. A kind the
 * models do not know (a custom resource) is not checked and says so.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { SourceRef } from "../../model/types.ts";

/** A model as the generated code describes it. */
interface Model {
  getAttributeTypeMap(): readonly { readonly baseName: string; readonly type: string }[];
}
export type ModelTable = Readonly<Record<string, unknown>>;

/** One field the object's type does not have. */
export interface UnknownField {
  /** As the server writes it: `spec.template.spec.containers[0].sysctls`. */
  readonly path: string;
  readonly source?: SourceRef;
}

export type StrictDecoding =
  | { readonly state: "ok" }
  | {
      readonly state: "rejected";
      /** The server's message, after kubectl's `error when creating "FILE": `. */
      readonly message: string;
      readonly fields: readonly UnknownField[];
    }
  /** The kind has no model here (a custom resource, or a version the models do not carry). */
  | { readonly state: "unchecked"; readonly reason: string };

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Versions whose kinds carry their group in the model name (`CoreV1Event`, `EventsV1Event`). */
function groupPrefix(apiVersion: string): string {
  const group = apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : "core";
  const first = group.split(".")[0] ?? group;
  return first.charAt(0).toUpperCase() + first.slice(1);
}

function modelOf(models: ModelTable, name: string): Model | undefined {
  const m = models[name];
  return typeof m === "function" && "getAttributeTypeMap" in m
    ? (m as unknown as Model)
    : undefined;
}

/** The model name for an object's apiVersion and kind: `apps/v1` Deployment → `V1Deployment`. */
export function modelNameFor(
  models: ModelTable,
  apiVersion: string,
  kind: string,
): string | undefined {
  const version = apiVersion.includes("/")
    ? apiVersion.slice(apiVersion.indexOf("/") + 1)
    : apiVersion;
  const v = version.charAt(0).toUpperCase() + version.slice(1);
  for (const name of [`${groupPrefix(apiVersion)}${v}${kind}`, `${v}${kind}`]) {
    if (modelOf(models, name)) return name;
  }
  return undefined;
}

type Path = readonly (string | number)[];

function render(path: Path): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out ? `.${p}` : p;
  return out;
}

/** Walks `value` as the type `type` and collects the fields it does not have. */
function walk(models: ModelTable, type: string, value: unknown, path: Path, out: Path[]): void {
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    if (Array.isArray(value))
      value.forEach((v, i) => {
        walk(models, array[1]!, v, [...path, i], out);
      });
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (isRecord(value))
      for (const key of Object.keys(value).sort())
        walk(models, map[1]!, value[key], [...path, key], out);
    return;
  }
  const model = modelOf(models, type);
  if (!model || !isRecord(value)) return; // scalars, IntOrString, any, Date: no fields to check
  const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  for (const key of Object.keys(value).sort()) {
    const t = fields.get(key);
    if (t === undefined) out.push([...path, key]);
    else walk(models, t, value[key], [...path, key], out);
  }
}

/**
 * The server's answer to the object's fields under strict validation.
 *
 * @example
 *   const models = await import("@kubernetes/client-node");
 *   strictDecoding(models, deployment);
 *   // { state: "rejected", message: 'Deployment in version "v1" cannot be handled as a
 *   //   Deployment: strict decoding error: unknown field "spec.template.spec.containers[0].sysctls"',
 *   //   fields: [{ path: "spec.template.spec.containers[0].sysctls", source: { file, line: 31 } }] }
 */
export function strictDecoding(models: ModelTable, obj: KubeObject): StrictDecoding {
  const name = modelNameFor(models, obj.apiVersion, obj.kind);
  if (!name)
    return {
      state: "unchecked",
      reason: `${obj.kind} (${obj.apiVersion}) is not a built-in kind of the API the models describe`,
    };
  const found: Path[] = [];
  walk(models, name, obj.raw, [], found);
  if (found.length === 0) return { state: "ok" };
  const version = obj.apiVersion.includes("/")
    ? obj.apiVersion.slice(obj.apiVersion.indexOf("/") + 1)
    : obj.apiVersion;
  const fields = found.map((p) => {
    const source = obj.locate(p);
    return { path: render(p), ...(source ? { source } : {}) };
  });
  return {
    state: "rejected",
    message: `${obj.kind} in version "${version}" cannot be handled as a ${obj.kind}: strict decoding error: ${fields.map((f) => `unknown field "${f.path}"`).join(", ")}`,
    fields,
  };
}
