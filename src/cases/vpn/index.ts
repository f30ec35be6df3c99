/**
 * @module cases/vpn — case B, "only the VPN server's tunnel address answers": forwarding in the VPN
 * pod's own network namespace, whether it survives a restart, the client pool's way back, and
 * policies on the translated source. Its plan is `plan.ts`, its proof for `verify` is `proof.ts`.
 */
import { type Case, idsOfArea } from "../case.ts";
import { explainVpn } from "./explain.ts";
import { verifyVpnChange } from "./proof.ts";
import {
  renderVpnChangeRecordMarkdown,
  renderVpnChangeRecordText,
  vpnChangeRecordDocument,
} from "./proof-render.ts";

export const vpnCase = {
  name: "vpn",
  summary:
    "VPN pods that forward nothing: ip_forward in the pod's namespace, durability, the client pool's return path, policies after NAT",
  findingIds: idsOfArea("vpn"),
  diagnose: (snap, opts) => explainVpn(snap, opts),
  proof: async (before, after) => {
    const record = verifyVpnChange(before, after);
    return record
      ? {
          case: "vpn",
          verdict: record.verdict,
          proofLine: record.proof,
          record,
          document: vpnChangeRecordDocument(record),
          text: renderVpnChangeRecordText(record),
          markdown: renderVpnChangeRecordMarkdown(record),
        }
      : undefined;
  },
} as const satisfies Case;
