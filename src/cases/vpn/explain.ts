/**
 * @module cases/vpn/explain — case B, "only the VPN server's tunnel address answers": hands the
 * snapshot to the VPN checks (`cases/vpn/analyze.ts`) through the same input `plan vpn` builds, so diagnosis
 * and plan read the VPN pod, its chart values and its server config alike; draws the client's
 * paths through the tunnel and the VPN pod from the same walk (`cases/vpn/paths.ts`).
 */

import type { Snapshot } from "../../snapshot/load.ts";
import type { DiagnoseOptions, QuestionResult } from "../case.ts";
import { analyzeVpn } from "./analyze.ts";
import { vpnClaims } from "./claims.ts";
import { vpnPaths } from "./paths.ts";
import { vpnInputFromSnapshot } from "./snapshot-input.ts";

export async function explainVpn(snap: Snapshot, _opts: DiagnoseOptions): Promise<QuestionResult> {
  const result: QuestionResult = { findings: [], paths: [], missing: [], diagnostics: [] };
  if (!vpnClaims(snap)) return result;
  // what only the VPN checks read; the snapshot's and the far sides' reading problems are
  // reported with the snapshot and by the masquerade question
  const { input, diagnostics } = vpnInputFromSnapshot(snap);
  result.diagnostics.push(...diagnostics);
  const answer = analyzeVpn(input);
  result.findings.push(...answer.findings);
  result.missing.push(...answer.missing);
  result.paths.push(...vpnPaths(input, answer));
  return result;
}
