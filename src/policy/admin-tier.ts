/**
 * @module policy/admin-tier — the AdminNetworkPolicy and BaselineAdminNetworkPolicy tiers of a
 * direction's verdict: which rules of the tier match the peer and ports, and what they allow,
 * deny or pass on to NetworkPolicy (first matching rule wins, tiers by priority).
 */
import type { Ip } from "../net/cidr.ts";
import type { AdminNetworkPolicy, AdminPeer, AdminRule } from "./admin-network-policy.ts";
import {
  ALL_CONNECTIONS,
  type ConnectionSet,
  connectionSet,
  intersect,
  isEmpty,
  NO_CONNECTIONS,
  subtract,
  union,
} from "./connection-set.ts";
import type { EvaluateOptions, PolicyCitation } from "./evaluate.ts";
import { selectorMatches } from "./label-selector.ts";
import type { Protocol } from "./network-policy.ts";
import type { Endpoint, PodEndpoint, PolicyWorld } from "./policy-world.ts";

type Direction = "ingress" | "egress";
const Title: Record<Direction, string> = { ingress: "Ingress", egress: "Egress" };

function adminPeerMatches(
  world: PolicyWorld,
  peer: AdminPeer,
  ep: Endpoint,
  opts: EvaluateOptions,
): boolean {
  if (peer.kind === "networks") {
    const within = (lo: Ip, hi: bigint) =>
      peer.cidrs.some((c) => c.family === lo.family && c.start <= lo.value && hi <= c.end);
    if (ep.kind === "external") return within(ep.ip, ep.end ?? ep.ip.value);
    return opts.ipBlockMatchesPodIps === true && ep.ips.some((ip) => within(ip, ip.value));
  }
  if (ep.kind !== "pod") return false;
  if (!selectorMatches(peer.namespaceSelector, world.namespaces.get(ep.namespace) ?? {}))
    return false;
  return peer.kind === "namespaces" || selectorMatches(peer.podSelector, ep.labels);
}

function adminRulePorts(rule: AdminRule, dst: Endpoint): ConnectionSet {
  if (rule.ports === undefined) return ALL_CONNECTIONS;
  const parts: Record<Protocol, [number, number][]> = { TCP: [], UDP: [], SCTP: [] };
  for (const p of rule.ports) {
    if (p.kind === "number") parts[p.protocol].push([p.port, p.port]);
    else if (p.kind === "range") parts[p.protocol].push([p.start, p.end]);
    else if (dst.kind === "pod") {
      for (const cp of dst.ports)
        if (cp.name === p.name) parts[cp.protocol].push([cp.port, cp.port]);
    }
  }
  return connectionSet(parts);
}

const ACTION_WORD = { Allow: "allows", Deny: "denies", Pass: "passes" } as const;

/**
 * Applies the admin tier (AdminNetworkPolicies or the BaselineAdminNetworkPolicy) to `rest`:
 * returns what its rules allow, what they pass on, and what no rule decided.
 */
export function adminTier(
  world: PolicyWorld,
  tier: readonly AdminNetworkPolicy[],
  direction: Direction,
  subject: PodEndpoint,
  peer: Endpoint,
  dst: Endpoint,
  rest: ConnectionSet,
  citations: PolicyCitation[],
  opts: EvaluateOptions,
): { allowed: ConnectionSet; passed: ConnectionSet; undecided: ConnectionSet; matched: boolean } {
  let allowed = NO_CONNECTIONS;
  let passed = NO_CONNECTIONS;
  let undecided = rest;
  let matched = false;
  for (const anp of tier) {
    if (!adminPeerMatches(world, anp.subject, subject, opts)) continue;
    matched = true;
    for (const rule of direction === "ingress" ? anp.ingress : anp.egress) {
      if (!rule.peers.some((p) => adminPeerMatches(world, p, peer, opts))) continue;
      const m = intersect(adminRulePorts(rule, dst), undecided);
      if (isEmpty(m)) continue;
      if (rule.action === "Allow") allowed = union(allowed, m);
      if (rule.action === "Pass") passed = union(passed, m);
      undecided = subtract(undecided, m);
      citations.push({
        policy: anp.name,
        effect: rule.action === "Allow" ? "allows" : "denied-by-admin",
        connections: m,
        source: rule.source,
        text: `${anp.kind} '${anp.name}' ${ACTION_WORD[rule.action]} connections by ${Title[direction]} rule ${rule.name}`,
      });
    }
  }
  return { allowed, passed, undecided, matched };
}
