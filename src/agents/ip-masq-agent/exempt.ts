/**
 * @module agents/ip-masq-agent/exempt — which destinations the agent's chain exempts from
 * MASQUERADE (its RETURN rules, first match wins) and which it masquerades (the final rule).
 * This is the agent's own chain only: later POSTROUTING rules may still masquerade a RETURNed
 * packet, and earlier chains may masquerade it before the agent's chain is reached.
 */
import { type Cidr, contains, type Ip, parseCidr } from "../../net/cidr.ts";
import { LINK_LOCAL_V4, LINK_LOCAL_V6, type MasqConfig, type NonMasqEntry } from "./config.ts";
import { goParseCidr } from "./go-net.ts";
import { installedDestination } from "./rules.ts";

export type Exemption =
  | {
      readonly exempt: true;
      readonly reason: "non-masquerade-cidr";
      /** The first nonMasqueradeCIDRs entry (in list order) that covers the destination. */
      readonly entry: NonMasqEntry;
      readonly cidr: Cidr;
    }
  | { readonly exempt: true; readonly reason: "link-local"; readonly cidr: Cidr }
  | {
      /** IPv6 without `--enable-ipv6`: the agent writes no IPv6 rules at all. */
      readonly exempt: true;
      readonly reason: "ipv6-not-enabled";
    }
  | {
      readonly exempt: false;
      /** Reaches the chain's final MASQUERADE rule. */
      readonly reason: "masquerade";
    };

const LL4 = parseCidr(LINK_LOCAL_V4);
const LL6 = parseCidr(LINK_LOCAL_V6);

/**
 * Does the agent's chain exempt `dst` (RETURN) or masquerade it? Evaluates the rules in the
 * agent's order: link-local first (unless masqLinkLocal), then each entry of the family.
 */
export function isExempt(
  config: MasqConfig,
  dst: Ip,
  flags: { readonly enableIpv6: boolean } = { enableIpv6: false },
): Exemption {
  if (dst.family === 6 && !flags.enableIpv6) return { exempt: true, reason: "ipv6-not-enabled" };
  const linkLocal = dst.family === 4 ? !config.masqLinkLocal : !config.masqLinkLocalIPv6;
  const ll = dst.family === 4 ? LL4 : LL6;
  if (linkLocal && contains(ll, dst)) return { exempt: true, reason: "link-local", cidr: ll };
  for (const entry of config.nonMasqueradeCIDRs ?? []) {
    const r = goParseCidr(entry.text);
    if (!("ok" in r) || r.ok.agentFamily !== dst.family) continue;
    // the block as iptables installs it (`/010` is /8 there, though the agent validated /10)
    const installed = installedDestination(entry.text, dst.family);
    if (!("cidr" in installed)) continue;
    if (contains(installed.cidr, dst)) {
      return { exempt: true, reason: "non-masquerade-cidr", entry, cidr: installed.cidr };
    }
  }
  return { exempt: false, reason: "masquerade" };
}
