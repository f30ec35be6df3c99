/**
 * @module cases/masquerade/sources — which senders to trace: `--from` when given; otherwise,
 * on every node with evidence, one pod that runs there (the pod with its own evidence folder
 * first) next to the node itself, so the report shows why the node's traffic works and the pod's
 * does not.
 */
import { primaryAddress } from "../../evidence/ip-addr.ts";
import { lookupRoute } from "../../evidence/ip-route.ts";
import type { Diagnostic, SourceRef } from "../../model/types.ts";
import { formatIp, type Ip } from "../../net/cidr.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { DiagnoseOptions } from "../case.ts";
import type { ClusterFacts } from "./facts.ts";

export type Source =
  | {
      readonly kind: "pod";
      readonly namespace: string;
      readonly name: string;
      readonly node: string;
      readonly ip: Ip;
      readonly evidence?: SourceRef;
    }
  | {
      readonly kind: "host";
      readonly node: string;
      readonly ip: Ip;
      readonly evidence?: SourceRef;
    };

/** The node's own address for traffic it sends: the route's `src`, else the out interface's primary, else InternalIP. */
export function hostAddress(
  snap: Snapshot,
  facts: ClusterFacts,
  node: string,
  toward?: Ip,
): { ip: Ip; evidence?: SourceRef } | undefined {
  const ev = snap.nodes.get(node);
  if (ev?.routes && toward) {
    const r = lookupRoute(ev.routes, toward);
    if (r?.src) return { ip: r.src, evidence: r.source };
    if (r?.dev && ev.interfaces) {
      const iface = ev.interfaces.find((i) => i.name === r.dev);
      const a = iface && primaryAddress(iface, toward.family);
      if (a) return { ip: a.local, evidence: a.source };
    }
  }
  const view = facts.nodes.find((n) => n.name === node);
  const ip = view?.internalIPs[0];
  return ip ? { ip: ip.ip, evidence: ip.source } : undefined;
}

export function chooseSources(
  opts: DiagnoseOptions,
  facts: ClusterFacts,
  snap: Snapshot,
  toward?: Ip,
): { list: Source[]; diagnostics: Diagnostic[] } {
  const diagnostics: Diagnostic[] = [];
  const list: Source[] = [];
  const podSource = (p: ClusterFacts["pods"][number]): Source | undefined => {
    // a dual-stack pod sends from its address of the destination's family
    const ip = (toward && p.podIPs.find((a) => a.ip.family === toward.family)) ?? p.podIPs[0];
    if (!ip || !p.nodeName || p.hostNetwork) return undefined;
    return {
      kind: "pod",
      namespace: p.namespace,
      name: p.name,
      node: p.nodeName,
      ip: ip.ip,
      evidence: ip.source,
    };
  };
  const hostSource = (node: string): Source | undefined => {
    const h = hostAddress(snap, facts, node, toward);
    return h
      ? { kind: "host", node, ip: h.ip, ...(h.evidence ? { evidence: h.evidence } : {}) }
      : undefined;
  };
  if (opts.from?.kind === "pod") {
    const { namespace, name } = opts.from;
    const p = facts.pods.find((x) => x.namespace === namespace && x.name === name);
    const s = p && podSource(p);
    if (s) list.push(s);
    else {
      diagnostics.push({
        code: "FROM_NOT_FOUND",
        severity: "error",
        message: `--from pod/${namespace}/${name}: no such pod with an address and a node in cluster/*.yaml (kubectl get pod -n ${namespace} ${name} -o yaml)`,
      });
    }
    return { list, diagnostics };
  }
  if (opts.from?.kind === "address") {
    const ip = opts.from.ip;
    const p = facts.pods.find((x) => x.podIPs.some((a) => a.ip.value === ip.value));
    const s = p && podSource(p);
    if (s) return { list: [s], diagnostics };
    // No Pod object has it: trace it as a pod address through every node whose rules are known.
    for (const node of [...snap.nodes.keys()].sort()) {
      if (!snap.nodes.get(node)?.iptables) continue;
      list.push({ kind: "pod", namespace: "?", name: formatIp(ip), node, ip });
      const hs = hostSource(node);
      if (hs) list.push(hs);
    }
    if (list.length === 0) {
      diagnostics.push({
        code: "FROM_NOT_FOUND",
        severity: "error",
        message: `--from ${formatIp(ip)}: no pod has this address and no node's iptables-save is in the snapshot to trace it through`,
      });
    }
    return { list, diagnostics };
  }
  if (opts.from?.kind === "node") {
    const s = hostSource(opts.from.name);
    if (s) list.push(s);
    else {
      diagnostics.push({
        code: "FROM_NOT_FOUND",
        severity: "error",
        message: `--from node/${opts.from.name}: its address is not in the snapshot (a Node object with an InternalIP, or nodes/${opts.from.name}/ip-route.txt)`,
      });
    }
    return { list, diagnostics };
  }
  const nodeNames = new Set<string>([...snap.nodes.keys()]);
  if (nodeNames.size === 0) for (const n of facts.nodes) nodeNames.add(n.name);
  for (const node of [...nodeNames].sort()) {
    const pods = facts.pods.filter(
      (p) => p.nodeName === node && !p.hostNetwork && p.podIPs.length > 0,
    );
    const withEvidence = pods.find((p) => snap.pods.has(`${p.namespace}/${p.name}`));
    const chosen = withEvidence ?? pods.find((p) => p.namespace !== "kube-system") ?? pods[0];
    const ps = chosen && podSource(chosen);
    if (ps) list.push(ps);
    const hs = hostSource(node);
    if (hs && ps) list.push(hs);
  }
  return { list, diagnostics };
}
