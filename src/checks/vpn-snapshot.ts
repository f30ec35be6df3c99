/**
 * @module checks/vpn-snapshot — builds the VPN checks' input from a snapshot's files with the
 * evidence readers (cluster objects, pod sysctl / iptables-save / ip-addr / ip-route / openvpn.conf,
 * node routes, probes, remote allowlists, kubelet configs, Helm values of the chart). Pure over a
 * {@link SnapshotSource} (which did the reading).
 */

import {
  looksLikeChartValues,
  type OpenvpnChartValues,
  readChartValues,
} from "../agents/openvpn/chart.ts";
import { cidrOf, parseOpenvpnConfig } from "../agents/openvpn/server-config.ts";
import {
  type KubeletSysctlConfig,
  readKubeletSysctlConfig,
} from "../agents/pod-security/kubelet-config.ts";
import { readIpAddr } from "../evidence/ip-addr.ts";
import { type Route, readIpRoute } from "../evidence/ip-route.ts";
import { type KubeObject, readKubeObjects } from "../evidence/kube-objects.ts";
import { type ProbeTranscript, parseProbeFile } from "../evidence/probes.ts";
import { readSysctl } from "../evidence/sysctl.ts";
import { readYamlSource } from "../evidence/yaml-source.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import type { Diagnostic } from "../model/types.ts";
import { classifyPath } from "../snapshot/layout.ts";
import type { SnapshotSource } from "../snapshot/source.ts";
import type { PodEvidence, RemoteSiteInput, VpnInput } from "./vpn-input.ts";

type MutablePod = { -readonly [K in keyof PodEvidence]: PodEvidence[K] };

/** Reads a `remote/*.yaml` RemoteSite's allowlists with the line of every source. */
export function readRemoteAllowlists(
  text: string,
  file: string,
): { site?: RemoteSiteInput; diagnostics: Diagnostic[] } {
  const { source, diagnostics } = readYamlSource(text, file);
  const doc = source.documents.find((d) => d.ok);
  const v = doc?.value as { name?: unknown; allowlists?: unknown } | undefined;
  if (!doc || typeof v !== "object" || v === null) return { diagnostics };
  const lists = Array.isArray(v.allowlists) ? v.allowlists : [];
  const allowlists = lists.map((al: { name?: unknown; sources?: unknown }, i: number) => ({
    name: typeof al?.name === "string" ? al.name : `#${i + 1}`,
    sources: (Array.isArray(al?.sources) ? al.sources : []).flatMap((s: unknown, j: number) => {
      const c = typeof s === "string" ? cidrOf(s) : undefined;
      const ref = source.locate(doc.doc.contents, ["allowlists", i, "sources", j]) ?? {
        file,
        line: doc.line,
      };
      return c ? [{ value: c, source: ref }] : [];
    }),
  }));
  return {
    site: { name: typeof v.name === "string" ? v.name : file, file, allowlists },
    diagnostics,
  };
}

export function vpnInputFromSnapshot(
  src: SnapshotSource,
  vpnPod?: string,
): { input: VpnInput; diagnostics: Diagnostic[] } {
  const diagnostics: Diagnostic[] = [...src.diagnostics];
  const objects: KubeObject[] = [];
  const pods = new Map<string, MutablePod>();
  const probes: ProbeTranscript[] = [];
  const remotes: RemoteSiteInput[] = [];
  const chartValues: OpenvpnChartValues[] = [];
  const nodeRoutes: { node: string; file: string; routes: Route[] }[] = [];
  const kubeletConfigs: KubeletSysctlConfig[] = [];
  const pod = (ns: string, name: string): MutablePod => {
    const key = `${ns}/${name}`;
    let p = pods.get(key);
    if (!p) {
      p = { namespace: ns, name };
      pods.set(key, p);
    }
    return p;
  };
  const take = <T>(r: { value: T; diagnostics: Diagnostic[] }): T => {
    diagnostics.push(...r.diagnostics);
    return r.value;
  };
  for (const rel of src.paths) {
    const role = classifyPath(rel);
    const base = rel.split("/").at(-1) ?? "";
    if (/values.*\.ya?ml$/.test(base) && role.kind !== "cluster") {
      const text = src.readText(rel);
      const { source } = readYamlSource(text, rel);
      if (source.documents.some((d) => d.ok && looksLikeChartValues(d.value))) {
        chartValues.push(take(readChartValues(text, rel)));
      }
      continue;
    }
    switch (role.kind) {
      case "cluster":
        objects.push(...take(readKubeObjects(src.readText(rel), rel)));
        break;
      case "pod": {
        const p = pod(role.namespace, role.pod);
        const text = src.readText(rel);
        if (role.artifact === "sysctl")
          p.sysctl = { file: rel, values: take(readSysctl(text, rel)) };
        else if (role.artifact === "iptables-save") p.iptables = take(parseIptablesSave(text, rel));
        else if (role.artifact === "ip-addr")
          p.ipAddr = { file: rel, interfaces: take(readIpAddr(text, rel)) };
        else if (role.artifact === "ip-route")
          p.ipRoute = { file: rel, routes: take(readIpRoute(text, rel)) };
        break;
      }
      case "vpn-config":
        if (role.namespace && role.pod) {
          pod(role.namespace, role.pod).openvpn = take(parseOpenvpnConfig(src.readText(rel), rel));
        }
        break;
      case "node":
        if (role.artifact === "ip-route") {
          nodeRoutes.push({
            node: role.node,
            file: rel,
            routes: take(readIpRoute(src.readText(rel), rel)),
          });
        }
        break;
      case "probe":
        probes.push(take(parseProbeFile(src.readText(rel), rel)));
        break;
      case "remote": {
        const r = readRemoteAllowlists(src.readText(rel), rel);
        diagnostics.push(...r.diagnostics);
        if (r.site) remotes.push(r.site);
        break;
      }
      case "kubelet-config": {
        const c = take(readKubeletSysctlConfig(src.readText(rel), rel, role.node));
        if (c) kubeletConfigs.push(c);
        break;
      }
      default:
        break;
    }
  }
  // The chart keeps the server config in a ConfigMap (`openvpn.conf` key): read it when no file does.
  for (const cm of objects.filter((o) => o.kind === "ConfigMap")) {
    const data = cm.raw["data"] as Record<string, unknown> | undefined;
    const conf = data?.["openvpn.conf"];
    if (typeof conf !== "string") continue;
    const start = cm.locateInString(["data", "openvpn.conf"], 1);
    const parsed = take(parseOpenvpnConfig(conf, cm.source.file, start ? start.line - 1 : 0));
    const owner = [...pods.values()].find(
      (p) => p.namespace === (cm.namespace ?? "default") && !p.openvpn,
    );
    if (owner) owner.openvpn = parsed;
  }
  return {
    input: {
      pods: [...pods.values()],
      objects,
      probes,
      remotes,
      chartValues,
      nodeRoutes,
      kubeletConfigs,
      ...(vpnPod ? { vpnPod } : {}),
    },
    diagnostics,
  };
}
