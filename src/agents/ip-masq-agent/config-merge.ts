/**
 * @module agents/ip-masq-agent/config-merge — Azure ip-masq-agent-v2's config step (its
 * `syncConfig`, cmd/ip-masq-agent-v2/ip-masq-agent.go, v0.1.15): every file of /etc/config/ whose
 * name starts with "ip-masq", in directory order, is decoded (YAML or JSON) into an EMPTY config,
 * validated (at most 64 CIDRs, each parsed and aligned, IPv6 only with --enable-ipv6) and merged:
 * the nonMasqueradeCIDRs are united (duplicates once), masqLinkLocal and masqLinkLocalIPv6 are
 * OR-ed. With no such file the defaults apply (RFC 1918, plus the reserved ranges with
 * --nomasq-all-reserved-ranges). A file it cannot read or accept ends the process (klog.Fatalf):
 * no rules are written in that run, and the rules of an earlier run stay in the kernel.
 */
import type { SourceRef } from "../../model/types.ts";
import {
  type ConfigError,
  DEFAULT_CIDR_LIMIT,
  defaultMasqConfig,
  isJsonBuffer,
  type Locate,
  type MasqConfig,
  type NonMasqEntry,
  validateMasqConfig,
} from "./config.ts";
import { AZURE_V2_FILE_PREFIX } from "./flavour.ts";
import { type GoValue, goKindName, parseGoJson } from "./go-json.ts";
import { goQuote } from "./go-quote.ts";
import { goYamlToJson } from "./go-yaml.ts";

/** One file of the config directory as the fork lists it. */
export interface ConfigDirFile {
  readonly name: string;
  readonly isDirectory?: boolean;
  readonly content?: string | Uint8Array;
  readonly locate?: Locate;
}

/** What one file contributed. */
export interface FileContribution {
  readonly name: string;
  readonly cidrs: readonly NonMasqEntry[];
  readonly masqLinkLocal: boolean;
  readonly masqLinkLocalIPv6: boolean;
}

export interface MergedOutcome {
  /** The config the agent writes rules for; the defaults when no file is read. */
  readonly config: MasqConfig;
  /** Files read, in order (those whose names start with "ip-masq"). */
  readonly read: readonly FileContribution[];
  /** Files in the directory the agent skips (name without the prefix). */
  readonly skipped: readonly string[];
  readonly usedDefaults: boolean;
  /** The agent exits with this (klog.Fatalf); no rules are written in that run. */
  readonly error?: ConfigError & { readonly file: string };
}

/** The fork's --resync-interval is whole seconds (default 60). */
export interface MergeFlags {
  readonly nomasqAllReservedRanges: boolean;
  readonly enableIpv6: boolean;
  readonly resyncIntervalSeconds?: number;
}

const FIELDS: ReadonlyMap<string, "nonMasqueradeCIDRs" | "masqLinkLocal" | "masqLinkLocalIPv6"> =
  new Map([
    ["nonmasqueradecidrs", "nonMasqueradeCIDRs"],
    ["masqlinklocal", "masqLinkLocal"],
    ["masqlinklocalipv6", "masqLinkLocalIPv6"],
  ] as const);

const typeError = (value: string, field: string, type: string) =>
  `json: cannot unmarshal ${value} into Go struct field MasqConfig.${field} of type ${type}`;

/** json.Unmarshal into a fresh (empty) MasqConfig of the fork. */
function unmarshalFork(
  root: GoValue,
  locate: Locate | undefined,
):
  | { value: FileContribution & { sources: Record<string, SourceRef> } }
  | { error: string; offset: number } {
  const sources: Record<string, SourceRef> = {};
  let cidrs: NonMasqEntry[] = [];
  let masqLinkLocal = false;
  let masqLinkLocalIPv6 = false;
  if (root.kind === "null") {
    return { value: { name: "", cidrs, masqLinkLocal, masqLinkLocalIPv6, sources } };
  }
  if (root.kind !== "object") {
    return {
      error: `json: cannot unmarshal ${goKindName(root)} into Go value of type main.MasqConfig`,
      offset: root.offset,
    };
  }
  let saved: { error: string; offset: number } | undefined;
  for (const { key, keyOffset, value } of root.entries) {
    const field = FIELDS.get(key.toLowerCase());
    if (!field) continue;
    if (locate) sources[field] = locate(keyOffset);
    if (field === "nonMasqueradeCIDRs") {
      if (value.kind === "null") cidrs = [];
      else if (value.kind !== "array")
        saved ??= { error: typeError(goKindName(value), field, "[]string"), offset: value.offset };
      else {
        cidrs = value.items.map((item) => {
          const source = locate ? { source: locate(item.offset) } : {};
          if (item.kind === "string") return { text: item.value, ...source };
          if (item.kind !== "null")
            saved ??= { error: typeError(goKindName(item), field, "string"), offset: item.offset };
          return { text: "", ...source };
        });
      }
    } else if (value.kind === "bool") {
      if (field === "masqLinkLocal") masqLinkLocal = value.value;
      else masqLinkLocalIPv6 = value.value;
    } else if (value.kind !== "null") {
      saved ??= { error: typeError(goKindName(value), field, "bool"), offset: value.offset };
    }
  }
  if (saved) return saved;
  return { value: { name: "", cidrs, masqLinkLocal, masqLinkLocalIPv6, sources } };
}

/**
 * The fork's config step over the files of its directory (any order: the agent reads them sorted
 * by name, as os.ReadDir returns them).
 * @example mergeConfigDir([{ name: "ip-masq-agent", content: "nonMasqueradeCIDRs: [10.0.0.0/8]" }], flags)
 */
export function mergeConfigDir(files: readonly ConfigDirFile[], flags: MergeFlags): MergedOutcome {
  const sorted = [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const skipped = sorted.filter((f) => !f.name.startsWith(AZURE_V2_FILE_PREFIX)).map((f) => f.name);
  const chosen = sorted.filter((f) => f.name.startsWith(AZURE_V2_FILE_PREFIX));
  const resyncIntervalNs = BigInt(flags.resyncIntervalSeconds ?? 60) * 1_000_000_000n;
  const defaults = (): MasqConfig => ({
    ...defaultMasqConfig(flags.nomasqAllReservedRanges),
    cidrLimit: DEFAULT_CIDR_LIMIT,
    resyncIntervalNs,
  });
  const read: FileContribution[] = [];
  const fail = (
    file: string,
    message: string,
    source?: SourceRef,
    stage: ConfigError["stage"] = "decode",
  ) => ({
    config: defaults(),
    read,
    skipped,
    usedDefaults: true,
    error: {
      file,
      message: `the daemon encountered an error: error syncing configuration: ${message}`,
      stage,
      exact: true,
      ...(source ? { source } : {}),
    },
  });
  const merged = new Map<string, NonMasqEntry>();
  let masqLinkLocal = false;
  let masqLinkLocalIPv6 = false;
  const sources: Partial<
    Record<"nonMasqueradeCIDRs" | "masqLinkLocal" | "masqLinkLocalIPv6", SourceRef>
  > = {};
  for (const f of chosen) {
    const q = goQuote(f.name);
    if (f.isDirectory || f.content === undefined) {
      return fail(
        f.name,
        `failed to read config file ${q}, error: read /etc/config/${f.name}: is a directory`,
      );
    }
    const bytes =
      typeof f.content === "string" ? Buffer.from(f.content, "utf8") : Buffer.from(f.content);
    const text = bytes.toString("utf8");
    let root: GoValue;
    if (isJsonBuffer(text)) {
      const r = parseGoJson(bytes);
      if ("error" in r)
        return fail(
          f.name,
          `failed to unmarshal config file ${q}, error: ${r.error.message}`,
          f.locate?.(r.error.offset),
        );
      root = r.value;
    } else {
      const r = goYamlToJson(text);
      if ("error" in r)
        return fail(
          f.name,
          `failed to convert config file ${q} to JSON, error: ${r.error.message}`,
          f.locate?.(r.error.offset),
        );
      root = r.value;
    }
    const u = unmarshalFork(root, f.locate);
    if ("error" in u)
      return fail(
        f.name,
        `failed to unmarshal config file ${q}, error: ${u.error}`,
        f.locate?.(u.offset),
      );
    const probe: MasqConfig = { ...defaults(), nonMasqueradeCIDRs: u.value.cidrs, sources: {} };
    const invalid = validateMasqConfig(probe, flags);
    if (invalid) {
      return fail(
        f.name,
        `config file ${q} is invalid: ${invalid.message}`,
        invalid.entry?.source,
        "validate",
      );
    }
    for (const e of u.value.cidrs) if (!merged.has(e.text)) merged.set(e.text, e);
    // a flag's line: the file that turned it on (OR), else the first that wrote it
    const cite = (k: "nonMasqueradeCIDRs" | "masqLinkLocal" | "masqLinkLocalIPv6", on: boolean) => {
      const at = u.value.sources[k];
      if (at && (!sources[k] || on)) sources[k] = at;
    };
    cite("nonMasqueradeCIDRs", false);
    cite("masqLinkLocal", u.value.masqLinkLocal && !masqLinkLocal);
    cite("masqLinkLocalIPv6", u.value.masqLinkLocalIPv6 && !masqLinkLocalIPv6);
    masqLinkLocal ||= u.value.masqLinkLocal;
    masqLinkLocalIPv6 ||= u.value.masqLinkLocalIPv6;
    read.push({ ...u.value, name: f.name });
  }
  if (chosen.length === 0) return { config: defaults(), read, skipped, usedDefaults: true };
  return {
    config: {
      nonMasqueradeCIDRs: [...merged.values()],
      cidrLimit: DEFAULT_CIDR_LIMIT,
      masqLinkLocal,
      masqLinkLocalIPv6,
      resyncIntervalNs,
      sources,
    },
    read,
    skipped,
    usedDefaults: false,
  };
}
