/**
 * @module cases/masquerade/destinations — which destinations to explain: `--dest` when given;
 * otherwise the far side's own addresses as the snapshot names them (allowlist destinations, then
 * targets the probe transcripts tried inside a site's prefixes).
 */
import type { ProbeTranscript } from "../../evidence/probes.ts";
import type { PortEntry, RemoteSite } from "../../evidence/remote-site.ts";
import { contains, type Ip } from "../../net/cidr.ts";
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
  _facts: ClusterFacts,
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
  return { list: out };
}
