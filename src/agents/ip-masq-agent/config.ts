/**
 * @module agents/ip-masq-agent/config — the agent's configuration exactly as it reads it
 * (cmd/ip-masq-agent `syncConfig`): defaults, YAML-or-JSON decoding over the defaults,
 * validation with the agent's error texts, and keeping the previous config when the new one is
 * rejected. Every nonMasqueradeCIDRs entry keeps the SourceRef of its line.
 */
import { lineAt } from "../../evidence/text-lines.ts";
import type { SourceRef } from "../../model/types.ts";
import { formatGoDuration, parseGoDuration } from "./go-duration.ts";
import { type GoValue, goKindName, parseGoJson } from "./go-json.ts";
import { goParseCidr } from "./go-net.ts";
import { goQuote } from "./go-quote.ts";
import { goYamlToJson } from "./go-yaml.ts";

/** Where the agent reads its config (hard-coded; no flag changes it). */
export const AGENT_CONFIG_PATH = "/etc/config/ip-masq-agent";
export const LINK_LOCAL_V4 = "169.254.0.0/16";
export const LINK_LOCAL_V6 = "fe80::/10";
/** RFC 1918: the agent's default nonMasqueradeCIDRs. */
export const DEFAULT_NON_MASQ_CIDRS = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"] as const;
/** The default list with `--nomasq-all-reserved-ranges`, in the agent's order. */
export const RESERVED_NON_MASQ_CIDRS = [
  ...DEFAULT_NON_MASQ_CIDRS,
  "100.64.0.0/10",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.88.99.0/24",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "240.0.0.0/4",
] as const;
export const DEFAULT_CIDR_LIMIT = 64n;
export const DEFAULT_RESYNC_INTERVAL_NS = 60_000_000_000n;

/** The config keys, in the agent's struct order (also the order of its JSON output). */
export const CONFIG_KEYS = [
  "nonMasqueradeCIDRs",
  "cidrLimit",
  "masqLinkLocal",
  "masqLinkLocalIPv6",
  "resyncInterval",
] as const;
export type ConfigKey = (typeof CONFIG_KEYS)[number];

/** One nonMasqueradeCIDRs entry: the text as written (the agent keeps it verbatim). */
export interface NonMasqEntry {
  readonly text: string;
  /** Where it was written; absent for built-in defaults. */
  readonly source?: SourceRef;
}

/** The agent's MasqConfig. `cidrLimit` is a Go int (int64), durations are nanoseconds. */
export interface MasqConfig {
  /** `null` is Go's nil slice (`nonMasqueradeCIDRs:` with no value): no RETURN rules at all. */
  readonly nonMasqueradeCIDRs: readonly NonMasqEntry[] | null;
  readonly cidrLimit: bigint;
  readonly masqLinkLocal: boolean;
  readonly masqLinkLocalIPv6: boolean;
  readonly resyncIntervalNs: bigint;
  /** Where each key was set in the file (keys absent from the file keep their defaults). */
  readonly sources: Readonly<Partial<Record<ConfigKey, SourceRef>>>;
}

/** NewMasqConfig: the defaults the agent starts from. */
export function defaultMasqConfig(nomasqAllReservedRanges = false): MasqConfig {
  const list = nomasqAllReservedRanges ? RESERVED_NON_MASQ_CIDRS : DEFAULT_NON_MASQ_CIDRS;
  return {
    nonMasqueradeCIDRs: list.map((text) => ({ text })),
    cidrLimit: DEFAULT_CIDR_LIMIT,
    masqLinkLocal: false,
    masqLinkLocalIPv6: false,
    resyncIntervalNs: DEFAULT_RESYNC_INTERVAL_NS,
    sources: {},
  };
}

/** Why a config was not accepted: the agent's own error text, and where in the file. */
export interface ConfigError {
  /** The exact text the agent logs after `Error syncing configuration: `. */
  readonly message: string;
  readonly stage: "decode" | "validate";
  readonly source?: SourceRef;
  /** False when the wording approximates the agent's YAML library (rare YAML syntax errors). */
  readonly exact: boolean;
}

/** Maps a byte offset in the config content to a SourceRef in the file the user gave. */
export type Locate = (byteOffset: number) => SourceRef;

/** Lines longer than this are cited without their text (a one-line JSON file, minified). */
const MAX_CITED_LINE_BYTES = 500;

/** Start offsets of the lines of `bytes` (0-based), and the 0-based line holding `offset`. */
export function lineIndex(bytes: Uint8Array): { starts: number[]; lineOf(offset: number): number } {
  const starts = [0];
  for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x0a) starts.push(i + 1);
  return {
    starts,
    lineOf: (offset) => lineAt(starts, offset) - 1,
  };
}

/** A SourceRef locator for a plain file: 1-based line and column, and the line's text. */
export function fileLocator(file: string, content: string | Uint8Array): Locate {
  const bytes = typeof content === "string" ? Buffer.from(content, "utf8") : Buffer.from(content);
  const { starts, lineOf } = lineIndex(bytes);
  return (offset) => {
    const line = lineOf(offset);
    const start = starts[line]!;
    const end = line + 1 < starts.length ? starts[line + 1]! - 1 : bytes.length;
    const at = Math.min(Math.max(start, offset), end);
    if (end - start > MAX_CITED_LINE_BYTES) return { file, line: line + 1, col: at - start + 1 };
    const text = bytes.subarray(start, end).toString("utf8").replace(/\r$/, "");
    const col = bytes.subarray(start, at).toString("utf8").length + 1;
    return { file, line: line + 1, col, text };
  };
}

/** unicode.IsSpace, which `yaml.ToJSON` trims before looking for a leading `{`. */
function isGoSpace(c: number): boolean {
  return (
    (c >= 0x09 && c <= 0x0d) ||
    c === 0x20 ||
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000
  );
}

/** apimachinery `IsJSONBuffer`: the content is taken as JSON when it starts with `{`. */
export function isJsonBuffer(text: string): boolean {
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    if (isGoSpace(c)) continue;
    return c === 0x7b;
  }
  return false;
}

/**
 * Decodes a config file over the defaults, as `yaml.ToJSON` + `json.Unmarshal` do: keys match
 * case-insensitively, unknown keys are ignored, absent keys keep their defaults. Does not
 * validate (see {@link validateMasqConfig}).
 */
export function decodeMasqConfig(
  content: string | Uint8Array,
  options: { readonly nomasqAllReservedRanges?: boolean; readonly locate?: Locate } = {},
): { config: MasqConfig } | { error: ConfigError } {
  const bytes = typeof content === "string" ? Buffer.from(content, "utf8") : Buffer.from(content);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    text = bytes.toString("utf8");
  }
  const locate = options.locate;
  const at = (offset: number) => (locate ? { source: locate(offset) } : {});
  let root: GoValue;
  if (isJsonBuffer(text)) {
    const r = parseGoJson(bytes);
    if ("error" in r) {
      return {
        error: { message: r.error.message, stage: "decode", exact: true, ...at(r.error.offset) },
      };
    }
    root = r.value;
  } else {
    const r = goYamlToJson(text);
    if ("error" in r) {
      return {
        error: {
          message: r.error.message,
          stage: "decode",
          exact: r.error.exact,
          ...at(r.error.offset),
        },
      };
    }
    root = r.value;
  }
  return unmarshalMasqConfig(root, defaultMasqConfig(options.nomasqAllReservedRanges), locate);
}

/** Go's case-insensitive key match (bytes.EqualFold against an ASCII field name). */
function foldKey(key: string): string {
  let out = "";
  for (const ch of key) {
    if (ch === "\u017f") out += "s";
    else if (ch === "\u212a") out += "k";
    else out += ch.length === 1 && ch < "\u0080" ? ch.toLowerCase() : ch;
  }
  return out;
}

const FIELD_BY_FOLDED: ReadonlyMap<string, ConfigKey> = new Map(
  CONFIG_KEYS.map((k) => [k.toLowerCase(), k]),
);

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

function typeError(value: string, field: string, type: string): string {
  return `json: cannot unmarshal ${value} into Go struct field MasqConfig.${field} of type ${type}`;
}

/** json.Unmarshal of the decoded document into a MasqConfig holding `base`. */
function unmarshalMasqConfig(
  root: GoValue,
  base: MasqConfig,
  locate: Locate | undefined,
): { config: MasqConfig } | { error: ConfigError } {
  const fail = (message: string, offset: number) => ({
    error: {
      message,
      stage: "decode" as const,
      exact: true,
      ...(locate ? { source: locate(offset) } : {}),
    },
  });
  if (root.kind === "null") return { config: base };
  if (root.kind !== "object") {
    return fail(
      `json: cannot unmarshal ${goKindName(root)} into Go value of type main.MasqConfig`,
      root.offset,
    );
  }
  const c = {
    nonMasqueradeCIDRs: base.nonMasqueradeCIDRs,
    cidrLimit: base.cidrLimit,
    masqLinkLocal: base.masqLinkLocal,
    masqLinkLocalIPv6: base.masqLinkLocalIPv6,
    resyncIntervalNs: base.resyncIntervalNs,
  };
  const sources: Partial<Record<ConfigKey, SourceRef>> = {};
  // encoding/json keeps going after a type mismatch and returns the first one at the end;
  // an error from a field's own UnmarshalJSON (the Duration) stops decoding at once.
  let saved: { message: string; offset: number } | undefined;
  const save = (message: string, offset: number) => {
    saved ??= { message, offset };
  };
  for (const { key, keyOffset, value } of root.entries) {
    const field = FIELD_BY_FOLDED.get(foldKey(key));
    if (field === undefined) continue;
    if (locate) sources[field] = locate(keyOffset);
    switch (field) {
      case "nonMasqueradeCIDRs": {
        if (value.kind === "null") c.nonMasqueradeCIDRs = null;
        else if (value.kind !== "array")
          save(typeError(goKindName(value), field, "[]string"), value.offset);
        else {
          // encoding/json decodes into the slice it finds (the defaults, or an earlier key's
          // list): a null or mistyped element leaves what that slice held at its index, and ""
          // past its end
          const prior = c.nonMasqueradeCIDRs ?? [];
          c.nonMasqueradeCIDRs = value.items.map((item, i) => {
            const source = locate ? { source: locate(item.offset) } : {};
            if (item.kind === "string") return { text: item.value, ...source };
            if (item.kind !== "null")
              save(typeError(goKindName(item), field, "string"), item.offset);
            return prior[i] ?? { text: "", ...source };
          });
        }
        break;
      }
      case "cidrLimit": {
        if (value.kind === "null") break;
        if (value.kind !== "number") {
          save(typeError(goKindName(value), field, "int"), value.offset);
          break;
        }
        const v = /^-?[0-9]+$/.test(value.text) ? BigInt(value.text) : undefined;
        if (v === undefined || v < INT64_MIN || v > INT64_MAX) {
          save(typeError(`number ${value.text}`, field, "int"), value.offset);
          break;
        }
        c.cidrLimit = v;
        break;
      }
      case "masqLinkLocal":
      case "masqLinkLocalIPv6": {
        if (value.kind === "null") break;
        if (value.kind !== "bool") save(typeError(goKindName(value), field, "bool"), value.offset);
        else c[field] = value.value;
        break;
      }
      case "resyncInterval": {
        // metav1.Duration.UnmarshalJSON: a JSON string through time.ParseDuration; null is
        // passed to it too, becomes "" and is rejected
        if (value.kind !== "string" && value.kind !== "null") {
          return fail(typeError(goKindName(value), field, "string"), value.offset);
        }
        const d = parseGoDuration(value.kind === "string" ? value.value : "");
        if ("error" in d) return fail(d.error, value.offset);
        c.resyncIntervalNs = d.ns;
        break;
      }
    }
  }
  if (saved) return fail(saved.message, saved.offset);
  return { config: { ...c, sources } };
}

/** What validation rejected: the agent's error text and the entry it names. */
export interface ValidationError {
  readonly message: string;
  readonly entry?: NonMasqEntry;
}

/**
 * MasqConfig.validate: the CIDR count against cidrLimit, then each entry in order: parse,
 * alignment, and IPv6 only with `--enable-ipv6`. Undefined when the agent accepts the config.
 */
export function validateMasqConfig(
  config: MasqConfig,
  flags: { readonly enableIpv6: boolean },
): ValidationError | undefined {
  const list = config.nonMasqueradeCIDRs ?? [];
  if (BigInt(list.length) > config.cidrLimit) {
    return {
      message: `the daemon can only accept up to ${config.cidrLimit} CIDRs (excluding link-local), but got ${list.length} CIDRs (excluding link local)`,
    };
  }
  for (const entry of list) {
    const r = goParseCidr(entry.text);
    if ("error" in r) {
      return {
        message: `CIDR ${goQuote(entry.text)} could not be parsed, ${r.error}`,
        entry,
      };
    }
    if (!r.ok.aligned) {
      return {
        message: `CIDR ${goQuote(entry.text)} is not aligned to a CIDR block, ip: ${goQuote(r.ok.ipText)} network: ${goQuote(r.ok.networkText)}`,
        entry,
      };
    }
    if (!flags.enableIpv6 && r.ok.agentFamily === 6) {
      return {
        message: `ipv6 is not enabled, but ipv6 cidr ${entry.text} provided. Enable ipv6 using --enable-ipv6 agent flag`,
        entry,
      };
    }
  }
  return undefined;
}

/** The config file as the agent finds it at /etc/config/ip-masq-agent. */
export type ConfigFile =
  | { readonly present: false }
  | { readonly present: true; readonly content: string | Uint8Array; readonly locate?: Locate };

/** One run of the agent's `syncConfig`. */
export interface SyncOutcome {
  /** The config the agent runs with after this cycle. */
  readonly config: MasqConfig;
  /** The file was decoded and accepted (or absent, so the defaults were applied). */
  readonly applied: boolean;
  /** Rejected: the error the agent logs; it keeps `config` (the previous one) and skips the rule sync. */
  readonly error?: ConfigError;
  /** The defaults were used because there is no file. */
  readonly usedDefaults: boolean;
}

/**
 * The agent's config step given the config it ran with before: an absent file resets every
 * field to the defaults; an invalid file keeps the previous config (and the rules it wrote).
 */
export function syncMasqConfig(
  previous: MasqConfig,
  file: ConfigFile,
  flags: { readonly nomasqAllReservedRanges: boolean; readonly enableIpv6: boolean },
): SyncOutcome {
  if (!file.present) {
    return {
      config: defaultMasqConfig(flags.nomasqAllReservedRanges),
      applied: true,
      usedDefaults: true,
    };
  }
  const decoded = decodeMasqConfig(file.content, {
    nomasqAllReservedRanges: flags.nomasqAllReservedRanges,
    ...(file.locate ? { locate: file.locate } : {}),
  });
  if ("error" in decoded) {
    return { config: previous, applied: false, error: decoded.error, usedDefaults: false };
  }
  const invalid = validateMasqConfig(decoded.config, flags);
  if (invalid) {
    const source = invalid.entry?.source;
    return {
      config: previous,
      applied: false,
      error: {
        message: invalid.message,
        stage: "validate",
        exact: true,
        ...(source ? { source } : {}),
      },
      usedDefaults: false,
    };
  }
  return { config: decoded.config, applied: true, usedDefaults: false };
}

/**
 * The config as the agent prints it in its `Using config:` log line (json.Marshal of MasqConfig):
 * agent key names in struct order, `resyncInterval` as a Go duration string (`1m0s`).
 */
export function renderMasqConfigJson(config: MasqConfig, indent = 0): string {
  const cidrs =
    config.nonMasqueradeCIDRs === null
      ? "null"
      : `[${config.nonMasqueradeCIDRs.map((e) => goJsonString(e.text)).join(",")}]`;
  const fields: [string, string][] = [
    ["nonMasqueradeCIDRs", cidrs],
    ["cidrLimit", config.cidrLimit.toString()],
    ["masqLinkLocal", String(config.masqLinkLocal)],
    ["masqLinkLocalIPv6", String(config.masqLinkLocalIPv6)],
    ["resyncInterval", JSON.stringify(formatGoDuration(config.resyncIntervalNs))],
  ];
  if (indent === 0) return `{${fields.map(([k, v]) => `"${k}":${v}`).join(",")}}`;
  const pad = " ".repeat(indent);
  const list =
    config.nonMasqueradeCIDRs === null || config.nonMasqueradeCIDRs.length === 0
      ? cidrs
      : `[\n${config.nonMasqueradeCIDRs.map((e) => `${pad}${pad}${goJsonString(e.text)}`).join(",\n")}\n${pad}]`;
  fields[0] = ["nonMasqueradeCIDRs", list];
  return `{\n${fields.map(([k, v]) => `${pad}"${k}": ${v}`).join(",\n")}\n}`;
}

/** encoding/json's string encoding: like JSON.stringify, plus HTML-safe escapes and U+2028/9. */
export function goJsonString(s: string): string {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => {
    return `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
  });
}
