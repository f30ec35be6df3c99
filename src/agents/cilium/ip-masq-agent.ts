/**
 * @module agents/cilium/ip-masq-agent — Cilium's own ip-masq-agent (pkg/ipmasq/ipmasq.go, on when
 * `enable-ip-masq-agent: "true"`): it reads /etc/config/ip-masq-agent (the `ip-masq-agent`
 * ConfigMap's key `config`, projected by the cilium DaemonSet) and writes the BPF map
 * `cilium_ipmasq_v4/v6` that `cilium-dbg bpf ipmasq list` prints. Its semantics differ from the
 * upstream agent's: it reads only `nonMasqueradeCIDRs`, `masqLinkLocal` and `masqLinkLocalIPv6`
 * (YAML turned into JSON, field names matched case-insensitively as Go's encoding/json does;
 * other keys such as `resyncInterval` are ignored), a missing or empty file means its eleven
 * default ranges (RFC 1918, 100.64.0.0/10 and the other reserved ranges), a file with a
 * nonMasqueradeCIDRs list (even an empty one) replaces them, and the link-local ranges are added
 * unless masqLinkLocal (IPv4) / masqLinkLocalIPv6 is true. A file it cannot decode leaves the map
 * as it was ("Failed to de-serialize json").
 */

import type { KubeObject } from "../../evidence/kube-objects.ts";
import { yamlLib } from "../../evidence/lazy-yaml.ts";
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, contains, formatCidr, type Ip, tryParseCidr } from "../../net/cidr.ts";

export const CILIUM_IPMASQ_CONFIG_PATH = "/etc/config/ip-masq-agent";
export const CILIUM_IPMASQ_CONFIGMAP = "ip-masq-agent";
export const CILIUM_IPMASQ_KEY = "config";

/** pkg/ipmasq/ipmasq.go defaultNonMasqCIDRs (used when the config file is missing or empty). */
export const CILIUM_DEFAULT_NON_MASQ_CIDRS = [
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "100.64.0.0/10",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.88.99.0/24",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "240.0.0.0/4",
] as const;
export const CILIUM_LINK_LOCAL_V4 = "169.254.0.0/16";
export const CILIUM_LINK_LOCAL_V6 = "fe80::/10";

/** One CIDR Cilium puts in its map, with where it comes from. */
export interface CiliumNonMasqEntry {
  readonly text: string;
  readonly cidr: Cidr;
  readonly origin: "config" | "default" | "link-local";
  /** The config line; undefined for defaults and the link-local ranges. */
  readonly source?: SourceRef;
}

export interface CiliumIpMasqIntent {
  /** The ConfigMap read, undefined when the snapshot has none (Cilium then uses its defaults). */
  readonly configMap?: KubeObject;
  /** The ConfigMap's `config` key, as written. */
  readonly configSource?: SourceRef;
  /** Cilium's map would hold these (undefined when the config cannot be decoded). */
  readonly entries?: readonly CiliumNonMasqEntry[];
  readonly usesDefaults: boolean;
  readonly masqLinkLocal: boolean;
  readonly masqLinkLocalIPv6: boolean;
}

export function findIpMasqConfigMap(objects: readonly KubeObject[]): KubeObject | undefined {
  return objects.find(
    (o) =>
      o.kind === "ConfigMap" && o.namespace === "kube-system" && o.name === CILIUM_IPMASQ_CONFIGMAP,
  );
}

const cidrOf = (text: string) => {
  const r = tryParseCidr(text);
  return "cidr" in r ? r.cidr : undefined;
};

function defaults(): CiliumNonMasqEntry[] {
  return CILIUM_DEFAULT_NON_MASQ_CIDRS.map((text) => ({
    text,
    cidr: cidrOf(text)!,
    origin: "default" as const,
  }));
}

function linkLocal(v4: boolean, v6: boolean): CiliumNonMasqEntry[] {
  const out: CiliumNonMasqEntry[] = [];
  if (!v4)
    out.push({
      text: CILIUM_LINK_LOCAL_V4,
      cidr: cidrOf(CILIUM_LINK_LOCAL_V4)!,
      origin: "link-local",
    });
  if (!v6)
    out.push({
      text: CILIUM_LINK_LOCAL_V6,
      cidr: cidrOf(CILIUM_LINK_LOCAL_V6)!,
      origin: "link-local",
    });
  return out;
}

/** The value of a top-level key, matched case-insensitively (Go's encoding/json). */
function field(obj: Record<string, unknown>, name: string): unknown {
  const k = Object.keys(obj).find((x) => x.toLowerCase() === name.toLowerCase());
  return k === undefined ? undefined : obj[k];
}

/**
 * What Cilium's ip-masq-agent puts in its map, from the `ip-masq-agent` ConfigMap (or its
 * defaults when `objects` has none).
 */
export function readCiliumIpMasqIntent(objects: readonly KubeObject[]): Parsed<CiliumIpMasqIntent> {
  const diagnostics: Diagnostic[] = [];
  const cm = findIpMasqConfigMap(objects);
  const data = (cm?.raw["data"] ?? {}) as Record<string, unknown>;
  const text =
    typeof data[CILIUM_IPMASQ_KEY] === "string" ? (data[CILIUM_IPMASQ_KEY] as string) : undefined;
  const configSource = cm ? (cm.locate(["data", CILIUM_IPMASQ_KEY]) ?? cm.source) : undefined;
  const base = {
    ...(cm ? { configMap: cm } : {}),
    ...(configSource ? { configSource } : {}),
  };
  if (text === undefined || text.trim() === "") {
    // no file (the volume is optional) or an empty one: defaults, link-local kept
    return {
      value: {
        ...base,
        entries: [...defaults(), ...linkLocal(false, false)],
        usesDefaults: true,
        masqLinkLocal: false,
        masqLinkLocalIPv6: false,
      },
      diagnostics,
    };
  }
  const refuse = (message: string, line = 1): Parsed<CiliumIpMasqIntent> => {
    diagnostics.push({
      code: "CILIUM_IPMASQ_CONFIG",
      severity: "warning",
      message: `${message}: Cilium's ip-masq-agent logs "Failed to de-serialize json" and keeps the map it had; what it holds is unknown`,
      ...(cm ? { source: cm.locateInString(["data", CILIUM_IPMASQ_KEY], line) ?? cm.source } : {}),
    });
    return {
      value: { ...base, usesDefaults: false, masqLinkLocal: false, masqLinkLocalIPv6: false },
      diagnostics,
    };
  };
  let doc: unknown;
  try {
    doc = yamlLib().parse(text);
  } catch (e) {
    return refuse(
      `the ip-masq-agent ConfigMap's config is not YAML or JSON (${(e as Error).message.split("\n")[0]})`,
    );
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    return refuse(
      "expected the ip-masq-agent config to be a mapping (nonMasqueradeCIDRs, masqLinkLocal)",
    );
  }
  const obj = doc as Record<string, unknown>;
  const lines = text.split("\n");
  const lineOf = (needle: string) => {
    const i = lines.findIndex((l) => l.includes(needle));
    return i >= 0 ? i + 1 : 1;
  };
  const boolField = (name: string): boolean | "bad" => {
    const v = field(obj, name);
    if (v === undefined || v === null) return false;
    return typeof v === "boolean" ? v : "bad";
  };
  const mll = boolField("masqLinkLocal");
  const mll6 = boolField("masqLinkLocalIPv6");
  if (mll === "bad") return refuse("masqLinkLocal: expected true or false", lineOf("asqLinkLocal"));
  if (mll6 === "bad")
    return refuse("masqLinkLocalIPv6: expected true or false", lineOf("asqLinkLocalIPv6"));
  const list = field(obj, "nonMasqueradeCIDRs");
  const entries: CiliumNonMasqEntry[] = [];
  if (list !== undefined && list !== null) {
    if (!Array.isArray(list))
      return refuse("nonMasqueradeCIDRs: expected a list of CIDRs", lineOf("onMasqueradeCIDRs"));
    for (const item of list) {
      // Ipnet.UnmarshalJSON: a JSON string holding a prefix (netip.ParsePrefix, then Masked)
      if (typeof item !== "string")
        return refuse(
          `nonMasqueradeCIDRs: expected CIDR strings, got ${JSON.stringify(item)}`,
          lineOf("onMasqueradeCIDRs"),
        );
      const r = tryParseCidr(item.trim(), { allowBareAddress: false });
      const line = lineOf(item);
      if (!("cidr" in r))
        return refuse(`nonMasqueradeCIDRs: Invalid CIDR "${item}" (${r.error})`, line);
      const source = cm?.locateInString(["data", CILIUM_IPMASQ_KEY], line);
      entries.push({
        text: formatCidr(r.cidr),
        cidr: r.cidr,
        origin: "config",
        ...(source ? { source } : {}),
      });
    }
  }
  // an explicit list (even empty) replaces the defaults: isEmpty is only for a missing or empty file
  return {
    value: {
      ...base,
      entries: [...entries, ...linkLocal(mll, mll6)],
      usesDefaults: false,
      masqLinkLocal: mll,
      masqLinkLocalIPv6: mll6,
    },
    diagnostics,
  };
}

/** The entry of Cilium's (intended) map that holds `dst`, longest prefix first (an LPM map). */
export function nonMasqEntryFor(
  entries: readonly CiliumNonMasqEntry[],
  dst: Ip,
): CiliumNonMasqEntry | undefined {
  return entries
    .filter((e) => e.cidr.family === dst.family && contains(e.cidr, dst))
    .sort((a, b) => b.cidr.prefix - a.cidr.prefix)[0];
}

/** The ConfigMap's config with `keep` as its list, as Cilium's ip-masq-agent reads it. */
export function renderCiliumIpMasqConfig(
  keep: readonly string[],
  intent: CiliumIpMasqIntent,
): string {
  const lines = ["nonMasqueradeCIDRs:", ...keep.map((c) => `- ${c}`)];
  if (intent.masqLinkLocal) lines.push("masqLinkLocal: true");
  if (intent.masqLinkLocalIPv6) lines.push("masqLinkLocalIPv6: true");
  return `${lines.join("\n")}\n`;
}
