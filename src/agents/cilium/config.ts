/**
 * @module agents/cilium/config — the masquerade settings of Cilium (and GKE Dataplane V2's anetd,
 * which runs Cilium) from the `kube-system/cilium-config` ConfigMap, each with the line it is
 * written on. Keys and defaults are the agent's flags (pkg/option/config.go, pkg/ipmasq/cell):
 * enable-ipv4-masquerade / enable-ipv6-masquerade (default true / false), enable-bpf-masquerade
 * (false), enable-ip-masq-agent (false), ipv4-native-routing-cidr (older: native-routing-cidr),
 * ipv6-native-routing-cidr, masquerade-interfaces, routing-mode (older: tunnel; default tunnel),
 * iptables-random-fully. The agent reads the ConfigMap's values as flag strings (viper): "true"
 * and "false" for booleans.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, formatCidr, tryParseCidr } from "../../net/cidr.ts";

export const CILIUM_CONFIG_NAME = "cilium-config";
export const KEY_IPV4_MASQ = "enable-ipv4-masquerade";
export const KEY_IPV6_MASQ = "enable-ipv6-masquerade";
export const KEY_BPF_MASQ = "enable-bpf-masquerade";
export const KEY_IP_MASQ_AGENT = "enable-ip-masq-agent";
export const KEY_IPV4_NATIVE = "ipv4-native-routing-cidr";
/** The key's name before Cilium 1.12 (still read as a fallback by podpath). */
export const KEY_NATIVE_LEGACY = "native-routing-cidr";
export const KEY_IPV6_NATIVE = "ipv6-native-routing-cidr";
export const KEY_MASQ_INTERFACES = "masquerade-interfaces";
export const KEY_ROUTING_MODE = "routing-mode";
export const KEY_TUNNEL_LEGACY = "tunnel";
export const KEY_RANDOM_FULLY = "iptables-random-fully";

export const CILIUM_SETTING_KEYS = [
  KEY_IPV4_MASQ,
  KEY_IPV6_MASQ,
  KEY_BPF_MASQ,
  KEY_IP_MASQ_AGENT,
  KEY_IPV4_NATIVE,
  KEY_NATIVE_LEGACY,
  KEY_IPV6_NATIVE,
  KEY_MASQ_INTERFACES,
  KEY_ROUTING_MODE,
  KEY_TUNNEL_LEGACY,
] as const;

/** One key of the ConfigMap as written. */
export interface ConfigEntry {
  readonly key: string;
  readonly value: string;
  readonly source: SourceRef;
}

/** What the agents of this ConfigMap run with. */
export interface CiliumMasqSettings {
  readonly ipv4Masquerade: boolean;
  readonly ipv6Masquerade: boolean;
  readonly bpfMasquerade: boolean;
  readonly ipMasqAgent: boolean;
  readonly ipv4NativeRoutingCidr?: Cidr;
  readonly ipv6NativeRoutingCidr?: Cidr;
  readonly masqueradeInterfaces: readonly string[];
  /** routing-mode native, or the older tunnel: disabled. */
  readonly nativeRouting: boolean;
  readonly randomFully: boolean;
}

export interface CiliumConfig {
  readonly configMap: KubeObject;
  readonly entries: ReadonlyMap<string, ConfigEntry>;
  readonly settings: CiliumMasqSettings;
  /** The entry that sets the IPv4 native-routing CIDR (either key name). */
  readonly nativeRoutingEntry?: ConfigEntry;
}

export function findCiliumConfig(objects: readonly KubeObject[]): KubeObject | undefined {
  return objects.find(
    (o) => o.kind === "ConfigMap" && o.namespace === "kube-system" && o.name === CILIUM_CONFIG_NAME,
  );
}

function boolOf(e: ConfigEntry | undefined, fallback: boolean, diags: Diagnostic[]): boolean {
  if (!e) return fallback;
  const v = e.value.trim().toLowerCase();
  // viper/pflag's strconv.ParseBool
  if (["1", "t", "true"].includes(v)) return true;
  if (["0", "f", "false"].includes(v)) return false;
  diags.push({
    code: "CILIUM_CONFIG_BOOL",
    severity: "warning",
    message: `${e.key}: expected "true" or "false", got "${e.value}"; the agent refuses to start with it (podpath assumes the default, ${fallback})`,
    source: e.source,
  });
  return fallback;
}

function cidrOf(e: ConfigEntry | undefined, diags: Diagnostic[]): Cidr | undefined {
  if (!e || e.value.trim() === "") return undefined;
  const r = tryParseCidr(e.value.trim());
  if ("cidr" in r) return r.cidr;
  diags.push({
    code: "CILIUM_CONFIG_CIDR",
    severity: "warning",
    message: `${e.key}: expected a CIDR such as 10.0.0.0/16, got "${e.value}": ${r.error}`,
    source: e.source,
  });
  return undefined;
}

/** The cilium-config ConfigMap's masquerade settings, or undefined when it is not in `objects`. */
export function readCiliumConfig(objects: readonly KubeObject[]): Parsed<CiliumConfig | undefined> {
  const cm = findCiliumConfig(objects);
  const diagnostics: Diagnostic[] = [];
  if (!cm) return { value: undefined, diagnostics };
  const data = (cm.raw["data"] ?? {}) as Record<string, unknown>;
  const entries = new Map<string, ConfigEntry>();
  if (typeof data === "object" && data !== null) {
    for (const [key, v] of Object.entries(data)) {
      const value = typeof v === "string" ? v : String(v);
      entries.set(key, { key, value, source: cm.locate(["data", key]) ?? cm.source });
    }
  }
  const nativeRoutingEntry = entries.get(KEY_IPV4_NATIVE) ?? entries.get(KEY_NATIVE_LEGACY);
  const routing = entries.get(KEY_ROUTING_MODE)?.value.trim();
  const tunnel = entries.get(KEY_TUNNEL_LEGACY)?.value.trim();
  const nativeRouting = routing !== undefined ? routing === "native" : tunnel === "disabled";
  const ipv4NativeRoutingCidr = cidrOf(nativeRoutingEntry, diagnostics);
  const ipv6NativeRoutingCidr = cidrOf(entries.get(KEY_IPV6_NATIVE), diagnostics);
  const settings: CiliumMasqSettings = {
    ipv4Masquerade: boolOf(entries.get(KEY_IPV4_MASQ), true, diagnostics),
    ipv6Masquerade: boolOf(entries.get(KEY_IPV6_MASQ), false, diagnostics),
    bpfMasquerade: boolOf(entries.get(KEY_BPF_MASQ), false, diagnostics),
    ipMasqAgent: boolOf(entries.get(KEY_IP_MASQ_AGENT), false, diagnostics),
    ...(ipv4NativeRoutingCidr ? { ipv4NativeRoutingCidr } : {}),
    ...(ipv6NativeRoutingCidr ? { ipv6NativeRoutingCidr } : {}),
    masqueradeInterfaces: (entries.get(KEY_MASQ_INTERFACES)?.value ?? "")
      .split(/[,\s]+/)
      .filter((s) => s !== ""),
    nativeRouting,
    randomFully: boolOf(entries.get(KEY_RANDOM_FULLY), false, diagnostics),
  };
  return {
    value: {
      configMap: cm,
      entries,
      settings,
      ...(nativeRoutingEntry ? { nativeRoutingEntry } : {}),
    },
    diagnostics,
  };
}

/** `KEY: value` as the ConfigMap writes it, for sentences. */
export function entryText(e: ConfigEntry): string {
  return `${e.key}: "${e.value}"`;
}

/** The native-routing CIDR as text, for sentences. */
export function nativeCidrText(c: CiliumConfig): string | undefined {
  return c.settings.ipv4NativeRoutingCidr
    ? formatCidr(c.settings.ipv4NativeRoutingCidr)
    : undefined;
}
