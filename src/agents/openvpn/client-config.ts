/**
 * @module agents/openvpn/client-config — one file of an OpenVPN server's `client-config-dir`
 * (named after the client's certificate CN): `iroute` (a network behind that client), the address
 * it is given (`ifconfig-push`), routes pushed to it alone (`push "route …"`, `push-reset`); and
 * the check openvpn(8) states for `--iroute`: it only tells OpenVPN which client owns a network,
 * the server's `route` must still send that network into the tun device.
 */

import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, contains, formatCidr, type Ip, tryParseIp } from "../../net/cidr.ts";
import { networkAndMask, type OpenvpnServerConfig } from "./server-config.ts";

export interface OpenvpnClientConfig {
  readonly file: string;
  /** The client's common name: the file's base name. */
  readonly commonName: string;
  /** `iroute NETWORK [NETMASK]`: networks behind this client (site-to-site through OpenVPN). */
  readonly iroutes: readonly Located<Cidr>[];
  /** `ifconfig-push LOCAL REMOTE-NETMASK`: the client's fixed tunnel address. */
  readonly ifconfigPush?: Located<Ip>;
  readonly pushedRoutes: readonly Located<Cidr>[];
  /** `push "redirect-gateway …"` for this client alone: it sends everything into the tunnel. */
  readonly redirectGateway?: SourceRef;
  /** `push-reset`: the server's global pushes do not reach this client. */
  readonly pushReset?: SourceRef;
  /** `disable`: the client is refused. */
  readonly disabled?: SourceRef;
}

const cite = (file: string, line: number, t: string): SourceRef =>
  t.length > 500 ? { file, line } : { file, line, text: t };

function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g))
    out.push(m[1] ?? m[2] ?? m[3] ?? "");
  return out;
}

/**
 * Reads one client-config-dir file. Directives not read here are ignored; malformed values of
 * those read become diagnostics with their line.
 *
 * @example parseOpenvpnClientConfig("iroute 192.168.10.0 255.255.255.0\n", "ccd/client1").value.iroutes
 */
export function parseOpenvpnClientConfig(text: string, file: string): Parsed<OpenvpnClientConfig> {
  const diagnostics: Diagnostic[] = [];
  const iroutes: Located<Cidr>[] = [];
  const pushedRoutes: Located<Cidr>[] = [];
  const cfg: { -readonly [K in keyof OpenvpnClientConfig]?: OpenvpnClientConfig[K] } = {};
  text.split(/\r?\n/).forEach((raw, idx) => {
    const t = raw.trim();
    if (t === "" || t.startsWith("#") || t.startsWith(";")) return;
    const source = cite(file, idx + 1, t);
    const w = words(t);
    const bad = (expected: string) =>
      diagnostics.push({
        code: "OPENVPN_SYNTAX",
        severity: "warning",
        message: `"${t.slice(0, 200)}": expected ${expected}`,
        source,
      });
    switch (w[0]) {
      case "iroute": {
        const c = networkAndMask(w[1] ?? "", w[2]);
        if (c) iroutes.push({ value: c, source });
        else bad("iroute NETWORK [NETMASK], e.g. iroute 192.168.10.0 255.255.255.0");
        break;
      }
      case "iroute-ipv6": {
        const c = networkAndMask(w[1] ?? "", undefined);
        if (c && c.family === 6) iroutes.push({ value: c, source });
        else bad("iroute-ipv6 PREFIX/LEN");
        break;
      }
      case "ifconfig-push": {
        const ip = tryParseIp(w[1] ?? "");
        if (ip) cfg.ifconfigPush = { value: ip, source };
        else bad("ifconfig-push LOCAL REMOTE-NETMASK");
        break;
      }
      case "push": {
        const inner = words(w[1] ?? "");
        if (inner[0] === "route") {
          const c = networkAndMask(inner[1] ?? "", inner[2]);
          if (c) pushedRoutes.push({ value: c, source });
          else bad('push "route NETWORK NETMASK"');
        } else if (inner[0] === "redirect-gateway") {
          cfg.redirectGateway = source;
        }
        break;
      }
      case "push-reset":
        cfg.pushReset = source;
        break;
      case "disable":
        cfg.disabled = source;
        break;
    }
  });
  const commonName = file.split("/").at(-1) ?? file;
  return { value: { file, commonName, ...cfg, iroutes, pushedRoutes }, diagnostics };
}

/**
 * `iroute`s the server's kernel never sends into the tunnel: no server `route` (nor the
 * `server` pool) covers them, so packets for that network never reach OpenVPN (openvpn(8):
 * --iroute "must be used in conjunction with --route").
 */
export function unroutedIroutes(
  server: OpenvpnServerConfig,
  clients: readonly OpenvpnClientConfig[],
): Diagnostic[] {
  const out: Diagnostic[] = [];
  const covering = [...server.routes, ...(server.server ? [server.server] : [])];
  for (const c of clients) {
    for (const r of c.iroutes) {
      if (covering.some((x) => contains(x.value, r.value))) continue;
      out.push({
        code: "OPENVPN_IROUTE_UNROUTED",
        severity: "warning",
        message: `iroute ${formatCidr(r.value)} of client ${c.commonName}: expected a server "route" covering it in ${server.file}; without one the kernel never sends ${formatCidr(r.value)} into the tunnel`,
        source: r.source,
      });
    }
  }
  return out;
}
