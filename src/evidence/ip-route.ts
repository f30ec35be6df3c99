/**
 * @module evidence/ip-route — routes as iproute2 prints them (`ip route`, `ip -o route`,
 * `ip route show table all`, `ip -6 route`, `ip -d route`, multipath `nexthop` lines, and the
 * answer of `ip route get` with its `cache` line), and the kernel's lookup over them (longest
 * prefix, then metric; local, main, default tables in turn).
 */

import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import {
  type Cidr,
  contains,
  type Family,
  type Ip,
  parseCidr,
  tryParseCidr,
  tryParseIp,
} from "../net/cidr.ts";
import { type Line, lineRef, quote, splitLines, tokens } from "./text-lines.ts";

export const ROUTE_TYPES = [
  "unicast",
  "local",
  "broadcast",
  "multicast",
  "anycast",
  "blackhole",
  "unreachable",
  "prohibit",
  "throw",
  "nat",
] as const;
export type RouteType = (typeof ROUTE_TYPES)[number];

export interface NextHop {
  readonly via?: Ip;
  readonly dev?: string;
  readonly weight?: number;
  readonly flags: readonly string[];
}

export interface Route {
  readonly type: RouteType;
  readonly family: Family;
  readonly dst: Cidr | "default";
  readonly via?: Ip;
  readonly dev?: string;
  /** Preferred source address (`src`): what the kernel picks for locally sent packets. */
  readonly src?: Ip;
  readonly proto?: string;
  readonly scope?: string;
  readonly metric?: number;
  /** `main` unless the line names a table (or the reader was told which table it shows). */
  readonly table: string;
  /** Bare words: `onlink`, `linkdown`, `dead`, `offload`, `pervasive`... */
  readonly flags: readonly string[];
  /** Multipath routes: the `nexthop` entries, in order. */
  readonly nexthops?: readonly NextHop[];
  /** Other `keyword value` attributes (`pref`, `mtu`, `expires`, `uid`...), as printed. */
  readonly attributes: Readonly<Record<string, string>>;
  readonly source: SourceRef;
}

export interface ReadIpRouteOptions {
  /** The table the output shows when it does not print one (`ip route show table 100`). */
  readonly table?: string;
  /** Family of `default` routes that name no address (`ip -6 route` output). */
  readonly family?: Family;
}

const TYPES = new Set<string>(ROUTE_TYPES);
/** Attributes followed by one value. */
const VALUED = new Set([
  "dev",
  "src",
  "proto",
  "scope",
  "metric",
  "table",
  "pref",
  "expires",
  "weight",
  "realm",
  "realms",
  "tos",
  "dsfield",
  "nhid",
  "uid",
  "advmss",
  "hoplimit",
  "initcwnd",
  "initrwnd",
  "rtt",
  "rttvar",
  "rto_min",
  "reordering",
  "quickack",
  "congctl",
  "features",
  "ssthresh",
  "cwnd",
  "window",
  "fastopen_no_cookie",
  "ttl-propagate",
  "from",
  "error",
  "iif",
  "oif",
  "pmtu",
  "age",
  "users",
  "used",
]);
/** Attributes that may take a `lock` word before their value (`mtu lock 1400`). */
const LOCKABLE = new Set([
  "mtu",
  "advmss",
  "window",
  "rtt",
  "rttvar",
  "cwnd",
  "ssthresh",
  "initcwnd",
  "initrwnd",
  "hoplimit",
  "reordering",
  "rto_min",
]);
const FLAGS = new Set([
  "onlink",
  "linkdown",
  "dead",
  "pervasive",
  "offload",
  "trap",
  "rt_offload",
  "rt_trap",
  "rt_offload_failed",
  "notify",
  "cache",
  "cloned",
  "unresolved",
]);

/**
 * Reads `ip route` output in any of its usual forms. A line that cannot be read becomes a
 * diagnostic naming what was expected, and reading goes on.
 */
export function readIpRoute(
  text: string,
  file: string,
  options: ReadIpRouteOptions = {},
): Parsed<Route[]> {
  const routes: Route[] = [];
  const diagnostics: Diagnostic[] = [];
  // Join `ip -o` continuations (`\` + tab) and indented `nexthop` lines to their route.
  const logical: { first: Line; parts: string[] }[] = [];
  for (const l of splitLines(text)) {
    if (l.text.trim() === "") continue;
    const pieces = l.text.split(/\\(?=\s)/);
    const continues = /^\s/.test(l.text) && logical.length > 0;
    if (continues) logical[logical.length - 1]!.parts.push(...pieces);
    else logical.push({ first: l, parts: pieces });
  }
  for (const { first, parts } of logical) {
    const source = lineRef(file, first);
    const r = readRoute(parts, options, source);
    if ("error" in r) {
      diagnostics.push({ code: "ROUTE_SYNTAX", severity: "warning", message: r.error, source });
      continue;
    }
    routes.push(r.route);
    for (const w of r.warnings) {
      diagnostics.push({ code: "ROUTE_UNKNOWN_ATTRIBUTE", severity: "info", message: w, source });
    }
  }
  return { value: routes, diagnostics };
}

/** What the attribute words of a route line or a `nexthop` line give. */
interface RouteAttrs {
  attrs: Record<string, string>;
  flags: string[];
  via?: Ip;
}

/** The address after `what` at `list[at]` (`via inet6 fe80::1` too), and where reading goes on. */
function readAddr(
  what: string,
  list: string[],
  at: number,
): { ip: Ip; next: number } | { error: string } {
  let j = at;
  // `via inet6 fe80::1` (RFC 5549: an IPv4 route through an IPv6 gateway)
  if (list[j] === "inet" || list[j] === "inet6") j++;
  const t = list[j];
  const ip = t === undefined ? undefined : tryParseIp(t);
  if (!ip)
    return {
      error: `expected an address after ${quote(what)}, found ${quote(t ?? "end of line")}`,
    };
  return { ip, next: j + 1 };
}

/**
 * Reads the attribute words `list[start..]` into `into`: the error, or undefined. Unknown words
 * are skipped with a warning.
 */
function readAttributes(
  list: string[],
  start: number,
  into: RouteAttrs,
  warnings: string[],
): string | undefined {
  for (let j = start; j < list.length; ) {
    const k = list[j]!;
    if (k === "via") {
      const a = readAddr(k, list, j + 1);
      if ("error" in a) return a.error;
      into.via = a.ip;
      j = a.next;
    } else if (LOCKABLE.has(k)) {
      const lock = list[j + 1] === "lock";
      const v = list[j + (lock ? 2 : 1)];
      if (v === undefined) return `expected a value after ${quote(k)}`;
      into.attrs[k] = lock ? `lock ${v}` : v;
      j += lock ? 3 : 2;
    } else if (VALUED.has(k)) {
      const v = list[j + 1];
      if (v === undefined) return `expected a value after ${quote(k)}`;
      into.attrs[k] = v;
      j += 2;
    } else if (FLAGS.has(k)) {
      into.flags.push(k);
      j++;
      // `ip route get`: `cache <local,brd>`, the cached route's flags
      const next = list[j];
      if (k === "cache" && next !== undefined && /^<[a-z_,]*>$/.test(next)) {
        into.attrs["cache-flags"] = next.slice(1, -1);
        j++;
      }
    } else if (k === "encap") {
      // lwtunnel encapsulation (`encap mpls 100`, `encap seg6 ...`): kept as text, not modelled.
      into.attrs.encap = list.slice(j + 1).join(" ");
      return undefined;
    } else {
      warnings.push(
        `unknown route attribute ${quote(k)} ignored; expected one of iproute2's route keywords`,
      );
      j++;
    }
  }
  return undefined;
}

/** The route's type and destination at the head of its line, and where its attributes start. */
function readRouteHead(
  head: string[],
):
  | { type: RouteType; dstText: string; dst: Cidr | "default"; family?: Family; next: number }
  | { error: string } {
  let i = 0;
  let type: RouteType = "unicast";
  if (TYPES.has(head[0] ?? "")) type = head[i++] as RouteType;
  const dstText = head[i++];
  if (dstText === undefined)
    return { error: `expected a destination (CIDR or "default") after ${quote(type)}` };
  if (dstText === "default") return { type, dstText, dst: "default", next: i };
  const c = tryParseCidr(dstText);
  if ("error" in c)
    return {
      error: `expected a destination CIDR or "default", found ${quote(dstText)} (${c.error})`,
    };
  return { type, dstText, dst: c.cidr, family: c.cidr.family, next: i };
}

/**
 * The lines joined below a route: `nexthop` lines (multipath), or the `cache` line `ip route get`
 * prints, whose attributes join the route's (`main`).
 */
function readNexthops(
  parts: readonly string[],
  main: RouteAttrs,
  warnings: string[],
): { nexthops: NextHop[] } | { error: string } {
  const nexthops: NextHop[] = [];
  for (const part of parts.slice(1)) {
    const t = tokens(part);
    if (t.length === 0) continue;
    if (t[0] !== "nexthop") {
      // `ip route get` prints a `cache` line below the route
      const extra: RouteAttrs = { attrs: main.attrs, flags: main.flags };
      const e = readAttributes(t, 0, extra, warnings);
      if (e) return { error: e };
      continue;
    }
    const nh: RouteAttrs = { attrs: {}, flags: [] };
    const e = readAttributes(t, 1, nh, warnings);
    if (e) return { error: `nexthop: ${e}` };
    const weight = nh.attrs.weight === undefined ? undefined : Number(nh.attrs.weight);
    nexthops.push({
      ...(nh.via ? { via: nh.via } : {}),
      ...(nh.attrs.dev !== undefined ? { dev: nh.attrs.dev } : {}),
      ...(weight !== undefined && Number.isFinite(weight) ? { weight } : {}),
      flags: nh.flags,
    });
  }
  return { nexthops };
}

function readRoute(
  parts: readonly string[],
  options: ReadIpRouteOptions,
  source: SourceRef,
): { route: Route; warnings: string[] } | { error: string } {
  const head = tokens(parts[0] ?? "");
  const warnings: string[] = [];
  const h = readRouteHead(head);
  if ("error" in h) return h;
  const { type, dstText, dst } = h;
  let family = h.family;
  const attrs: Record<string, string> = {};
  const flags: string[] = [];
  let src: Ip | undefined;
  const main: RouteAttrs = { attrs, flags };
  const err = readAttributes(head, h.next, main, warnings);
  if (err) return { error: err };
  const via = main.via;
  if (attrs.src !== undefined) {
    src = tryParseIp(attrs.src);
    if (!src) return { error: `expected an address after "src", found ${quote(attrs.src)}` };
    delete attrs.src;
  }
  const nh = readNexthops(parts, main, warnings);
  if ("error" in nh) return nh;
  const nexthops = nh.nexthops;
  family ??= via?.family ?? src?.family ?? nexthops.find((n) => n.via)?.via?.family;
  // `pref` is printed for IPv6 routes only.
  family ??= attrs.pref !== undefined ? 6 : (options.family ?? 4);
  if (dst !== "default" && dst.family !== family) {
    return { error: `destination ${quote(dstText)} and gateway/source are of different families` };
  }
  let metric: number | undefined;
  if (attrs.metric !== undefined) {
    metric = Number(attrs.metric);
    if (!/^\d+$/.test(attrs.metric) || !Number.isSafeInteger(metric)) {
      return { error: `expected a number after "metric", found ${quote(attrs.metric)}` };
    }
    delete attrs.metric;
  }
  const table = attrs.table ?? options.table ?? "main";
  delete attrs.table;
  const dev = attrs.dev;
  delete attrs.dev;
  const proto = attrs.proto;
  delete attrs.proto;
  const scope = attrs.scope;
  delete attrs.scope;
  const route: Route = {
    type,
    family,
    dst,
    ...(via ? { via } : {}),
    ...(dev !== undefined ? { dev } : {}),
    ...(src ? { src } : {}),
    ...(proto !== undefined ? { proto } : {}),
    ...(scope !== undefined ? { scope } : {}),
    ...(metric !== undefined ? { metric } : {}),
    table,
    flags,
    ...(nexthops.length ? { nexthops } : {}),
    attributes: attrs,
    source,
  };
  return { route, warnings };
}

/** The block a route covers: `default` is 0.0.0.0/0 or ::/0. */
export function routeDestination(route: Route): Cidr {
  return route.dst === "default" ? parseCidr(route.family === 4 ? "0.0.0.0/0" : "::/0") : route.dst;
}

/**
 * The route the kernel would choose for `ip`: in `table` only when given, otherwise through the
 * default rules (tables local, main, default in turn). Within a table the longest prefix wins,
 * then the lowest metric. A matching `throw` route passes the lookup on to the next table.
 * Policy rules beyond the defaults, TOS and marks are not modelled.
 */
export function lookupRoute(routes: readonly Route[], ip: Ip, table?: string): Route | undefined {
  const tables = table === undefined ? ["local", "main", "default"] : [table];
  for (const t of tables) {
    let best: Route | undefined;
    let bestPrefix = -1;
    for (const r of routes) {
      if (r.table !== t || r.family !== ip.family) continue;
      const d = routeDestination(r);
      if (!contains(d, ip)) continue;
      if (
        d.prefix > bestPrefix ||
        (d.prefix === bestPrefix && (r.metric ?? 0) < (best?.metric ?? 0))
      ) {
        best = r;
        bestPrefix = d.prefix;
      }
    }
    if (best && best.type !== "throw") return best;
  }
  return undefined;
}
