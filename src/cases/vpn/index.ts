/**
 * @module cases/vpn — case B, "only the VPN server's tunnel address answers": forwarding in the VPN
 * pod's own network namespace, whether it survives a restart, the client pool's way back, and
 * policies on the translated source. Its plan is `plan.ts`.
 */
import type { Case } from "../case.ts";
import { explainVpn } from "./explain.ts";

export const vpnCase = {
  name: "vpn",
  summary:
    "VPN pods that forward nothing: ip_forward in the pod's namespace, durability, the client pool's return path, policies after NAT",
  findingIds: [
    "vpn/forwarding-disabled",
    "vpn/forwarding-not-durable",
    "vpn/client-pool-unroutable",
    "vpn/policy-source-mismatch",
    "vpn/admission-rejects",
    "vpn/dns-layer",
    "vpn/first-silent-hop",
    "vpn/service-vip-suffices",
  ],
  diagnose: (snap, opts) => explainVpn(snap, opts),
} as const satisfies Case;
