/**
 * @module cases/vpn/plan-pod — which pods of a snapshot are VPN servers, so `plan vpn` needs no
 * `--pod` when there is exactly one: pods whose evidence holds an OpenVPN config or a tunnel
 * device, else Pods and controllers the OpenVPN chart rendered. Pure.
 */
import { recognizeChart } from "../../agents/openvpn/chart.ts";
import { WORKLOAD_KINDS } from "../../k8s/workloads.ts";
import type { VpnInput } from "./input.ts";

const isTun = (name: string) => /^(tun|tap|wg)/.test(name);

/** `NS/NAME` of every VPN server pod the snapshot shows, in a stable order. */
export function vpnPodCandidates(input: VpnInput): string[] {
  const fromEvidence = input.pods
    .filter((p) => p.openvpn || p.ipAddr?.interfaces.some((i) => isTun(i.name)))
    .map((p) => `${p.namespace}/${p.name}`);
  if (fromEvidence.length > 0) return [...new Set(fromEvidence)].sort();
  const pods = input.objects.filter((o) => o.kind === "Pod" && recognizeChart(o));
  const chosen =
    pods.length > 0
      ? pods
      : input.objects.filter((o) => WORKLOAD_KINDS.includes(o.kind) && recognizeChart(o));
  return [...new Set(chosen.map((o) => `${o.namespace ?? "default"}/${o.name}`))].sort();
}
