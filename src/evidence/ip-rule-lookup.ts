/**
 * @module evidence/ip-rule-lookup — the route the kernel chooses through the routing policy
 * database (`ip rule`) and the tables (`ip route show table all`), as `fib_rules_lookup` walks
 * them: rules in priority order; a rule whose selector matches (inverted by `not`) acts: `lookup`
 * a table (no route there, or a `throw` route, or a route `suppress_prefixlength` refuses, goes on
 * to the next rule), `goto` a priority, `nop`, or ends the lookup with `blackhole`, `unreachable`
 * or `prohibit`. A selector that tests something the packet does not say (its mark, its incoming
 * interface…) leaves the answer undecided at that rule, naming the fact. An `oif` selector never
 * matches a packet that came in (its lookup has no output interface).
 */
import { contains, type Ip } from "../net/cidr.ts";
import { lookupRoute, type Route, routeDestination } from "./ip-route.ts";
import type { IpRule, NumberRange } from "./ip-rule.ts";

/** What is known of the packet; an absent field is unknown, never "none". */
export interface PolicyPacket {
  readonly dst: Ip;
  readonly src?: Ip;
  /** The incoming interface; `lo` for a packet the host itself sends. */
  readonly iif?: string;
  /**
   * The output interface the lookup is asked for (a socket bound to a device); `""` for none.
   * Absent: none for a packet that came in (an `iif` other than `lo`), unknown for the host's own.
   * Only rules' `oif` selectors read it: the kernel's keeping of routes through that device in
   * each table is not modelled.
   */
  readonly oif?: string;
  readonly mark?: number;
  readonly tos?: number;
  readonly ipproto?: string;
  readonly sport?: number;
  readonly dport?: number;
  readonly uid?: number;
}

export type PolicyDecision =
  | {
      readonly kind: "route";
      readonly route: Route;
      readonly rule: IpRule;
      /** The rules that matched on the way, the deciding one last. */
      readonly steps: readonly IpRule[];
    }
  | {
      readonly kind: "refused";
      readonly action: "blackhole" | "unreachable" | "prohibit";
      readonly rule: IpRule;
      readonly steps: readonly IpRule[];
    }
  /** No rule found a route: the kernel answers "network is unreachable". */
  | { readonly kind: "no-route"; readonly steps: readonly IpRule[] }
  | {
      readonly kind: "undecided";
      readonly rule: IpRule;
      /** What the rule tests that the packet does not say: `the packet's mark`. */
      readonly fact: string;
      readonly steps: readonly IpRule[];
    };

const inRange = (r: NumberRange, n: number) => n >= r.from && n <= r.to;

/**
 * Whether a rule's `oif` matches: the kernel compares it with the lookup's output interface
 * (`fib_rule_match`: `rule->oifindex != fl->flowi_oif`). A packet that came in on an interface
 * (forwarded or delivered: `ip_route_input`) is routed with no output interface, so an `oif` rule
 * never matches it; the host's own packet has one only when its socket is bound to a device
 * (SO_BINDTODEVICE, `ip route get … oif DEV`), which the evidence does not say unless `oif` is given.
 */
function oifMatches(oif: string, p: PolicyPacket): boolean | undefined {
  if (p.oif !== undefined) return p.oif === oif;
  if (p.iif !== undefined && p.iif !== "lo") return false;
  return undefined;
}

/** true / false, or the unknown fact the answer needs. */
function selectorMatches(rule: IpRule, p: PolicyPacket): boolean | string {
  const tests: [boolean, () => boolean | undefined, string][] = [
    [
      rule.from !== undefined,
      () => (p.src ? contains(rule.from!, p.src) : undefined),
      "its source address",
    ],
    [rule.to !== undefined, () => contains(rule.to!, p.dst), "its destination"],
    [
      rule.iif !== undefined,
      () => (p.iif === undefined ? undefined : p.iif === rule.iif),
      "its incoming interface",
    ],
    [rule.oif !== undefined, () => oifMatches(rule.oif!, p), "its outgoing interface"],
    [
      rule.fwmark !== undefined,
      () =>
        p.mark === undefined
          ? undefined
          : ((rule.fwmark!.value ^ p.mark) & rule.fwmark!.mask) === 0,
      "the packet's mark",
    ],
    [
      rule.tos !== undefined,
      () => (p.tos === undefined ? undefined : p.tos === rule.tos),
      "its TOS",
    ],
    [
      rule.uidrange !== undefined,
      () => (p.uid === undefined ? undefined : inRange(rule.uidrange!, p.uid)),
      "the sending uid",
    ],
    [
      rule.ipproto !== undefined,
      () => (p.ipproto === undefined ? undefined : p.ipproto === rule.ipproto),
      "its protocol",
    ],
    [
      rule.sport !== undefined,
      () => (p.sport === undefined ? undefined : inRange(rule.sport!, p.sport)),
      "its source port",
    ],
    [
      rule.dport !== undefined,
      () => (p.dport === undefined ? undefined : inRange(rule.dport!, p.dport)),
      "its destination port",
    ],
  ];
  let unknown: string | undefined;
  for (const [applies, test, fact] of tests) {
    if (!applies) continue;
    const r = test();
    // one known mismatch decides the conjunction, whatever else is unknown
    if (r === false) return rule.not;
    if (r === undefined) unknown ??= fact;
  }
  if (unknown !== undefined) return `${unknown} (rule ${rule.priority})`;
  return !rule.not;
}

/**
 * The kernel's policy routing for `packet` over `rules` (as `ip rule` lists them, in priority
 * order) and `routes` (every table).
 *
 * @example
 *   routeByPolicy(readIpRule(text, "ip-rule.txt").value, routes, { dst, src, mark: 0x4000 })
 *   // { kind: "route", route: <default via 10.0.0.1 table 200>, rule: <200: fwmark … lookup 200> }
 */
export function routeByPolicy(
  rules: readonly IpRule[],
  routes: readonly Route[],
  packet: PolicyPacket,
): PolicyDecision {
  const steps: IpRule[] = [];
  const ordered = [...rules].sort((a, b) => a.priority - b.priority);
  for (let i = 0; i < ordered.length; i++) {
    const rule = ordered[i]!;
    const m = selectorMatches(rule, packet);
    if (typeof m === "string") return { kind: "undecided", rule, fact: m, steps };
    if (!m) continue;
    steps.push(rule);
    switch (rule.action) {
      case "nop":
        continue;
      case "goto": {
        const target = ordered.findIndex((r) => r.priority === rule.goto);
        // an unresolved goto is passed over, as the kernel does
        if (target > i) i = target - 1;
        continue;
      }
      case "blackhole":
      case "unreachable":
      case "prohibit":
        return { kind: "refused", action: rule.action, rule, steps };
      case "lookup": {
        const route = lookupRoute(routes, packet.dst, rule.table ?? "main");
        if (!route) continue;
        const limit = rule.suppressPrefixLength;
        if (limit !== undefined && routeDestination(route).prefix <= limit) continue;
        return { kind: "route", route, rule, steps };
      }
    }
  }
  return { kind: "no-route", steps };
}
