/**
 * @module agents/wireguard/images — the WireGuard images' own settings in a workload's container
 * env: which image it is, its client pool and the AllowedIPs it hands clients, with their lines.
 *   wg-easy (wg-easy/wg-easy src/config.js): `WG_DEFAULT_ADDRESS` (default `10.8.0.x`: the pool is
 *     that /24), `WG_ALLOWED_IPS` (default `0.0.0.0/0, ::/0`).
 *   linuxserver/wireguard (root/etc/s6-overlay/s6-rc.d/init-wireguard-confs/run): server mode only
 *     with `PEERS`; `INTERNAL_SUBNET` (default `10.13.13.0`: its first three octets make the /24),
 *     `ALLOWEDIPS` (default `0.0.0.0/0, ::/0`).
 *   wg-access-server (docs/2-configuration.md): `WG_VPN_CIDR` (default `10.44.0.0/24`),
 *     `WG_VPN_ALLOWED_IPS` (default `0.0.0.0/0, ::/0`), `WG_IPV4_NAT_ENABLED` (default true).
 */

import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { Located, SourceRef } from "../../model/types.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";

export type WgImage = "wg-easy" | "linuxserver" | "wg-access-server" | "wireguard";

export interface WgImageSettings {
  readonly image: WgImage;
  /** The container's `image:` line. */
  readonly source: SourceRef;
  /** The client pool, from the env or the image's default (then sourced at the image line). */
  readonly pool?: Located<Cidr>;
  readonly poolIsDefault: boolean;
  /** The AllowedIPs the image writes into client configs. */
  readonly allowedIps: readonly Located<Cidr>[];
  readonly allowedIpsIsDefault: boolean;
  /** wg-access-server: NAT of the pool by the server itself (`WG_IPV4_NAT_ENABLED`). */
  readonly nat44?: Located<boolean>;
  /** linuxserver: server mode needs PEERS; without it the container is a client. */
  readonly serverMode: boolean;
}

const DEFAULT_ALLOWED = "0.0.0.0/0, ::/0";

/** Which WireGuard image a container runs, from its `image:` reference. */
export function wgImageOf(image: string): WgImage | undefined {
  const ref = image.toLowerCase();
  if (/(^|\/)wg-easy(:|@|$)/.test(ref)) return "wg-easy";
  if (/(^|\/)linuxserver\/wireguard(:|@|$)/.test(ref)) return "linuxserver";
  if (/(^|\/)wg-access-server(:|@|$)/.test(ref)) return "wg-access-server";
  if (/(^|\/)(wireguard|wireguard-go|wireguard-tools)(:|@|$)/.test(ref)) return "wireguard";
  return undefined;
}

function cidrs(text: string, source: SourceRef): Located<Cidr>[] {
  const out: Located<Cidr>[] = [];
  for (const part of text.split(",")) {
    const r = tryParseCidr(part.trim());
    if ("cidr" in r) out.push({ value: r.cidr, source });
  }
  return out;
}

/** wg-easy's `10.8.0.x` and linuxserver's `10.13.13.0`: the first three octets make a /24. */
function slash24(text: string): Cidr | undefined {
  const m = /^(\d{1,3}\.\d{1,3}\.\d{1,3})\.(?:x|\d{1,3})$/.exec(text.trim());
  if (!m) return undefined;
  const r = tryParseCidr(`${m[1]}.0/24`);
  return "cidr" in r ? r.cidr : undefined;
}

/**
 * The WireGuard image settings of the container at `containerPath` of `obj`, or undefined when
 * it runs none of the known images.
 */
export function wgImageSettings(
  obj: KubeObject,
  containerPath: readonly (string | number)[],
): WgImageSettings | undefined {
  let c: unknown = obj.raw;
  for (const p of containerPath) {
    c =
      typeof c === "object" && c !== null ? (c as Record<string | number, unknown>)[p] : undefined;
  }
  const container = (typeof c === "object" && c !== null ? c : {}) as Record<string, unknown>;
  const imageRef = typeof container["image"] === "string" ? container["image"] : "";
  const image = wgImageOf(imageRef);
  if (!image) return undefined;
  const source = obj.locate([...containerPath, "image"]) ?? obj.source;
  const env = Array.isArray(container["env"]) ? (container["env"] as unknown[]) : [];
  const get = (name: string): Located<string> | undefined => {
    const i = env.findIndex((e) => (e as { name?: unknown })?.name === name);
    const value = i < 0 ? undefined : (env[i] as { value?: unknown }).value;
    return typeof value === "string"
      ? { value, source: obj.locate([...containerPath, "env", i, "value"]) ?? source }
      : undefined;
  };
  const poolEnv = { "wg-easy": "WG_DEFAULT_ADDRESS", linuxserver: "INTERNAL_SUBNET" } as const;
  const poolDefault = {
    "wg-easy": "10.8.0.x",
    linuxserver: "10.13.13.0",
    "wg-access-server": "10.44.0.0/24",
  } as const;
  const allowedEnv = {
    "wg-easy": "WG_ALLOWED_IPS",
    linuxserver: "ALLOWEDIPS",
    "wg-access-server": "WG_VPN_ALLOWED_IPS",
  } as const;
  let pool: Located<Cidr> | undefined;
  let poolIsDefault = false;
  if (image === "wg-easy" || image === "linuxserver") {
    const set = get(poolEnv[image]);
    const block = slash24(set?.value ?? poolDefault[image]);
    if (block) pool = { value: block, source: set?.source ?? source };
    poolIsDefault = set === undefined;
  } else if (image === "wg-access-server") {
    const set = get("WG_VPN_CIDR");
    const r = tryParseCidr(set?.value ?? poolDefault[image]);
    if ("cidr" in r) pool = { value: r.cidr, source: set?.source ?? source };
    poolIsDefault = set === undefined;
  }
  let allowedIps: Located<Cidr>[] = [];
  let allowedIpsIsDefault = false;
  if (image !== "wireguard") {
    const set = get(allowedEnv[image]);
    allowedIps = cidrs(set?.value ?? DEFAULT_ALLOWED, set?.source ?? source);
    allowedIpsIsDefault = set === undefined;
  }
  const nat = image === "wg-access-server" ? get("WG_IPV4_NAT_ENABLED") : undefined;
  return {
    image,
    source,
    ...(pool ? { pool } : {}),
    poolIsDefault,
    allowedIps,
    allowedIpsIsDefault,
    ...(image === "wg-access-server"
      ? { nat44: { value: nat ? nat.value !== "false" : true, source: nat?.source ?? source } }
      : {}),
    serverMode: image !== "linuxserver" || get("PEERS") !== undefined,
  };
}
