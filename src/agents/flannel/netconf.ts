/**
 * @module agents/flannel/netconf — Flannel's network config as flanneld reads it: the
 * `kube-flannel-cfg` ConfigMap's `net-conf.json` (flannel pkg/subnet/config.go ParseConfig: Go's
 * encoding/json, so keys match case-insensitively; EnableIPv4 defaults to true; a missing Backend
 * means "udp"), each setting with the file line it is written on.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { Diagnostic, SourceRef } from "../../model/types.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";

export const CONFIGMAP_NAME = "kube-flannel-cfg";
export const NETCONF_KEY = "net-conf.json";

export interface FlannelNetConf {
  readonly configMap: KubeObject;
  readonly network?: Cidr;
  readonly networkText?: string;
  readonly ipv6Network?: Cidr;
  readonly enableIPv4: boolean;
  readonly enableIPv6: boolean;
  readonly enableNFTables: boolean;
  readonly backendType: string;
  /** Where each key is written (by its Go field name). */
  readonly sources: ReadonlyMap<string, SourceRef>;
}

/** The ConfigMap flanneld mounts: kube-flannel-cfg in kube-flannel (>= v0.20) or kube-system. */
export function findFlannelConfigMap(objects: readonly KubeObject[]): KubeObject | undefined {
  return objects.find((o) => o.kind === "ConfigMap" && o.name === CONFIGMAP_NAME);
}

/** Go's encoding/json field match: exact name first, else case-insensitive. */
function field(obj: Record<string, unknown>, name: string): unknown {
  if (name in obj) return obj[name];
  const k = Object.keys(obj).find((x) => x.toLowerCase() === name.toLowerCase());
  return k === undefined ? undefined : obj[k];
}

/** Reads net-conf.json; undefined when the snapshot has no kube-flannel-cfg ConfigMap. */
export function readFlannelNetConf(objects: readonly KubeObject[]): {
  value: FlannelNetConf | undefined;
  diagnostics: Diagnostic[];
} {
  const cm = findFlannelConfigMap(objects);
  const diagnostics: Diagnostic[] = [];
  if (!cm) return { value: undefined, diagnostics };
  const path = ["data", NETCONF_KEY];
  const text = (cm.raw["data"] as Record<string, unknown> | undefined)?.[NETCONF_KEY];
  const where = cm.locate(path) ?? cm.source;
  if (typeof text !== "string") {
    diagnostics.push({
      code: "SCHEMA",
      severity: "warning",
      message: `ConfigMap ${CONFIGMAP_NAME} has no ${NETCONF_KEY}: flanneld cannot start without its network config`,
      source: where,
    });
    return { value: undefined, diagnostics };
  }
  const lines = text.split("\n");
  const lineOf = (key: string): SourceRef => {
    const i = lines.findIndex((l) => new RegExp(`"${key}"\\s*:`, "i").test(l));
    return (i >= 0 ? cm.locateInString(path, i + 1) : undefined) ?? where;
  };
  let json: Record<string, unknown> = {};
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v === "object" && v !== null && !Array.isArray(v))
      json = v as Record<string, unknown>;
    else throw new Error("not a JSON object");
  } catch (e) {
    diagnostics.push({
      code: "SCHEMA",
      severity: "error",
      message: `${NETCONF_KEY} is not a JSON object (${(e as Error).message}); flanneld refuses it and does not start`,
      source: where,
    });
    return { value: undefined, diagnostics };
  }
  const sources = new Map<string, SourceRef>();
  const cidr = (key: string, family: 4 | 6): { cidr?: Cidr; text?: string } => {
    const raw = field(json, key);
    if (raw === undefined) return {};
    sources.set(key, lineOf(key));
    const r = typeof raw === "string" ? tryParseCidr(raw) : { error: "not a string" };
    if ("cidr" in r && r.cidr.family === family) return { cidr: r.cidr, text: raw as string };
    diagnostics.push({
      code: "SCHEMA",
      severity: "error",
      message: `${NETCONF_KEY} ${key} ${JSON.stringify(raw)} is not an IPv${family} CIDR; flanneld refuses the config`,
      source: lineOf(key),
    });
    return {};
  };
  const bool = (key: string, dflt: boolean): boolean => {
    const raw = field(json, key);
    if (raw === undefined) return dflt;
    sources.set(key, lineOf(key));
    return raw === true;
  };
  const net = cidr("Network", 4);
  const net6 = cidr("IPv6Network", 6);
  const backend = field(json, "Backend");
  const type =
    backend === undefined
      ? "udp"
      : typeof backend === "object" && backend !== null
        ? String(field(backend as Record<string, unknown>, "Type") ?? "")
        : "";
  if (backend !== undefined) sources.set("Backend", lineOf("Type"));
  return {
    value: {
      configMap: cm,
      ...(net.cidr ? { network: net.cidr, networkText: net.text } : {}),
      ...(net6.cidr ? { ipv6Network: net6.cidr } : {}),
      enableIPv4: bool("EnableIPv4", true),
      enableIPv6: bool("EnableIPv6", false),
      enableNFTables: bool("EnableNFTables", false),
      backendType: type,
      sources,
    },
    diagnostics,
  };
}
