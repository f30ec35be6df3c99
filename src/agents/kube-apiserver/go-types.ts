/**
 * @module agents/kube-apiserver/go-types — what the API server's JSON decoder (sigs.k8s.io/json,
 * Go's encoding/json) makes of a value written for a field of a generated model: the field's Go
 * type as its messages spell it (`[]v1.Container`, `int32`, `map[string]string`), whether the
 * value fits, and the Go structs the models flatten (`ProbeHandler` inside `Probe`), whose names
 * the decoder puts in its field paths. Quantities and times have their own decoders.
 */

/** How a JSON value fits a Go type: fits, a type error (decoding goes on), or a hard error. */
export type Fit =
  | { readonly kind: "fits" }
  /** `json: cannot unmarshal VALUE into Go struct field … of type TYPE`: the first one is reported. */
  | { readonly kind: "type-error"; readonly value: string; readonly goType: string }
  /** A custom decoder's error (a quantity): decoding stops there and it is the answer. */
  | { readonly kind: "hard-error"; readonly message: string };

/** JSON's name for a value's kind, as encoding/json writes it in UnmarshalTypeError. */
export function jsonKind(v: unknown): "string" | "number" | "bool" | "array" | "object" | "null" {
  if (v === null || v === undefined) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number" || typeof v === "bigint") return "number";
  if (typeof v === "string") return "string";
  return "object";
}

/** The Go name of a model: `V1Container` → `v1.Container`, `CoreV1EndpointPort` → `v1.EndpointPort`. */
export function goModelName(model: string): string {
  const m = /^(?:[A-Z][a-z]+)*?(V\d+(?:(?:alpha|beta)\d+)?)([A-Z]\w*)$/.exec(model);
  return m ? `${m[1]!.toLowerCase()}.${m[2]}` : model;
}

/** The Go struct's own name (`V1PodSpec` → `PodSpec`), as `Go struct field PodSpec.…` says. */
export const goStructName = (model: string): string => {
  const name = goModelName(model);
  return name.slice(name.indexOf(".") + 1);
};

/** The Go type of a model attribute, as the decoder's messages spell it. */
export function goTypeName(type: string, format: string): string {
  const array = /^Array<(.+)>$/.exec(type);
  if (array) return `[]${goTypeName(array[1]!, format)}`;
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) return `map[string]${goTypeName(map[1]!, format)}`;
  if (type === "string") return format === "byte" ? "[]uint8" : "string";
  if (type === "boolean") return "bool";
  if (type === "number") return format === "int32" || format === "int64" ? format : "float64";
  return goModelName(type);
}

const INT_RANGE = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
} as const;

/** encoding/json's message for a number into an integer it cannot hold: `number 80.5`. */
function intFit(v: number, goType: "int32" | "int64"): Fit {
  const [lo, hi] = INT_RANGE[goType];
  return Number.isInteger(v) && v >= lo && v <= hi
    ? { kind: "fits" }
    : { kind: "type-error", value: `number ${String(v)}`, goType };
}

/** apimachinery resource.Quantity: the pattern ParseQuantity's error names, and its suffixes. */
const QUANTITY = /^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$/;
const QUANTITY_SUFFIX = /^(?:|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)$/;
const ERR_FORMAT_WRONG = `quantities must match the regular expression '${QUANTITY.source}'`;

/**
 * A quantity (resource.Quantity.UnmarshalJSON): a number or a string in its form; anything else
 * (a boolean, an object) is read as text and fails the pattern. A suffix the parser does not know
 * is `unable to parse quantity's suffix`.
 */
export function quantityFit(v: unknown): Fit {
  const k = jsonKind(v);
  if (k === "null" || k === "number") return { kind: "fits" };
  const text = k === "string" ? (v as string).trim() : "";
  const m = QUANTITY.exec(text);
  if (!m) return { kind: "hard-error", message: ERR_FORMAT_WRONG };
  if (!QUANTITY_SUFFIX.test(m[2]!))
    return { kind: "hard-error", message: "unable to parse quantity's suffix" };
  return { kind: "fits" };
}

/**
 * Whether `v` fits a scalar or container attribute (`type`, `format` of the model). Models
 * (structs) fit objects; their fields are checked by the caller. `Date` (metav1.Time) decodes a
 * string (its format is not judged here); `IntOrString` a string or an int32; `any` anything.
 */
export function scalarFit(type: string, format: string, v: unknown, isModel: boolean): Fit {
  const k = jsonKind(v);
  if (k === "null" || type === "any" || type === "object") return { kind: "fits" };
  const err = (goType: string): Fit => ({ kind: "type-error", value: k, goType });
  if (/^Array<.+>$/.test(type))
    return k === "array" ? { kind: "fits" } : err(goTypeName(type, format));
  if (/^\{ \[key: string\]: .+; \}$/.test(type))
    return k === "object" ? { kind: "fits" } : err(goTypeName(type, format));
  switch (type) {
    case "string":
      return k === "string" ? { kind: "fits" } : err(goTypeName(type, format));
    case "boolean":
      return k === "bool" ? { kind: "fits" } : err("bool");
    case "number": {
      const goType = goTypeName(type, format);
      if (k !== "number") return err(goType);
      return goType === "int32" || goType === "int64"
        ? intFit(Number(v), goType)
        : { kind: "fits" };
    }
    case "Date":
      return k === "string" ? { kind: "fits" } : err("string");
    case "IntOrString":
      if (k === "string") return { kind: "fits" };
      return k === "number" ? intFit(Number(v), "int32") : err("int32");
  }
  if (isModel) return k === "object" ? { kind: "fits" } : err(goTypeName(type, format));
  return { kind: "fits" };
}

/**
 * Structs the Go types embed inline (`json:",inline"`) and the models flatten: the decoder names
 * the embedded struct in its field path (`livenessProbe.ProbeHandler.tcpSocket`). Per model: the
 * embedded field's Go name and the JSON fields it holds (`"*"`: all but those listed in `except`).
 */
const INLINE: Readonly<
  Record<
    string,
    {
      readonly go: string;
      readonly fields?: readonly string[];
      readonly except?: readonly string[];
    }
  >
> = {
  V1Probe: { go: "ProbeHandler", fields: ["exec", "httpGet", "tcpSocket", "grpc"] },
  V1Volume: { go: "VolumeSource", except: ["name"] },
  V1PersistentVolumeSpec: {
    go: "PersistentVolumeSource",
    except: [
      "accessModes",
      "capacity",
      "claimRef",
      "mountOptions",
      "nodeAffinity",
      "persistentVolumeReclaimPolicy",
      "storageClassName",
      "volumeAttributesClassName",
      "volumeMode",
    ],
  },
  V1EphemeralContainer: { go: "EphemeralContainerCommon", except: ["targetContainerName"] },
  V1ConfigMapVolumeSource: { go: "LocalObjectReference", fields: ["name"] },
  V1ConfigMapProjection: { go: "LocalObjectReference", fields: ["name"] },
  V1ConfigMapEnvSource: { go: "LocalObjectReference", fields: ["name"] },
  V1ConfigMapKeySelector: { go: "LocalObjectReference", fields: ["name"] },
  V1SecretProjection: { go: "LocalObjectReference", fields: ["name"] },
  V1SecretEnvSource: { go: "LocalObjectReference", fields: ["name"] },
  V1SecretKeySelector: { go: "LocalObjectReference", fields: ["name"] },
};

/** The embedded struct's Go name when `field` of `model` is one the models flattened. */
export function inlineStruct(model: string, field: string): string | undefined {
  const e = INLINE[model];
  if (!e) return undefined;
  const held = e.fields ? e.fields.includes(field) : !(e.except ?? []).includes(field);
  return held ? e.go : undefined;
}

/**
 * Fields whose Go type is resource.Quantity (or a map of them, a ResourceList) although the models
 * call them strings: a number is a quantity there, and a bad string stops the decoder.
 */
const QUANTITY_FIELDS: Readonly<Record<string, readonly string[]>> = {
  V1ResourceRequirements: ["limits", "requests"],
  V1VolumeResourceRequirements: ["limits", "requests"],
  V1EmptyDirVolumeSource: ["sizeLimit"],
  V1ResourceFieldSelector: ["divisor"],
  V1PodSpec: ["overhead"],
  V1Overhead: ["podFixed"],
  V1LimitRangeItem: ["default", "defaultRequest", "max", "maxLimitRequestRatio", "min"],
  V1ResourceQuotaSpec: ["hard"],
  V1ResourceQuotaStatus: ["hard", "used"],
  V1NodeStatus: ["allocatable", "capacity"],
  V1PersistentVolumeSpec: ["capacity"],
  V1PersistentVolumeClaimStatus: ["allocatedResources", "capacity"],
  V1ContainerStatus: ["allocatedResources"],
  V1CSIStorageCapacity: ["capacity", "maximumVolumeSize"],
};

/** Is `field` of `model` a quantity (or a map of quantities)? */
export const isQuantityField = (model: string, field: string): boolean =>
  QUANTITY_FIELDS[model]?.includes(field) ?? false;
