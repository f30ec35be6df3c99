/**
 * @module cases/vpn/kinds — the registry of tunnel kinds the VPN case asks (see `kind.ts` for the
 * contract and how to add one), and the choice of a pod's kind from its evidence.
 */

import type { KubeObject } from "../../../evidence/kube-objects.ts";
import type { VpnInput, VpnPodEvidence } from "../input.ts";
import { ipsecKind } from "./ipsec.ts";
import type {
  Detection,
  DetectionStrength,
  KindContext,
  KindView,
  TunnelKind,
  TunnelKindId,
} from "./kind.ts";
import { openvpnKind } from "./openvpn.ts";
import { wireguardKind } from "./wireguard.ts";

/**
 * Every kind, in the order files are claimed and equally strong detections are preferred.
 * OpenVPN is last: it claims every `.conf`/`.ovpn` beside a pod that no other kind claims.
 */
export const TUNNEL_KINDS: readonly TunnelKind[] = [wireguardKind, ipsecKind, openvpnKind];

const STRENGTH: Readonly<Record<DetectionStrength, number>> = { config: 3, device: 2, manifest: 1 };

/** The kind that owns a file beside a pod (`wg0.conf`, `openvpn.conf`), if any. */
export function kindOfFile(base: string, text: string): TunnelKind | undefined {
  return TUNNEL_KINDS.find((k) => k.ownsFile(base, text));
}

export function kindById(id: TunnelKindId): TunnelKind | undefined {
  return TUNNEL_KINDS.find((k) => k.id === id);
}

/** The strongest detection of any kind for this pod's evidence and manifests. */
export function detectKind(
  evidence: VpnPodEvidence | undefined,
  manifests: readonly KubeObject[],
  input: VpnInput,
): Detection | undefined {
  let best: Detection | undefined;
  for (const k of TUNNEL_KINDS) {
    const d = k.detect({ ...(evidence ? { evidence } : {}), manifests, input });
    if (d && (!best || STRENGTH[d.strength] > STRENGTH[best.strength])) best = d;
  }
  return best;
}

/**
 * The view of the pod by its kind: the kind's own reading when the pod has one, else the kind's
 * view from manifests and values. Without any sign of a kind, OpenVPN's (the case's first kind).
 */
export function viewOf(ctx: KindContext, detected: Detection | undefined): KindView {
  const id = detected?.kind ?? "openvpn";
  const reading = ctx.evidence?.readings?.find((r) => r.kind === id);
  if (reading) return reading.view(ctx);
  return (kindById(id) ?? openvpnKind).view(ctx);
}
