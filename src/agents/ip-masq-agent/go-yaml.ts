/**
 * @module agents/ip-masq-agent/go-yaml — YAML to the JSON value the agent decodes, as
 * sigs.k8s.io/yaml.YAMLToJSON does it over go.yaml.in/yaml/v2: YAML 1.1 plain-scalar resolution
 * (`yes`/`on`/`y` are booleans, `0x10` and `010` are integers, `_` digit separators), first
 * document only, duplicate keys collapsed (last wins), keys sorted as Go's json.Marshal sorts them.
 *
 * The `yaml` package does the parsing (with positions); scalars are read in its failsafe schema
 * and resolved here by yaml.v2's own rules, because the package's YAML 1.1 schema differs from
 * yaml.v2 in details that change the result (sexagesimal numbers, `y`/`n`, `<<` order).
 */
import type { Document, Node } from "yaml";
import { yamlLib } from "../../evidence/lazy-yaml.ts";
import type { GoEntry, GoValue } from "./go-json.ts";

/** A YAML error in yaml.v2's form (`yaml: line N: ...`); `exact` is false when the wording is approximated. */
export interface GoYamlError {
  readonly message: string;
  readonly offset: number;
  readonly exact: boolean;
}

type Resolved =
  | { kind: "null" }
  | { kind: "bool"; value: boolean }
  | { kind: "int"; value: bigint }
  | { kind: "float"; value: number }
  | { kind: "string"; value: string }
  | { kind: "merge" };

const BOOL_NULL: ReadonlyMap<string, Resolved> = new Map<string, Resolved>([
  ...["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"].map(
    (s) => [s, { kind: "bool", value: true }] as const,
  ),
  ...["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"].map(
    (s) => [s, { kind: "bool", value: false }] as const,
  ),
  ...["", "~", "null", "Null", "NULL"].map((s) => [s, { kind: "null" }] as const),
  ...[".nan", ".NaN", ".NAN"].map((s) => [s, { kind: "float", value: Number.NaN }] as const),
  ...[".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"].map(
    (s) => [s, { kind: "float", value: Number.POSITIVE_INFINITY }] as const,
  ),
  ...["-.inf", "-.Inf", "-.INF"].map(
    (s) => [s, { kind: "float", value: Number.NEGATIVE_INFINITY }] as const,
  ),
]);

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const UINT64_MAX = (1n << 64n) - 1n;
const YAML_STYLE_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;

/** strconv.ParseInt/ParseUint with base 0 (sign only when `signed`); undefined on any error. */
export function goParseIntBase0(text: string, signed: boolean): bigint | undefined {
  let t = text;
  let neg = false;
  if (t.startsWith("+") || t.startsWith("-")) {
    if (!signed) return undefined;
    neg = t.startsWith("-");
    t = t.slice(1);
  }
  let base = 10;
  let digits = /^[0-9]+$/;
  if (/^0[xX]/.test(t)) {
    base = 16;
    digits = /^[0-9a-fA-F]+$/;
    t = t.slice(2);
  } else if (/^0[oO]/.test(t)) {
    base = 8;
    digits = /^[0-7]+$/;
    t = t.slice(2);
  } else if (/^0[bB]/.test(t)) {
    base = 2;
    digits = /^[01]+$/;
    t = t.slice(2);
  } else if (t.length > 1 && t.startsWith("0")) {
    base = 8;
    digits = /^[0-7]+$/;
    t = t.slice(1);
  }
  if (!digits.test(t)) return undefined;
  let v = 0n;
  for (const ch of t) v = v * BigInt(base) + BigInt(Number.parseInt(ch, 16));
  if (neg) v = -v;
  if (signed ? v < INT64_MIN || v > INT64_MAX : v > UINT64_MAX) return undefined;
  return v;
}

/** yaml.v2 `resolve` for a plain (untagged, unquoted) scalar. */
export function resolvePlainScalar(text: string): Resolved {
  if (text === "<<") return { kind: "merge" };
  const first = text.charCodeAt(0);
  const known = BOOL_NULL.get(text);
  if (text === "" || "yYnNtTfFoO~".includes(text[0]!))
    return known ?? { kind: "string", value: text };
  if (text[0] === ".") {
    if (known) return known;
    // yaml.v2 tries strconv.ParseFloat on the raw text here
    if (/^\.[0-9]+([eE][-+]?[0-9]+)?$/.test(text)) {
      const f = Number(text);
      if (Number.isFinite(f)) return { kind: "float", value: f };
    }
    return { kind: "string", value: text };
  }
  const isDigit = first >= 0x30 && first <= 0x39;
  if (isDigit || text[0] === "+" || text[0] === "-") {
    if (known) return known;
    const plain = text.replaceAll("_", "");
    const i = goParseIntBase0(plain, true) ?? goParseIntBase0(plain, false);
    if (i !== undefined) return { kind: "int", value: i };
    if (YAML_STYLE_FLOAT.test(plain)) {
      const f = Number(plain);
      // strconv.ParseFloat fails with ErrRange on overflow; yaml.v2 then keeps the string
      if (Number.isFinite(f)) return { kind: "float", value: f };
    }
  }
  return { kind: "string", value: text };
}

/** encoding/json's rendering of a float64 (shortest form, exponent outside [1e-6, 1e21)). */
export function goFormatFloat(f: number): string {
  if (Object.is(f, -0)) return "-0";
  return String(f);
}

class YamlFail {
  readonly error: GoYamlError;
  constructor(error: GoYamlError) {
    this.error = error;
  }
}

interface Built {
  readonly value: GoValue;
}

/**
 * Converts YAML text to the JSON value YAMLToJSON would produce, or yaml.v2's error.
 * `byteOffset` maps a character offset of `text` to a byte offset (positions are kept as bytes
 * so JSON and YAML inputs report positions the same way).
 */
export function goYamlToJson(text: string): { value: GoValue } | { error: GoYamlError } {
  const charToByte = byteOffsets(text);
  const docs = yamlLib().parseAllDocuments(text, {
    schema: "failsafe",
    version: "1.1",
    uniqueKeys: false,
    prettyErrors: false,
    strict: false,
  });
  const list = Array.isArray(docs) ? docs : [docs];
  const doc = list[0];
  if (doc === undefined) return { value: { kind: "null", offset: 0 } };
  const err = doc.errors[0];
  if (err) return { error: mapYamlError(err.code, err.message, err.pos[0], text, charToByte) };
  try {
    const ctx: BuildContext = {
      decodeCount: 0,
      aliasCount: 0,
      aliasDepth: 0,
      expanding: new Set(),
    };
    return { value: build(doc, doc.contents, charToByte, 0, ctx).value };
  } catch (e) {
    if (e instanceof YamlFail) return { error: e.error };
    throw e;
  }
}

function byteOffsets(text: string): (charOffset: number) => number {
  // Only pay for a table when the text is not ASCII.
  if (/^[\x00-\x7f]*$/.test(text)) return (c) => c;
  const table = new Uint32Array(text.length + 1);
  let b = 0;
  for (let i = 0; i < text.length; i++) {
    table[i] = b;
    const code = text.codePointAt(i)!;
    const len = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    if (code >= 0x10000) {
      table[i + 1] = b;
      i++;
    }
    b += len;
  }
  table[text.length] = b;
  return (c) => table[Math.min(Math.max(c, 0), text.length)]!;
}

const MAX_DEPTH = 1000;

/** yaml.v2's guard against alias bombs: counts decoded nodes and those reached through aliases. */
interface BuildContext {
  decodeCount: number;
  aliasCount: number;
  aliasDepth: number;
  readonly expanding: Set<unknown>;
}

/** yaml.v2 `allowedAliasRatio`: up to 99% alias expansion for small documents, 10% for huge ones. */
function allowedAliasRatio(decodeCount: number): number {
  const low = 400_000;
  const high = 4_000_000;
  if (decodeCount <= low) return 0.99;
  if (decodeCount >= high) return 0.1;
  return 0.99 - 0.89 * ((decodeCount - low) / (high - low));
}

function countNode(ctx: BuildContext, offset: number): void {
  ctx.decodeCount++;
  if (ctx.aliasDepth > 0) ctx.aliasCount++;
  if (
    ctx.aliasCount > 100 &&
    ctx.decodeCount > 1000 &&
    ctx.aliasCount / ctx.decodeCount > allowedAliasRatio(ctx.decodeCount)
  ) {
    throw new YamlFail({
      message: "yaml: document contains excessive aliasing",
      offset,
      exact: true,
    });
  }
}

function build(
  doc: Document,
  node: unknown,
  toByte: (c: number) => number,
  depth: number,
  ctx: BuildContext,
): Built {
  if (depth > MAX_DEPTH) {
    throw new YamlFail({ message: "yaml: exceeded max depth of 10000", offset: 0, exact: false });
  }
  if (node === null || node === undefined) return { value: { kind: "null", offset: 0 } };
  const offset = toByte((node as Node).range?.[0] ?? 0);
  countNode(ctx, offset);
  if (node instanceof yamlLib().Alias) {
    const target = node.resolve(doc);
    if (!target) {
      throw new YamlFail({
        message: `yaml: unknown anchor '${node.source}' referenced`,
        offset,
        exact: true,
      });
    }
    if (ctx.expanding.has(target)) {
      throw new YamlFail({
        message: `yaml: anchor '${node.source}' value contains itself`,
        offset,
        exact: true,
      });
    }
    ctx.expanding.add(target);
    ctx.aliasDepth++;
    try {
      return build(doc, target, toByte, depth + 1, ctx);
    } finally {
      ctx.aliasDepth--;
      ctx.expanding.delete(target);
    }
  }
  if (yamlLib().isScalar(node)) {
    const r = resolveScalar(node, offset);
    return { value: resolvedToJson(r, offset) };
  }
  if (yamlLib().isSeq(node)) {
    const items = node.items.map((it) => build(doc, it, toByte, depth + 1, ctx).value);
    return { value: { kind: "array", items, offset } };
  }
  if (yamlLib().isMap(node)) {
    const entries = new Map<string, GoEntry>();
    const setEntries = (m: unknown, mergeDepth: number) => {
      const target = m instanceof yamlLib().Alias ? m.resolve(doc) : m;
      if (!yamlLib().isMap(target)) {
        throw new YamlFail({
          message: "yaml: map merge requires map or sequence of maps as the value",
          offset,
          exact: true,
        });
      }
      addPairs(target.items, mergeDepth);
    };
    const addPairs = (pairs: readonly { key: unknown; value: unknown }[], mergeDepth: number) => {
      if (mergeDepth > 100) {
        throw new YamlFail({
          message: "yaml: document contains excessive aliasing",
          offset,
          exact: true,
        });
      }
      for (const pair of pairs) {
        const keyNode = pair.key;
        if (
          yamlLib().isScalar(keyNode) &&
          keyNode.type === "PLAIN" &&
          !keyNode.tag &&
          keyNode.value === "<<"
        ) {
          const v = pair.value instanceof yamlLib().Alias ? pair.value.resolve(doc) : pair.value;
          if (yamlLib().isSeq(v)) {
            // yaml.v2 steps backwards: earlier maps in the list take precedence
            for (let i = v.items.length - 1; i >= 0; i--) setEntries(v.items[i], mergeDepth + 1);
          } else {
            setEntries(v, mergeDepth + 1);
          }
          continue;
        }
        const keyOffset = toByte((keyNode as Node | null)?.range?.[0] ?? offset);
        const key = keyString(doc, keyNode, keyOffset);
        countNode(ctx, keyOffset);
        const value = build(doc, pair.value, toByte, depth + 1, ctx).value;
        entries.set(key, { key, keyOffset, value });
      }
    };
    addPairs(node.items, 0);
    // json.Marshal of a map[string]interface{} writes keys in byte order
    const sorted = [...entries.values()].sort((a, b) =>
      Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)),
    );
    return { value: { kind: "object", entries: sorted, offset } };
  }
  throw new YamlFail({ message: "yaml: unknown node", offset, exact: false });
}

function resolveScalar(
  node: { value: unknown; type?: string | undefined; tag?: string | undefined },
  offset: number,
): Resolved {
  const text = String(node.value ?? "");
  const tag = node.tag;
  if (tag === "tag:yaml.org,2002:str" || tag === "tag:yaml.org,2002:binary") {
    return { kind: "string", value: text };
  }
  if (tag === undefined || tag === "!") {
    if (node.type === "PLAIN" && tag === undefined) return resolvePlainScalar(text);
    return { kind: "string", value: text };
  }
  // an explicit standard tag: resolve the text and insist it has that type, as yaml.v2 does
  const want = tag.replace("tag:yaml.org,2002:", "!!");
  const r = resolvePlainScalar(text);
  const got =
    r.kind === "int"
      ? "!!int"
      : r.kind === "float"
        ? "!!float"
        : r.kind === "bool"
          ? "!!bool"
          : r.kind === "null"
            ? "!!null"
            : r.kind === "merge"
              ? "!!merge"
              : "!!str";
  if (want === got || (want === "!!float" && r.kind === "int")) {
    return want === "!!float" && r.kind === "int" ? { kind: "float", value: Number(r.value) } : r;
  }
  if (!["!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!!merge"].includes(want)) {
    // local tags and unknown ones leave the value as yaml.v2 resolved it
    return r;
  }
  throw new YamlFail({
    message: `yaml: cannot decode ${got} \`${text}\` as a ${want}`,
    offset,
    exact: false,
  });
}

function resolvedToJson(r: Resolved, offset: number): GoValue {
  switch (r.kind) {
    case "null":
      return { kind: "null", offset };
    case "bool":
      return { kind: "bool", value: r.value, offset };
    case "int":
      return { kind: "number", text: r.value.toString(), offset };
    case "float":
      if (!Number.isFinite(r.value)) {
        const s = Number.isNaN(r.value) ? "NaN" : r.value > 0 ? "+Inf" : "-Inf";
        throw new YamlFail({ message: `json: unsupported value: ${s}`, offset, exact: true });
      }
      return { kind: "number", text: goFormatFloat(r.value), offset };
    case "string":
      return { kind: "string", value: r.value, offset };
    case "merge":
      return { kind: "string", value: "<<", offset };
  }
}

/** sigs.k8s.io/yaml's conversion of a map key to the JSON object key. */
function keyString(doc: Document, keyNode: unknown, offset: number): string {
  const k = keyNode instanceof yamlLib().Alias ? keyNode.resolve(doc) : keyNode;
  if (k === null || k === undefined) return unsupportedKey(offset);
  if (!yamlLib().isScalar(k)) {
    throw new YamlFail({ message: "yaml: invalid map key", offset, exact: false });
  }
  const r = resolveScalar(k, offset);
  switch (r.kind) {
    case "string":
      return r.value;
    case "merge":
      return "<<";
    case "bool":
      return r.value ? "true" : "false";
    case "int":
      // a key above int64 decodes as uint64, which YAMLToJSON does not accept
      if (r.value > INT64_MAX) return unsupportedKey(offset);
      return r.value.toString();
    case "float":
      if (Number.isNaN(r.value)) return ".nan";
      if (!Number.isFinite(r.value)) return r.value > 0 ? ".inf" : "-.inf";
      // strconv.FormatFloat(k, 'g', -1, 32)
      return formatFloat32g(r.value);
    case "null":
      return unsupportedKey(offset);
  }
}

function unsupportedKey(offset: number): never {
  throw new YamlFail({
    message: "unsupported map key of type: %!s(<nil>)",
    offset,
    exact: false,
  });
}

function formatFloat32g(f: number): string {
  const v = Math.fround(f);
  // shortest decimal that rounds to the same float32
  for (let p = 1; p <= 9; p++) {
    const s = v.toPrecision(p);
    if (Math.fround(Number(s)) === v) {
      const n = Number(s);
      const exp = n === 0 ? 0 : Math.floor(Math.log10(Math.abs(n)));
      if (exp < -4 || exp >= p) {
        const [m, e] = n.toExponential(p - 1).split("e");
        const mant = m!.includes(".") ? m!.replace(/0+$/, "").replace(/\.$/, "") : m!;
        const en = Number(e);
        return `${mant}e${en < 0 ? "-" : "+"}${String(Math.abs(en)).padStart(2, "0")}`;
      }
      return String(n);
    }
  }
  return String(v);
}

/**
 * Words an error of the `yaml` package as libyaml (inside yaml.v2) would. The common mistakes
 * map to libyaml's own text; the rest keep the package's text and are marked inexact.
 * yaml.v2 quirk kept: errors on the first line carry no line number, parser errors name the
 * 0-based line and scanner errors the 1-based one.
 */
function mapYamlError(
  code: string,
  message: string,
  charPos: number,
  text: string,
  toByte: (c: number) => number,
): GoYamlError {
  const line0 = lineOf(text, charPos);
  const firstLine = message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "");
  const scanner = (problem: string, exact = true): GoYamlError => ({
    message: `yaml: ${line0 !== 0 ? `line ${line0 + 1}: ` : ""}${problem}`,
    offset: toByte(charPos),
    exact,
  });
  const parser = (problem: string, exact = true): GoYamlError => ({
    message: `yaml: ${line0 !== 0 ? `line ${line0}: ` : ""}${problem}`,
    offset: toByte(charPos),
    exact,
  });
  switch (code) {
    case "BAD_ALIAS":
      return scanner("did not find expected alphabetic or numeric character");
    case "TAB_AS_INDENT":
      return scanner("found character that cannot start any token");
    case "BLOCK_AS_IMPLICIT_KEY":
      return scanner("mapping values are not allowed in this context");
    case "MISSING_CHAR":
      if (firstLine.includes("quote")) return scanner("found unexpected end of stream");
      if (firstLine.includes("followed by map values")) {
        return scanner("could not find expected ':'", false);
      }
      return parser(firstLine, false);
    case "MULTILINE_IMPLICIT_KEY":
      return scanner("could not find expected ':'", false);
    case "BAD_INDENT":
      if (firstLine.startsWith("Flow sequence")) return parser("did not find expected ',' or ']'");
      if (firstLine.startsWith("Flow map")) return parser("did not find expected ',' or '}'");
      if (firstLine.startsWith("All mapping items")) return parser("did not find expected key");
      return parser("did not find expected key", false);
    default:
      return parser(firstLine, false);
  }
}

function lineOf(text: string, charPos: number): number {
  let line = 0;
  const end = Math.min(charPos, text.length);
  for (let i = 0; i < end; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}
