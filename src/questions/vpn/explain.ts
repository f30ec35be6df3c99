/**
 * @module questions/vpn/explain — case B, "only the VPN server's tunnel address answers": hands the
 * snapshot to the VPN checks (`checks/vpn.ts`) through the same loader `plan vpn` uses, so diagnosis
 * and plan read the VPN pod, its chart values and its server config alike.
 */
import { analyzeVpn } from "../../checks/vpn.ts";
import { vpnInputFromSnapshot } from "../../checks/vpn-snapshot.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { DiagnoseOptions, QuestionResult } from "../diagnose.ts";

/** Is there anything about a VPN pod in this snapshot? */
function isRelevant(snap: Snapshot): boolean {
  if (snap.probes.length > 0) return true;
  if ([...snap.pods.values()].some((p) => p.vpnConfigs.length > 0)) return true;
  if ([...snap.pods.values()].some((p) => p.interfaces?.some((i) => /^(tun|tap)/.test(i.name)))) {
    return true;
  }
  return snap.objects.some(
    (o) =>
      /openvpn|wireguard|vpn/i.test(o.name) &&
      ["Deployment", "StatefulSet", "Pod", "DaemonSet"].includes(o.kind),
  );
}

export async function explainVpn(snap: Snapshot, _opts: DiagnoseOptions): Promise<QuestionResult> {
  const result: QuestionResult = { findings: [], paths: [], missing: [], diagnostics: [] };
  if (!isRelevant(snap)) return result;
  // The loader re-reads the files it needs; its reading problems are already in the snapshot's
  // diagnostics, so only the VPN-specific ones are kept.
  const { input, diagnostics } = vpnInputFromSnapshot(snap.source);
  const known = new Set(
    snap.diagnostics.map((d) => `${d.code}|${d.source?.file}|${d.source?.line}`),
  );
  result.diagnostics.push(
    ...diagnostics.filter((d) => !known.has(`${d.code}|${d.source?.file}|${d.source?.line}`)),
  );
  const answer = analyzeVpn(input);
  result.findings.push(...answer.findings);
  result.missing.push(...answer.missing);
  return result;
}
