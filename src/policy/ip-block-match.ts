/**
 * @module policy/ip-block-match — which NetworkPolicy ipBlock peers admit a source address or
 * block, and how source translation (masquerade to the pod or node address) changes that: a rule
 * written for a VPN client pool stops matching once the pod rewrites the source, and a rule for
 * the node range may start admitting every client.
 */
import type { SourceRef } from "../model/types.ts";
import { type Cidr, contains, formatCidr, formatIp, type Ip, overlaps } from "../net/cidr.ts";
import type { NetworkPolicy } from "./network-policy.ts";

export interface IpBlockMatch {
  /** `namespace/name` of the policy. */
  readonly policy: string;
  readonly direction: "ingress" | "egress";
  /** 1-based rule number, as explanations print it. */
  readonly rule: number;
  readonly cidr: string;
  readonly except: readonly string[];
  /** "all": every address of the source is admitted; "part": only some are. */
  readonly coverage: "all" | "part";
  /** The file and line of the ipBlock peer. */
  readonly source: SourceRef;
}

const asBlock = (x: Ip | Cidr): Cidr =>
  "value" in x
    ? { family: x.family, start: x.value, end: x.value, prefix: x.family === 4 ? 32 : 128 }
    : x;

/**
 * Every ipBlock peer (in ingress `from` or egress `to`) that admits all or part of `source`.
 *
 * @example
 * ipBlockMatches(world.policies, parseCidr("10.8.0.0/24"), { direction: "ingress" })
 * // [{ policy: "db/allow-vpn-clients", rule: 1, cidr: "10.8.0.0/24", coverage: "all", source: {...} }]
 */
export function ipBlockMatches(
  policies: readonly NetworkPolicy[],
  source: Ip | Cidr,
  opts: { readonly direction?: "ingress" | "egress" } = {},
): IpBlockMatch[] {
  const block = asBlock(source);
  const out: IpBlockMatch[] = [];
  for (const p of policies) {
    for (const rule of [...p.ingress, ...p.egress]) {
      if (opts.direction !== undefined && rule.direction !== opts.direction) continue;
      for (const peer of rule.peers ?? []) {
        if (peer.kind !== "ipBlock" || peer.cidr.family !== block.family) continue;
        if (!overlaps(peer.cidr, block)) continue;
        if (peer.except.some((e) => contains(e, block))) continue;
        const all = contains(peer.cidr, block) && !peer.except.some((e) => overlaps(e, block));
        out.push({
          policy: `${p.namespace}/${p.name}`,
          direction: rule.direction,
          rule: rule.index + 1,
          cidr: formatCidr(peer.cidr),
          except: peer.except.map(formatCidr),
          coverage: all ? "all" : "part",
          source: peer.source,
        });
      }
    }
  }
  return out;
}

export interface TranslationEffect {
  readonly before: string;
  readonly after: string;
  /** Rules that admitted the original source and no longer admit the translated one. */
  readonly lost: readonly IpBlockMatch[];
  /** Rules that now admit the translated source but did not admit the original (scope grows). */
  readonly gained: readonly IpBlockMatch[];
  /** Rules that admit both. */
  readonly kept: readonly IpBlockMatch[];
}

const keyOf = (m: IpBlockMatch) =>
  `${m.policy}|${m.direction}|${m.rule}|${m.cidr}|${m.source.line}`;
const show = (x: Ip | Cidr) => ("value" in x ? formatIp(x) : formatCidr(x));

/**
 * Compares the ipBlock rules that see `before` (e.g. the VPN client pool 10.8.0.0/24) with those
 * that see `after` (the address the packets carry after masquerade: the pod IP or the node IP).
 */
export function translationEffect(
  policies: readonly NetworkPolicy[],
  before: Ip | Cidr,
  after: Ip | Cidr,
  opts: { readonly direction?: "ingress" | "egress" } = {},
): TranslationEffect {
  const b = ipBlockMatches(policies, before, opts);
  const a = ipBlockMatches(policies, after, opts);
  const bKeys = new Set(b.map(keyOf));
  const aKeys = new Set(a.map(keyOf));
  return {
    before: show(before),
    after: show(after),
    lost: b.filter((m) => !aKeys.has(keyOf(m))),
    gained: a.filter((m) => !bKeys.has(keyOf(m))),
    kept: a.filter((m) => bKeys.has(keyOf(m))),
  };
}
