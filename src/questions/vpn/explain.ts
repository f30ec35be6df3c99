/**
 * @module questions/vpn/explain — case B, "only the VPN server's tunnel address answers": hands the
 * snapshot's pod namespaces, probes, objects and far-side allowlists to the VPN checks
 * (`checks/vpn.ts`) and returns their findings with what is missing.
 */
import { parseOpenvpnConfig } from "../../agents/openvpn/server-config.ts";
import {
  type KubeletSysctlConfig,
  readKubeletSysctlConfig,
} from "../../agents/pod-security/kubelet-config.ts";
import { analyzeVpn } from "../../checks/vpn.ts";
import type { VpnInput, PodEvidence as VpnPodEvidence } from "../../checks/vpn-input.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { DiagnoseOptions, QuestionResult } from "../diagnose.ts";
import { readSites } from "../masquerade/sites.ts";

function podsOf(snap: Snapshot, result: QuestionResult): VpnPodEvidence[] {
  const out: VpnPodEvidence[] = [];
  for (const p of snap.pods.values()) {
    let openvpn: VpnPodEvidence["openvpn"];
    for (const c of p.vpnConfigs) {
      const r = parseOpenvpnConfig(c.text, c.file);
      result.diagnostics.push(...r.diagnostics);
      openvpn ??= r.value;
    }
    out.push({
      namespace: p.namespace,
      name: p.name,
      ...(p.sysctl && p.files.sysctl ? { sysctl: { file: p.files.sysctl, values: p.sysctl } } : {}),
      ...(p.iptables ? { iptables: p.iptables } : {}),
      ...(p.interfaces && p.files["ip-addr"]
        ? { ipAddr: { file: p.files["ip-addr"], interfaces: p.interfaces } }
        : {}),
      ...(p.routes && p.files["ip-route"]
        ? { ipRoute: { file: p.files["ip-route"], routes: p.routes } }
        : {}),
      ...(openvpn ? { openvpn } : {}),
    });
  }
  return out;
}

/** Is there anything about a VPN pod in this snapshot? */
function isRelevant(snap: Snapshot): boolean {
  if (snap.probes.length > 0) return true;
  if ([...snap.pods.values()].some((p) => p.vpnConfigs.length > 0)) return true;
  if ([...snap.pods.values()].some((p) => p.interfaces?.some((i) => /^(tun|tap)/.test(i.name))))
    return true;
  return snap.objects.some(
    (o) =>
      /openvpn|wireguard|vpn/i.test(o.name) &&
      ["Deployment", "StatefulSet", "Pod", "DaemonSet"].includes(o.kind),
  );
}

export async function explainVpn(snap: Snapshot, _opts: DiagnoseOptions): Promise<QuestionResult> {
  const result: QuestionResult = { findings: [], paths: [], missing: [], diagnostics: [] };
  if (!isRelevant(snap)) return result;
  const kubeletConfigs: KubeletSysctlConfig[] = [];
  for (const f of snap.kubeletConfigFiles) {
    const r = readKubeletSysctlConfig(snap.source.readText(f), f);
    result.diagnostics.push(...r.diagnostics);
    if (r.value) kubeletConfigs.push(r.value);
  }
  const sites = readSites(snap);
  const input: VpnInput = {
    pods: podsOf(snap, result),
    objects: snap.objects,
    probes: snap.probes,
    remotes: sites.sites.map((s) => ({
      name: s.name,
      file: s.source.file,
      allowlists: s.allowlists.map((a) => ({
        name: a.name,
        sources: a.sources.map((x) => ({ value: x.cidr, source: x.source })),
      })),
    })),
    nodeRoutes: [...snap.nodes.values()].flatMap((n) =>
      n.routes && n.files["ip-route"]
        ? [{ node: n.name, file: n.files["ip-route"], routes: n.routes }]
        : [],
    ),
    kubeletConfigs,
  };
  const answer = analyzeVpn(input);
  result.findings.push(...answer.findings);
  result.missing.push(...answer.missing);
  return result;
}
