/**
 * @module agents/openvpn/server-config — an OpenVPN server config as OpenVPN 2.x reads it: the
 * client pool (`server`, `server-ipv6`, `ifconfig-pool`), `topology`, `dev`, pushed routes and DNS,
 * `client-to-client`, server-side `route`s and `redirect-gateway`, tap mode (`dev-type`,
 * `server-bridge`) and `client-config-dir`, each with the line it came from.
 */

import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, type Ip, rangeToCidrs, tryParseCidr, tryParseIp } from "../../net/cidr.ts";

export interface OpenvpnServerConfig {
  readonly file: string;
  /** `server NETWORK NETMASK`: the client pool; the server itself takes the first host address. */
  readonly server?: Located<Cidr>;
  readonly serverIpv6?: Located<Cidr>;
  /** `ifconfig-pool START END [NETMASK]` as CIDR blocks. */
  readonly ifconfigPool?: Located<readonly Cidr[]>;
  /** `topology net30|p2p|subnet`; OpenVPN 2.x defaults to net30 (2.7 changed it to subnet). */
  readonly topology?: Located<"net30" | "p2p" | "subnet">;
  readonly dev?: Located<string>;
  readonly clientToClient?: SourceRef;
  /** `push "route NETWORK NETMASK"` entries: what clients send through the tunnel. */
  readonly pushedRoutes: readonly Located<Cidr>[];
  readonly pushedDns: readonly Located<Ip>[];
  /** `push "redirect-gateway ..."`: clients send everything through the tunnel. */
  readonly redirectGateway?: SourceRef;
  /** Server-side `route NETWORK NETMASK` (kernel routes to client-side networks). */
  readonly routes: readonly Located<Cidr>[];
  readonly port?: Located<number>;
  readonly proto?: Located<string>;
  /** `dev-type tun|tap`, else what the `dev` name says (`tap0` is tap); tun when neither tells. */
  readonly devType?: Located<"tun" | "tap">;
  /** `server-bridge GATEWAY NETMASK POOL-START POOL-END` (tap mode): the pool as CIDR blocks. */
  readonly serverBridge?: Located<readonly Cidr[]>;
  /** `server-bridge`'s GATEWAY: the bridge's own address, which clients reach without routing. */
  readonly bridgeGateway?: Located<Ip>;
  /** `client-config-dir DIR`: per-client files (`iroute`, `ifconfig-push`), see client-config.ts. */
  readonly clientConfigDir?: Located<string>;
}

/** A CIDR or bare address as a block; undefined when it is neither. */
export function cidrOf(text: string): Cidr | undefined {
  const r = tryParseCidr(text);
  return "cidr" in r ? r.cidr : undefined;
}

/** `10.8.0.0 255.255.255.0` → 10.8.0.0/24; undefined for a non-contiguous mask. */
export function networkAndMask(network: string, mask: string | undefined): Cidr | undefined {
  if (mask === undefined) return cidrOf(network);
  if (/^\d+$/.test(mask)) return cidrOf(`${network}/${mask}`);
  const m = tryParseIp(mask);
  if (m === undefined || m.family !== 4) return undefined;
  const bits = m.value.toString(2).padStart(32, "0");
  if (!/^1*0*$/.test(bits)) return undefined;
  const prefix = bits.indexOf("0") === -1 ? 32 : bits.indexOf("0");
  return cidrOf(`${network}/${prefix}`);
}

/** The server's own tunnel address: the first host of the `server` network (10.8.0.1). */
export function serverTunnelAddress(pool: Cidr): Ip {
  return { family: pool.family, value: pool.start + 1n };
}

/** Splits a config line into words: OpenVPN accepts double and single quotes. */
function words(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  for (const m of line.matchAll(re)) out.push(m[1] ?? m[2] ?? m[3] ?? "");
  return out;
}

/**
 * Reads an OpenVPN server config (`openvpn.conf`, or the chart's ConfigMap key). Inline blocks
 * (`<ca>…</ca>`) are skipped; comments start with `#` or `;`. Unknown directives are ignored (OpenVPN
 * has hundreds); malformed values of the directives read here become diagnostics.
 *
 * @example parseOpenvpnConfig("server 10.8.0.0 255.255.255.0\n", "openvpn.conf").value.server
 */
export function parseOpenvpnConfig(
  text: string,
  file: string,
  lineOffset = 0,
): Parsed<OpenvpnServerConfig> {
  const diagnostics: Diagnostic[] = [];
  const pushedRoutes: Located<Cidr>[] = [];
  const pushedDns: Located<Ip>[] = [];
  const routes: Located<Cidr>[] = [];
  const cfg: {
    -readonly [K in keyof OpenvpnServerConfig]?: OpenvpnServerConfig[K];
  } = {};
  let inline: string | undefined;
  text.split(/\r?\n/).forEach((raw, idx) => {
    const line = idx + 1 + lineOffset;
    const t = raw.trim();
    const source: SourceRef = { file, line, text: t };
    if (inline !== undefined) {
      if (t === `</${inline}>`) inline = undefined;
      return;
    }
    const open = /^<([a-z-]+)>$/.exec(t);
    if (open) {
      inline = open[1];
      return;
    }
    if (t === "" || t.startsWith("#") || t.startsWith(";")) return;
    const w = words(t.replace(/^--/, ""));
    const bad = (expected: string) =>
      diagnostics.push({
        code: "OPENVPN_SYNTAX",
        severity: "warning",
        message: `"${t}": expected ${expected}`,
        source,
      });
    switch (w[0]) {
      case "server": {
        const c = networkAndMask(w[1] ?? "", w[2]);
        if (c && c.family === 4) cfg.server = { value: c, source };
        else bad("server NETWORK NETMASK, e.g. server 10.8.0.0 255.255.255.0");
        break;
      }
      case "server-ipv6": {
        const c = cidrOf(w[1] ?? "");
        if (c && c.family === 6) cfg.serverIpv6 = { value: c, source };
        else bad("server-ipv6 PREFIX/LEN, e.g. server-ipv6 fd00:8::/64");
        break;
      }
      case "ifconfig-pool": {
        const a = tryParseIp(w[1] ?? "");
        const b = tryParseIp(w[2] ?? "");
        if (a && b && a.family === b.family && a.value <= b.value) {
          cfg.ifconfigPool = { value: rangeToCidrs(a.family, a.value, b.value), source };
        } else bad("ifconfig-pool START END");
        break;
      }
      case "topology":
        if (w[1] === "net30" || w[1] === "p2p" || w[1] === "subnet") {
          cfg.topology = { value: w[1], source };
        } else bad("topology net30|p2p|subnet");
        break;
      case "dev":
        if (w[1]) cfg.dev = { value: w[1], source };
        // the name decides the type unless dev-type says otherwise (openvpn(8) --dev-type)
        if (/^tap/.test(w[1] ?? "") && cfg.devType === undefined)
          cfg.devType = { value: "tap", source };
        else if (/^tun/.test(w[1] ?? "") && cfg.devType === undefined)
          cfg.devType = { value: "tun", source };
        break;
      case "dev-type":
        if (w[1] === "tun" || w[1] === "tap") cfg.devType = { value: w[1], source };
        else bad("dev-type tun|tap");
        break;
      case "server-bridge": {
        // server-bridge GATEWAY NETMASK POOL-START POOL-END; bare `server-bridge` (DHCP) or
        // `server-bridge nogw` hand out no pool of OpenVPN's own
        if (w.length === 1 || w[1] === "nogw") break;
        const a = tryParseIp(w[3] ?? "");
        const b = tryParseIp(w[4] ?? "");
        if (a && b && a.family === b.family && a.value <= b.value) {
          cfg.serverBridge = { value: rangeToCidrs(a.family, a.value, b.value), source };
          const gw = tryParseIp(w[1] ?? "");
          if (gw) cfg.bridgeGateway = { value: gw, source };
        } else bad("server-bridge GATEWAY NETMASK POOL-START POOL-END");
        break;
      }
      case "client-config-dir":
        if (w[1]) cfg.clientConfigDir = { value: w[1], source };
        else bad("client-config-dir DIR");
        break;
      case "client-to-client":
        cfg.clientToClient = source;
        break;
      case "port":
        if (/^\d+$/.test(w[1] ?? "")) cfg.port = { value: Number(w[1]), source };
        break;
      case "proto":
        if (w[1]) cfg.proto = { value: w[1], source };
        break;
      case "route": {
        const c = networkAndMask(w[1] ?? "", w[2] === "default" ? undefined : w[2]);
        if (c) routes.push({ value: c, source });
        else bad("route NETWORK [NETMASK]");
        break;
      }
      case "push": {
        const inner = words(w[1] ?? "");
        // The chart's template keeps placeholders (NETWORK NETMASK, OVPN_K8S_DNS) that its
        // configure.sh replaces at start; they are not errors in the ConfigMap.
        if (inner.slice(1).some((x) => /^[A-Z][A-Z0-9_]+$/.test(x) && x !== "DNS" && x !== "DNS6"))
          break;
        if (inner[0] === "route") {
          const c = networkAndMask(inner[1] ?? "", inner[2]);
          if (c) pushedRoutes.push({ value: c, source });
          else bad('push "route NETWORK NETMASK"');
        } else if (inner[0] === "dhcp-option" && /^DNS6?$/.test(inner[1] ?? "")) {
          const ip = tryParseIp(inner[2] ?? "");
          if (ip) pushedDns.push({ value: ip, source });
          else bad('push "dhcp-option DNS ADDRESS"');
        } else if (inner[0] === "redirect-gateway") {
          cfg.redirectGateway = source;
        }
        break;
      }
    }
  });
  return { value: { file, ...cfg, pushedRoutes, pushedDns, routes }, diagnostics };
}

/** The client pool: `server` (or `ifconfig-pool`) network, with where it is written. */
export function clientPools(cfg: OpenvpnServerConfig): Located<Cidr>[] {
  const out: Located<Cidr>[] = [];
  if (cfg.server) out.push(cfg.server);
  else if (cfg.ifconfigPool) {
    for (const c of cfg.ifconfigPool.value) out.push({ value: c, source: cfg.ifconfigPool.source });
  } else if (cfg.serverBridge) {
    for (const c of cfg.serverBridge.value) out.push({ value: c, source: cfg.serverBridge.source });
  }
  if (cfg.serverIpv6) out.push(cfg.serverIpv6);
  return out;
}
