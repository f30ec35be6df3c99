/**
 * @module cases/vpn/snapshot-input — the VPN checks' input from a loaded snapshot (snapshot/load): the
 * cluster objects, what each pod's network namespace showed, node routes and probes as the loader
 * read them; then what only these checks read: the pods' OpenVPN server configs (or the chart's
 * ConfigMap key), the far sides' allowlists, kubelet configs and Helm values of the chart.
 */

import {
  looksLikeChartValues,
  type OpenvpnChartValues,
  readChartValues,
} from "../../agents/openvpn/chart.ts";
import { parseOpenvpnClientConfig } from "../../agents/openvpn/client-config.ts";
import { parseOpenvpnConfig } from "../../agents/openvpn/server-config.ts";
import {
  type KubeletSysctlConfig,
  readKubeletSysctlConfig,
} from "../../agents/pod-security/kubelet-config.ts";
import type { Route } from "../../evidence/ip-route.ts";
import { readYamlSource } from "../../evidence/yaml-source.ts";
import type { Diagnostic } from "../../model/types.ts";
import { classifyPath } from "../../snapshot/layout.ts";
import { readSnapshotText, type Snapshot } from "../../snapshot/load.ts";
import { readSites } from "../../snapshot/sites.ts";
import type { RemoteSiteInput, VpnInput, VpnPodEvidence } from "./input.ts";
import { kindOfFile, TUNNEL_KINDS } from "./kinds/index.ts";
import type { KindFile, KindReading, TunnelKind } from "./kinds/kind.ts";

type MutablePod = { -readonly [K in keyof VpnPodEvidence]: VpnPodEvidence[K] };

type Take = <T>(r: { value: T; diagnostics: Diagnostic[] }) => T;

/** What was read inside each pod's namespace, and its server config (a file, else the chart's ConfigMap). */
function podEvidence(
  snap: Snapshot,
  take: Take,
  values: readonly KindFile[],
  diagnostics: Diagnostic[],
): MutablePod[] {
  const pods: MutablePod[] = [];
  for (const p of snap.pods.values()) {
    const e: MutablePod = { namespace: p.namespace, name: p.name };
    const f = p.files;
    if (p.sysctl && f.sysctl) e.sysctl = { file: f.sysctl, values: p.sysctl };
    if (p.iptables) e.iptables = p.iptables;
    if (p.interfaces && f["ip-addr"]) e.ipAddr = { file: f["ip-addr"], interfaces: p.interfaces };
    if (p.routes && f["ip-route"]) e.ipRoute = { file: f["ip-route"], routes: p.routes };
    // each VPN file beside the pod goes to the kind that claims it; OpenVPN's last config wins
    const byKind = new Map<TunnelKind, KindFile[]>();
    for (const c of p.vpnConfigs) {
      // pods/NS/POD/ccd/<cn>: OpenVPN's per-client files, whatever their name
      if (c.file.split("/").at(-2) === "ccd") {
        e.openvpnClients = [
          ...(e.openvpnClients ?? []),
          take(parseOpenvpnClientConfig(c.text, c.file)),
        ];
        continue;
      }
      const kind = kindOfFile(c.file.split("/").at(-1) ?? "", c.text);
      if (kind?.id === "openvpn") e.openvpn = take(parseOpenvpnConfig(c.text, c.file));
      else if (kind) byKind.set(kind, [...(byKind.get(kind) ?? []), c]);
    }
    const readings: KindReading[] = [];
    for (const kind of TUNNEL_KINDS) {
      if (kind.id === "openvpn") continue;
      const r = kind.readPod({
        namespace: p.namespace,
        name: p.name,
        files: byKind.get(kind) ?? [],
        objects: snap.objects,
        values,
        onlyPodOfNamespace: ![...snap.pods.values()].some(
          (o) => o.namespace === p.namespace && o.name !== p.name,
        ),
      });
      if (r) {
        diagnostics.push(...r.diagnostics);
        readings.push(r);
      }
    }
    if (readings.length > 0) e.readings = readings;
    pods.push(e);
  }
  // The chart keeps the server config in a ConfigMap (`openvpn.conf` key): read it when no file does.
  for (const cm of snap.objects.filter((o) => o.kind === "ConfigMap")) {
    const data = cm.raw["data"] as Record<string, unknown> | undefined;
    const conf = data?.["openvpn.conf"];
    if (typeof conf !== "string") continue;
    const start = cm.locateInString(["data", "openvpn.conf"], 1);
    const parsed = take(parseOpenvpnConfig(conf, cm.source.file, start ? start.line - 1 : 0));
    const owner = pods.find((p) => p.namespace === (cm.namespace ?? "default") && !p.openvpn);
    if (owner) owner.openvpn = parsed;
  }
  return pods;
}

/** The far sides as the masquerade question reads them (its reading problems are its own). */
function remotesOf(snap: Snapshot): RemoteSiteInput[] {
  return readSites(snap).sites.map((s) => ({
    name: s.name,
    file: s.source.file,
    allowlists: s.allowlists.map((a) => ({
      name: a.name,
      sources: a.sources.map((e) => ({ value: e.cidr, source: e.source })),
    })),
  }));
}

function kubeletConfigsOf(
  snap: Snapshot,
  take: Take,
  readText: (rel: string) => string | undefined,
): KubeletSysctlConfig[] {
  const out: KubeletSysctlConfig[] = [];
  for (const rel of snap.kubeletConfigFiles) {
    const text = readText(rel);
    if (text === undefined) continue;
    const role = classifyPath(rel);
    const node = role.kind === "kubelet-config" ? role.node : undefined;
    const c = take(readKubeletSysctlConfig(text, rel, node));
    if (c) out.push(c);
  }
  return out;
}

function chartValuesOf(values: readonly KindFile[], take: Take): OpenvpnChartValues[] {
  const out: OpenvpnChartValues[] = [];
  for (const { file: rel, text } of values) {
    const { source } = readYamlSource(text, rel);
    if (source.documents.some((d) => d.ok && looksLikeChartValues(d.value))) {
      out.push(take(readChartValues(text, rel)));
    }
  }
  return out;
}

/**
 * The VPN checks' input. `diagnostics` are the problems met reading what only these checks read
 * (the snapshot's own reading problems are in `snap.diagnostics`).
 */
export function vpnInputFromSnapshot(
  snap: Snapshot,
  vpnPod?: string,
): { input: VpnInput; diagnostics: Diagnostic[] } {
  const diagnostics: Diagnostic[] = [];
  const take: Take = (r) => {
    diagnostics.push(...r.diagnostics);
    return r.value;
  };
  const readText = (rel: string) => readSnapshotText(snap.source, rel, diagnostics);
  const values: KindFile[] = [];
  for (const rel of snap.chartValuesFiles) {
    const text = readText(rel);
    if (text !== undefined) values.push({ file: rel, text });
  }
  const pods = podEvidence(snap, take, values, diagnostics);
  const nodeRoutes: { node: string; file: string; routes: Route[] }[] = [];
  for (const n of snap.nodes.values()) {
    const file = n.files["ip-route"];
    if (n.routes && file) nodeRoutes.push({ node: n.name, file, routes: n.routes });
  }
  const remotes = remotesOf(snap);
  const kubeletConfigs = kubeletConfigsOf(snap, take, readText);
  const chartValues = chartValuesOf(values, take);
  return {
    input: {
      pods,
      objects: snap.objects,
      probes: snap.probes,
      remotes,
      chartValues,
      nodeRoutes,
      kubeletConfigs,
      ...(vpnPod ? { vpnPod } : {}),
    },
    diagnostics,
  };
}
