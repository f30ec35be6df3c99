/**
 * @module cases/vpn/tunnel-down — `vpn/tunnel-down`: the kind's own status output shows no tunnel
 * at all (no WireGuard handshake, no IPsec SA), so nothing past it can be judged. Kind-neutral:
 * the kind gives the words in `KindView.tunnelState` (`cases/vpn/kinds/kind.ts`).
 */

import { type Finding, refToEvidence } from "../../model/types.ts";
import type { KindView } from "./kinds/kind.ts";

export function tunnelDownFindings(view: KindView, subject: string): Finding[] {
  const s = view.tunnelState;
  if (s?.kind !== "down") return [];
  return [
    {
      id: "vpn/tunnel-down",
      severity: "error",
      title: s.title,
      subject,
      explanation: s.explanation,
      evidence: s.evidence.map(refToEvidence),
      next: [...s.next],
    },
  ];
}
