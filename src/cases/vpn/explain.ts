/**
 * @module cases/vpn/explain — case B, "only the VPN server's tunnel address answers": hands the
 * snapshot to the VPN checks (`cases/vpn/analyze.ts`) through the same input `plan vpn` builds, so diagnosis
 * and plan read the VPN pod, its chart values and its server config alike; draws the client's
 * paths through the tunnel and the VPN pod from the same walk (`cases/vpn/paths.ts`).
 */

import type { Snapshot } from "../../snapshot/load.ts";
import type { DiagnoseOptions, QuestionResult } from "../case.ts";
import { analyzeVpn } from "./analyze.ts";
import { vpnPaths } from "./paths.ts";
import { vpnInputFromSnapshot } from "./snapshot-input.ts";

/** Is there anything about a VPN pod in this snapshot? */
function isRelevant(snap: Snapshot): boolean {
  if (snap.probes.length > 0) return true;
  if ([...snap.pods.values()].some((p) => p.vpnConfigs.length > 0)) return true;
  if (
    [...snap.pods.values()].some((p) => p.interfaces?.some((i) => /^(tun|tap|wg)/.test(i.name)))
  ) {
    return true;
  }
  if (snap.chartValuesFiles.some((f) => f.startsWith("pods/"))) return true;
  return snap.objects.some(
    (o) =>
      /openvpn|wireguard|vpn/i.test(o.name) &&
      ["Deployment", "StatefulSet", "Pod", "DaemonSet"].includes(o.kind),
  );
}

export async function explainVpn(snap: Snapshot, _opts: DiagnoseOptions): Promise<QuestionResult> {
  const result: QuestionResult = { findings: [], paths: [], missing: [], diagnostics: [] };
  if (!isRelevant(snap)) return result;
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
