/**
 * @module path/route-decision — the routing decision of the path: `ip rule` (or, without it, the
 * kernel's three default rules) over every table `ip route show table all` printed, as
 * evidence/ip-rule-lookup walks them; what the main table alone would have said, to tell when
 * policy routing sends the packet elsewhere; and whether the destination is the node's own.
 */

import { type Route, routeDestination } from "../evidence/ip-route.ts";
import type { IpRule } from "../evidence/ip-rule.ts";
import { type PolicyDecision, routeByPolicy } from "../evidence/ip-rule-lookup.ts";
import type { SourceRef } from "../model/types.ts";
import type { Ip } from "../net/cidr.ts";

/** The node's routing evidence. */
export interface RoutingEvidence {
  /** Every table's routes (`ip route show table all`), or only the main table's. */
  readonly routes?: readonly Route[];
  /** `ip rule`; absent: the kernel's defaults (0 local, 32766 main, 32767 default). */
  readonly rules?: readonly IpRule[];
  /** Where the rules belong in the snapshot, named when they decide nothing yet. */
  readonly rulesFile?: string;
}

export type RouteAnswer =
  | {
      readonly kind: "route";
      readonly route: Route;
      /** The policy rule that chose the table (undefined: the kernel's default rules). */
      readonly rule?: IpRule;
      /** The main table's answer when it differs in device or gateway from the one chosen. */
      readonly mainDiffers?: { readonly route?: Route };
    }
  | {
      readonly kind: "refused";
      readonly how: "no-route" | "blackhole" | "unreachable" | "prohibit";
      readonly by?: SourceRef;
    }
  | { readonly kind: "undecided"; readonly fact: string; readonly rule: IpRule }
  /** No routes in the evidence at all. */
  | { readonly kind: "unknown" };

const DEFAULT_RULES: readonly IpRule[] = (
  [
    [0, "local"],
    [32766, "main"],
    [32767, "default"],
  ] as const
).map(([priority, table]) => ({
  priority,
  not: false,
  action: "lookup",
  table,
  attributes: {},
  source: {
    file: "(the kernel's default rules)",
    line: 0,
    text: `${priority}:\tfrom all lookup ${table}`,
  },
}));

/** What is known of the packet at the routing decision. */
export interface RoutedPacket {
  readonly dst: Ip;
  readonly src?: Ip;
  readonly iif?: string;
  readonly mark?: number;
  readonly proto?: string;
  readonly sport?: number;
  readonly dport?: number;
}

/** The route the kernel chooses for the packet. */
export function decideRoute(ev: RoutingEvidence, p: RoutedPacket): RouteAnswer {
  const routes = ev.routes;
  if (!routes || routes.length === 0) return { kind: "unknown" };
  const given = ev.rules !== undefined && ev.rules.length > 0;
  const d: PolicyDecision = given
    ? routeByPolicy(ev.rules!, routes, {
        dst: p.dst,
        ...(p.src ? { src: p.src } : {}),
        ...(p.iif ? { iif: p.iif } : {}),
        ...(p.mark !== undefined ? { mark: p.mark } : {}),
        ...(p.proto ? { ipproto: p.proto } : {}),
        ...(p.sport !== undefined ? { sport: p.sport } : {}),
        ...(p.dport !== undefined ? { dport: p.dport } : {}),
      })
    : byDefaultRules(routes, p.dst);
  switch (d.kind) {
    case "route": {
      const route = d.route;
      if (route.type === "blackhole" || route.type === "unreachable" || route.type === "prohibit")
        return { kind: "refused", how: route.type, by: route.source };
      const main =
        route.table !== "main" && route.type !== "local"
          ? routeIn(routes, p.dst, "main")
          : undefined;
      const differs =
        route.table !== "main" &&
        route.type !== "local" &&
        (main?.dev !== route.dev || main?.via?.value !== route.via?.value);
      return {
        kind: "route",
        route,
        ...(ev.rules && ev.rules.length > 0 ? { rule: d.rule } : {}),
        ...(differs ? { mainDiffers: main ? { route: main } : {} } : {}),
      };
    }
    case "refused":
      return { kind: "refused", how: d.action, by: d.rule.source };
    case "no-route":
      return { kind: "refused", how: "no-route" };
    case "undecided":
      return { kind: "undecided", fact: d.fact, rule: d.rule };
  }
}

/**
 * The kernel's three default rules (every packet matches each: lookup local, main, default) as
 * routeByPolicy walks them, without reading their selectors for every packet.
 */
function byDefaultRules(routes: readonly Route[], dst: Ip): PolicyDecision {
  const steps: IpRule[] = [];
  for (const rule of DEFAULT_RULES) {
    steps.push(rule);
    const route = routeIn(routes, dst, rule.table!);
    if (route) return { kind: "route", route, rule, steps };
  }
  return { kind: "no-route", steps };
}

/** A route with the block it covers read once. */
interface Entry {
  readonly route: Route;
  readonly family: number;
  readonly start: bigint;
  readonly end: bigint;
  readonly prefix: number;
  readonly metric: number;
}

const tablesOf = new WeakMap<readonly Route[], Map<string, Entry[]>>();

/**
 * The route `lookupRoute(routes, ip, table)` (evidence/ip-route) chooses, with each route's
 * block read once per route list instead of once per lookup: the longest prefix, then the lowest
 * metric, the first of equals; a `throw` route: none.
 */
function routeIn(routes: readonly Route[], ip: Ip, table: string): Route | undefined {
  let tables = tablesOf.get(routes);
  if (tables === undefined) {
    tables = new Map();
    for (const route of routes) {
      const d = routeDestination(route);
      let list = tables.get(route.table);
      if (list === undefined) {
        list = [];
        tables.set(route.table, list);
      }
      list.push({
        route,
        family: d.family,
        start: d.start,
        end: d.end,
        prefix: d.prefix,
        metric: route.metric ?? 0,
      });
    }
    tablesOf.set(routes, tables);
  }
  const list = tables.get(table);
  if (list === undefined) return undefined;
  let best: Entry | undefined;
  const v = ip.value;
  for (let i = 0; i < list.length; i++) {
    const e = list[i]!;
    if (e.route.family !== ip.family || e.family !== ip.family || v < e.start || v > e.end)
      continue;
    if (
      best === undefined ||
      e.prefix > best.prefix ||
      (e.prefix === best.prefix && e.metric < best.metric)
    )
      best = e;
  }
  return best && best.route.type !== "throw" ? best.route : undefined;
}

/** `lookupRoute(routes, ip)`: through the kernel's default rules (local, main, default). */
export function routeByDefaultRules(routes: readonly Route[], ip: Ip): Route | undefined {
  for (const t of ["local", "main", "default"]) {
    const r = routeIn(routes, ip, t);
    if (r) return r;
  }
  return undefined;
}

const localTables = new WeakMap<readonly Route[], boolean>();

/** Whether the evidence holds the local table (`ip route show table all`, or `table local`). */
export function hasLocalTable(routes: readonly Route[] | undefined): boolean {
  if (routes === undefined) return false;
  let has = localTables.get(routes);
  if (has === undefined) {
    has = routes.some((r) => r.table === "local");
    localTables.set(routes, has);
  }
  return has;
}
