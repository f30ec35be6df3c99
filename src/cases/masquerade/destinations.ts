/**
 * @module cases/masquerade/destinations — which destinations to explain: `--dest` when given;
 * otherwise the far side's own addresses as the snapshot names them (allowlist destinations, then
 * targets the probe transcripts tried inside a site's prefixes), then targets the transcripts tried
 * at a Service address (inside the cluster's Service range, or a destination kube-proxy's
 * KUBE-SERVICES chains name in a node's nat or filter table), except a VPN client's: the node's
 * rules say where it goes.
 */
import type { ProbeTranscript } from "../../evidence/probes.ts";
import type { PortEntry, RemoteSite } from "../../evidence/remote-site.ts";
import { type Cidr, contains, type Ip } from "../../net/cidr.ts";
import type { NodeEvidence } from "../../snapshot/load.ts";
import type { DiagnoseOptions } from "../case.ts";
import type { ClusterFacts } from "./facts.ts";

export interface TracedDestination {
  readonly ip: Ip;
  readonly port?: number;
  readonly protocol: "tcp" | "udp" | "icmp";
  /** Where the destination came from, for the report. */
  readonly why: string;
}

const MAX_TARGETS = 4;

function portOf(p: PortEntry): { protocol: "tcp" | "udp"; port: number } | undefined {
  if ((p.protocol !== "tcp" && p.protocol !== "udp") || p.from === undefined) return undefined;
  return { protocol: p.protocol, port: p.from };
}

export function chooseDestinations(
  opts: DiagnoseOptions,
  sites: readonly RemoteSite[],
  probes: readonly ProbeTranscript[],
  facts: ClusterFacts,
  nodes: Iterable<NodeEvidence> = [],
): { list: TracedDestination[] } {
  if (opts.dest) {
    return {
      list: [
        {
          ip: opts.dest.ip,
          ...(opts.dest.port ? { port: opts.dest.port } : {}),
          protocol: opts.dest.port ? "tcp" : "icmp",
          why: "--dest",
        },
      ],
    };
  }
  const out: TracedDestination[] = [];
  const seen = new Set<bigint>();
  const add = (t: TracedDestination) => {
    if (seen.has(t.ip.value) || out.length >= MAX_TARGETS) return;
    seen.add(t.ip.value);
    out.push(t);
  };
  for (const site of sites) {
    for (const a of site.allowlists) {
      for (const d of a.destinations) {
        const host = d.cidr.end === d.cidr.start;
        if (!host) continue;
        const port = a.ports.map(portOf).find((p) => p !== undefined);
        add({
          ip: { family: d.cidr.family, value: d.cidr.start },
          ...(port ? { port: port.port, protocol: port.protocol } : { protocol: "icmp" as const }),
          why: `allowlist ${a.name} of ${site.name}`,
        });
      }
    }
  }
  const inSites = (ip: Ip) => sites.some((s) => s.prefixes.some((p) => contains(p.cidr, ip)));
  for (const t of probes) {
    for (const c of t.commands) {
      if (!c.targetIp || !inSites(c.targetIp)) continue;
      add({
        ip: c.targetIp,
        ...(c.port ? { port: c.port, protocol: "tcp" as const } : { protocol: "icmp" as const }),
        why: `probed in ${t.file}`,
      });
    }
  }
  let services: Cidr[] | undefined; // read only when a probe has a target
  const inServices = (ip: Ip) => {
    services ??= [
      ...(facts.serviceRange?.cidrs ?? []).map((c) => c.value),
      ...kubeProxyDestinations(nodes),
    ];
    return services.some((c) => contains(c, ip));
  };
  for (const t of probes) {
    // a VPN client's transcript (`# client: NAME vpn-address: IP`) goes through the tunnel: the
    // VPN case places its probes
    if (t.client?.vpnAddress) continue;
    for (const c of t.commands) {
      if (!c.targetIp || !inServices(c.targetIp)) continue;
      add({
        ip: c.targetIp,
        ...(c.port ? { port: c.port, protocol: "tcp" as const } : { protocol: "icmp" as const }),
        why: `probed in ${t.file} (a Service address)`,
      });
    }
  }
  return { list: out };
}

/**
 * The destinations kube-proxy's KUBE-SERVICES chains match (`-d`, not negated) in the nodes' nat
 * table (a Service's cluster IP) and filter table (a Service with no endpoints, rejected there).
 */
function kubeProxyDestinations(nodes: Iterable<NodeEvidence>): Cidr[] {
  const out: Cidr[] = [];
  for (const node of nodes) {
    for (const table of ["nat", "filter"] as const) {
      for (const r of node.iptables?.tables.get(table)?.chains.get("KUBE-SERVICES")?.rules ?? []) {
        if (r.dst && !r.dst.negated) out.push(r.dst.cidr);
      }
    }
  }
  return out;
}
