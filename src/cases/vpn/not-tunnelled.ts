/**
 * @module cases/vpn/not-tunnelled — `vpn/destination-not-tunnelled`: a destination the client
 * probed that the kind's own evidence leaves outside the tunnel (WireGuard AllowedIPs, IPsec
 * traffic selectors, OpenVPN pushed routes without redirect-gateway when a kind says so). The
 * packet never enters the tunnel, so nothing in the VPN pod decides it. Kind-neutral: the kind
 * gives `tunnelled` and its words (`cases/vpn/kinds/kind.ts`).
 */

import { type Finding, refToEvidence } from "../../model/types.ts";
import { contains, formatCidr, formatIp } from "../../net/cidr.ts";
import type { Walk } from "./hops.ts";
import type { KindView } from "./kinds/kind.ts";

/** One finding per probed destination outside `view.tunnelled` (when it lists prefixes). */
export function notTunnelledFindings(view: KindView, walk: Walk, subject: string): Finding[] {
  const t = view.tunnelled;
  if (t.kind !== "prefixes" || view.tunnelledBy === undefined) return [];
  const out: Finding[] = [];
  const seen = new Set<string>();
  const list = t.prefixes.map((p) => formatCidr(p.value)).join(", ");
  for (const h of walk.hops) {
    if (h.hop === "peer") continue;
    for (const c of h.commands) {
      const ip = c.targetIp;
      if (!ip || seen.has(formatIp(ip))) continue;
      seen.add(formatIp(ip));
      if (t.prefixes.some((p) => p.value.family === ip.family && contains(p.value, ip))) continue;
      const words = view.notTunnelledWords?.(ip, list);
      out.push({
        id: "vpn/destination-not-tunnelled",
        severity: "error",
        title: `${formatIp(ip)} is outside ${view.tunnelledBy}: it never enters the tunnel`,
        subject,
        explanation:
          words?.explanation ??
          `${view.displayName} carries only what ${view.tunnelledBy} cover (${list}); ${formatIp(ip)} is not ` +
            "among them, so the client sends it out of its own network and the VPN pod never sees it. " +
            "Forwarding, masquerade and policies in the pod say nothing about this destination.",
        evidence: [
          ...t.prefixes.map((p) => refToEvidence(p.source)),
          refToEvidence(c.source),
          refToEvidence(c.resultSource),
        ],
        next: words
          ? [...words.next]
          : [view.tunnelledFix ?? `Add ${formatIp(ip)}'s range to ${view.tunnelledBy}`],
      });
    }
  }
  return out;
}
