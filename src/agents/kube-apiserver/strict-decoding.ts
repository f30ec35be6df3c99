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
 * Before strict decoding, the JSON decoder itself: a value of the wrong type is the answer, and
 * the unknown fields are not reported (as the real kube-apiserver answers a dry-run create):
 *
 *   Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go struct
 *   field PodSpec.spec.containers of type []v1.Container
 *
 * (the first such value in decoding order; the Go struct holding the field, then the path without
 * indices; see ./go-types). A quantity the parser refuses stops the decoder at once.
 *
 * The types are the API's own, from the OpenAPI-generated models of `@kubernetes/client-node`
 * (each model's `attributeTypeMap`, spec v1.34): no field list is written by hand here, only the
 * Go-side facts the models do not carry (./go-types). A kind the models do not know (a custom
 * resource) is not checked and says so.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { SourceRef } from "../../model/types.ts";
import {
  type Fit,
  goStructName,
  inlineStruct,
  isQuantityField,
  quantityFit,
  scalarFit,
} from "./go-types.ts";

/** A model as the generated code describes it. */
interface Model {
  getAttributeTypeMap(): readonly {
    readonly baseName: string;
    readonly type: string;
    readonly format?: string;
  }[];
}
export type ModelTable = Readonly<Record<string, unknown>>;

/** One field the object's type does not have. */
export interface UnknownField {
  /** As the server writes it: `spec.template.spec.containers[0].sysctls`. */
  readonly path: string;
  readonly source?: SourceRef;
}

/** A value the JSON decoder cannot put in its field's Go type (or a quantity it cannot parse). */
export interface DecodeTypeError {
  /** The field as written: `spec.containers[0].ports[0].containerPort`. */
  readonly path: string;
  /** The decoder's own words: `json: cannot unmarshal string into Go struct field … of type int32`. */
  readonly detail: string;
  readonly source?: SourceRef;
}

export type StrictDecoding =
  | { readonly state: "ok" }
  | {
      readonly state: "rejected";
      /** The server's message, after kubectl's `error when creating "FILE": `. */
      readonly message: string;
      /** The unknown fields; none when a type error decides (the server reports only that). */
      readonly fields: readonly UnknownField[];
      /** The value of the wrong type the server reports instead of unknown fields. */
      readonly typeError?: DecodeTypeError;
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

/** What one walk finds: unknown fields, the first type error, the first hard error. */
interface Found {
  readonly unknown: Path[];
  typeError?: { path: Path; goPath: string; fit: Extract<Fit, { kind: "type-error" }> };
  hardError?: { path: Path; message: string };
}

/** Where the walk is: the path as written, and the decoder's field path (`spec.containers.ports`). */
interface At {
  readonly path: Path;
  readonly goPath: readonly string[];
  /** The Go struct whose field is being decoded (`PodSpec`). */
  readonly struct: string;
}

function noteFit(fit: Fit, at: At, found: Found): void {
  if (fit.kind === "type-error" && !found.typeError)
    found.typeError = { path: at.path, goPath: `${at.struct}.${at.goPath.join(".")}`, fit };
  if (fit.kind === "hard-error" && !found.hardError)
    found.hardError = { path: at.path, message: fit.message };
}

/**
 * Walks `value` as an attribute of type `type` (`format`), in decoding order (sorted keys, depth
 * first): collects the fields the types do not have and the first value that does not fit.
 */
function walk(
  models: ModelTable,
  type: string,
  format: string,
  value: unknown,
  at: At,
  found: Found,
  quantity = false,
): void {
  if (found.hardError) return; // the decoder stopped there
  if (quantity && !/^\{ \[key: string\]: .+; \}$/.test(type)) {
    noteFit(quantityFit(value), at, found);
    return;
  }
  const model = modelOf(models, type);
  const fit = scalarFit(type, format, value, model !== undefined);
  if (fit.kind !== "fits") {
    noteFit(fit, at, found);
    return;
  }
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    if (Array.isArray(value))
      value.forEach((v, i) => {
        walk(models, array[1]!, format, v, { ...at, path: [...at.path, i] }, found);
      });
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (isRecord(value))
      for (const key of Object.keys(value).sort())
        walk(
          models,
          map[1]!,
          format,
          value[key],
          { ...at, path: [...at.path, key] },
          found,
          quantity,
        );
    return;
  }
  if (!model || !isRecord(value)) return; // scalars, IntOrString, any, Date: no fields to check
  const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a]));
  for (const key of Object.keys(value).sort()) {
    const a = fields.get(key);
    if (a === undefined) {
      found.unknown.push([...at.path, key]);
      continue;
    }
    const embedded = inlineStruct(type, key);
    walk(
      models,
      a.type,
      a.format ?? "",
      value[key],
      {
        path: [...at.path, key],
        goPath: [...at.goPath, ...(embedded ? [embedded] : []), key],
        struct: goStructName(type),
      },
      found,
      isQuantityField(type, key),
    );
    if (found.hardError) return;
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
  const found: Found = { unknown: [] };
  walk(models, name, "", obj.raw, { path: [], goPath: [], struct: goStructName(name) }, found);
  const version = obj.apiVersion.includes("/")
    ? obj.apiVersion.slice(obj.apiVersion.indexOf("/") + 1)
    : obj.apiVersion;
  const prefix = `${obj.kind} in version "${version}" cannot be handled as a ${obj.kind}: `;
  const decided = found.hardError ?? found.typeError;
  if (decided) {
    const t = found.typeError;
    const detail =
      found.hardError?.message ??
      (t
        ? `json: cannot unmarshal ${t.fit.value} into Go struct field ${t.goPath} of type ${t.fit.goType}`
        : "");
    const source = obj.locate(decided.path);
    return {
      state: "rejected",
      message: `${prefix}${detail}`,
      fields: [],
      typeError: { path: render(decided.path), detail, ...(source ? { source } : {}) },
    };
  }
  if (found.unknown.length === 0) return { state: "ok" };
  const fields = found.unknown.map((p) => {
    const source = obj.locate(p);
    return { path: render(p), ...(source ? { source } : {}) };
  });
  return {
    state: "rejected",
    message: `${prefix}strict decoding error: ${fields.map((f) => `unknown field "${f.path}"`).join(", ")}`,
    fields,
  };
}
