/**
 * @module policy/connlist — the connectivity listing of a set of manifests: for every ordered
 * pair of workloads, and between workloads and the outside world, the connections NetworkPolicy
 * allows, in netpol-analyzer's `list` text format (`src => dst : conns`). The outside world is cut
 * into the disjoint IPv4 intervals that the policies' ipBlocks (and excepts) draw.
 */
import { type Cidr, formatIp } from "../net/cidr.ts";
import { type ConnectionSet, formatConnections, isEmpty } from "./connection-set.ts";
import { connectionsBetween, type EvaluateOptions } from "./evaluate.ts";
import type { ExternalEndpoint, PodEndpoint, PolicyWorld } from "./policy-world.ts";

export interface ConnlistEntry {
  readonly src: string;
  readonly dst: string;
  readonly connections: ConnectionSet;
}

const V4_END = (1n << 32n) - 1n;

/** The address ranges an ipBlock admits: its CIDR minus the excepts, adjacent pieces merged. */
function blockRanges(cidr: Cidr, except: readonly Cidr[]): [bigint, bigint][] {
  let ranges: [bigint, bigint][] = [[cidr.start, cidr.end]];
  for (const e of except) {
    ranges = ranges.flatMap(([a, b]): [bigint, bigint][] => {
      if (e.end < a || e.start > b) return [[a, b]];
      const out: [bigint, bigint][] = [];
      if (a < e.start) out.push([a, e.start - 1n]);
      if (e.end < b) out.push([e.end + 1n, b]);
      return out;
    });
  }
  ranges.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  const merged: [bigint, bigint][] = [];
  for (const r of ranges) {
    const last = merged.at(-1);
    if (!last || r[0] > last[1] + 1n) merged.push([r[0], r[1]]);
    else if (r[1] > last[1]) last[1] = r[1];
  }
  return merged;
}

/**
 * Disjoint IPv4 intervals covering the whole space, cut wherever an ipBlock's address set (CIDR
 * minus excepts) starts or ends: within one interval every ipBlock either admits all addresses or
 * none, so one evaluation speaks for the whole interval. With `direction`, only the blocks of that
 * direction's rules cut (as netpol-analyzer lists sources from ingress blocks and destinations
 * from egress blocks); without it, all of them.
 */
export function externalIntervals(
  world: PolicyWorld,
  direction?: "ingress" | "egress",
): [bigint, bigint][] {
  const cuts = new Set<bigint>([0n]);
  const add = (cidr: Cidr, except: readonly Cidr[]) => {
    if (cidr.family !== 4) return;
    for (const [a, b] of blockRanges(
      cidr,
      except.filter((e) => e.family === 4),
    )) {
      cuts.add(a);
      if (b < V4_END) cuts.add(b + 1n);
    }
  };
  const wanted = (d: "ingress" | "egress") => direction === undefined || direction === d;
  for (const p of world.policies) {
    for (const rule of [
      ...(wanted("ingress") ? p.ingress : []),
      ...(wanted("egress") ? p.egress : []),
    ]) {
      for (const peer of rule.peers ?? []) if (peer.kind === "ipBlock") add(peer.cidr, peer.except);
    }
  }
  for (const a of world.adminPolicies ?? []) {
    for (const rule of [
      ...(wanted("ingress") ? a.ingress : []),
      ...(wanted("egress") ? a.egress : []),
    ]) {
      for (const peer of rule.peers)
        if (peer.kind === "networks") for (const c of peer.cidrs) add(c, []);
    }
  }
  const sorted = [...cuts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted.map((start, i) => [start, i + 1 < sorted.length ? sorted[i + 1]! - 1n : V4_END]);
}

export function formatExternalRange(start: bigint, end: bigint): string {
  return `${formatIp({ family: 4, value: start })}-${formatIp({ family: 4, value: end })}[External]`;
}

/** One representative endpoint per workload, keyed `ns/name[Kind]`. */
export function workloadsOf(world: PolicyWorld): Map<string, PodEndpoint> {
  const out = new Map<string, PodEndpoint>();
  for (const p of world.pods) {
    const key = `${p.namespace}/${p.workload.name}[${p.workload.kind}]`;
    if (!out.has(key)) out.set(key, p);
  }
  return out;
}

/**
 * Every allowed connection between workloads and external intervals. Self-connections and empty
 * sets are left out. Sources outside the cluster are cut by the ingress rules' ipBlocks,
 * destinations outside by the egress rules' ipBlocks, as netpol-analyzer prints them.
 */
export function connectivityList(world: PolicyWorld, opts: EvaluateOptions = {}): ConnlistEntry[] {
  const workloads = [...workloadsOf(world)];
  const ext = ([start, end]: [bigint, bigint]): ExternalEndpoint => ({
    kind: "external",
    ip: { family: 4, value: start },
    end,
  });
  const out: ConnlistEntry[] = [];
  const add = (src: string, dst: string, c: ConnectionSet) => {
    if (!isEmpty(c)) out.push({ src, dst, connections: c });
  };
  for (const [srcName, src] of workloads) {
    for (const [dstName, dst] of workloads) {
      if (srcName !== dstName)
        add(srcName, dstName, connectionsBetween(world, src, dst, opts).connections);
    }
  }
  const inbound = externalIntervals(world, "ingress");
  const outbound = externalIntervals(world, "egress");
  for (const [name, pod] of workloads) {
    for (const iv of inbound) {
      add(
        formatExternalRange(iv[0], iv[1]),
        name,
        connectionsBetween(world, ext(iv), pod, opts).connections,
      );
    }
    for (const iv of outbound) {
      add(
        name,
        formatExternalRange(iv[0], iv[1]),
        connectionsBetween(world, pod, ext(iv), opts).connections,
      );
    }
  }
  return out;
}

/** The listing as netpol-analyzer's txt output: one sorted line per allowed pair. */
export function renderConnlist(entries: readonly ConnlistEntry[]): string {
  const lines = entries.map((e) => `${e.src} => ${e.dst} : ${formatConnections(e.connections)}`);
  lines.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}
