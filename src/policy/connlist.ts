/**
 * @module policy/connlist — the connectivity listing of a set of manifests: for every ordered
 * pair of workloads, and between workloads and the outside world, the connections NetworkPolicy
 * allows, in netpol-analyzer's `list` text format (`src => dst : conns`). The outside world is cut
 * into the disjoint IPv4 intervals that the policies' ipBlocks (and excepts) draw.
 */
import { formatIp } from "../net/cidr.ts";
import { type ConnectionSet, equalSets, formatConnections, isEmpty } from "./connection-set.ts";
import { connectionsBetween, type EvaluateOptions } from "./evaluate.ts";
import type { ExternalEndpoint, PodEndpoint, PolicyWorld } from "./policy-world.ts";

export interface ConnlistEntry {
  readonly src: string;
  readonly dst: string;
  readonly connections: ConnectionSet;
}

const V4_END = (1n << 32n) - 1n;

/** Disjoint IPv4 intervals covering the whole space, cut at every ipBlock and except boundary. */
export function externalIntervals(world: PolicyWorld): [bigint, bigint][] {
  const cuts = new Set<bigint>([0n]);
  for (const p of world.policies) {
    for (const rule of [...p.ingress, ...p.egress]) {
      for (const peer of rule.peers ?? []) {
        if (peer.kind !== "ipBlock" || peer.cidr.family !== 4) continue;
        for (const c of [peer.cidr, ...peer.except]) {
          cuts.add(c.start);
          if (c.end < V4_END) cuts.add(c.end + 1n);
        }
      }
    }
  }
  const sorted = [...cuts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted.map((start, i) => [start, i + 1 < sorted.length ? sorted[i + 1]! - 1n : V4_END]);
}

export function formatInterval(start: bigint, end: bigint): string {
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
 * sets are left out. Connections from the outside are listed per interval; connections to the
 * outside are merged across adjacent intervals that allow the same, as netpol-analyzer prints them.
 */
export function connectivityList(world: PolicyWorld, opts: EvaluateOptions = {}): ConnlistEntry[] {
  const workloads = [...workloadsOf(world)];
  const intervals = externalIntervals(world);
  const ext = ([start, end]: [bigint, bigint]): ExternalEndpoint => ({
    kind: "external",
    ip: { family: 4, value: start },
    end,
  });
  const out: ConnlistEntry[] = [];
  for (const [srcName, src] of workloads) {
    for (const [dstName, dst] of workloads) {
      if (srcName === dstName) continue;
      const c = connectionsBetween(world, src, dst, opts).connections;
      if (!isEmpty(c)) out.push({ src: srcName, dst: dstName, connections: c });
    }
  }
  for (const [name, pod] of workloads) {
    for (const iv of intervals) {
      const c = connectionsBetween(world, ext(iv), pod, opts).connections;
      if (!isEmpty(c)) out.push({ src: formatInterval(iv[0], iv[1]), dst: name, connections: c });
    }
    let run: { start: bigint; end: bigint; c: ConnectionSet } | undefined;
    const flush = () => {
      if (run && !isEmpty(run.c)) {
        out.push({ src: name, dst: formatInterval(run.start, run.end), connections: run.c });
      }
      run = undefined;
    };
    for (const iv of intervals) {
      const c = connectionsBetween(world, pod, ext(iv), opts).connections;
      if (run && equalSets(run.c, c)) run.end = iv[1];
      else {
        flush();
        run = { start: iv[0], end: iv[1], c };
      }
    }
    flush();
  }
  return out;
}

/** The listing as netpol-analyzer's txt output: one sorted line per allowed pair. */
export function renderConnlist(entries: readonly ConnlistEntry[]): string {
  const lines = entries.map((e) => `${e.src} => ${e.dst} : ${formatConnections(e.connections)}`);
  lines.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}
