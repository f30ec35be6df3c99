/**
 * @module cases/vpn/claims — is there anything about a VPN pod in a snapshot? Read by the registry
 * before the case is loaded (a snapshot with no VPN pod never loads the VPN checks) and by the
 * case itself; it imports nothing but types.
 */
import type { Snapshot } from "../../snapshot/load.ts";

/** True when the snapshot holds a probe, a VPN pod's files or interfaces, or a VPN workload. */
export function vpnClaims(snap: Snapshot): boolean {
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
