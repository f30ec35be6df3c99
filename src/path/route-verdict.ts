/**
 * @module path/route-verdict — the verdict a routing decision gives a packet it does not route:
 * refused (unroutable, citing the route or `ip rule` that refuses it), or undecided (an `ip rule`
 * tests a fact the evidence does not hold, with the command that decides it). The iptables and
 * nftables whole paths (path/evaluate-path, path/nft-path) both end a packet with it.
 */
import type { PathVerdict } from "./path-types.ts";
import type { RouteAnswer, RoutingEvidence } from "./route-decision.ts";

/** The verdict for a refused or undecided routing answer; undefined when the packet goes on. */
export function unroutedVerdict(r: RouteAnswer, routing: RoutingEvidence): PathVerdict | undefined {
  if (r.kind === "refused")
    return { kind: "unroutable", how: r.how, ...(r.by ? { by: r.by } : {}) };
  if (r.kind !== "undecided") return undefined;
  return {
    kind: "undecided",
    reason: `policy routing: rule ${r.rule.priority} tests ${r.fact}, which is not known`,
    at: r.rule.source,
    unknowns: [
      {
        fact: `the packet matches ip rule ${r.rule.priority}`,
        rule: r.rule.source,
        reason: `it tests ${r.fact}`,
        decide: {
          ...(routing.rulesFile ? { file: routing.rulesFile } : {}),
          command: "ip rule; ip route show table all   # on the node",
        },
      },
    ],
  };
}
