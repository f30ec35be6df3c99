/**
 * @module policy/connection-set — sets of (protocol, port) as NetworkPolicy allows them: per
 * protocol a list of disjoint port ranges within 1–65535. Rendered the way netpol-analyzer writes
 * connections (`All Connections`, `TCP 8080`, `TCP 1-52,54-65535`, `TCP 9090,UDP 53`).
 * Hand-written: three protocols of at most 65535 ports need sorted ranges, not an interval library.
 */
import { PROTOCOLS, type Protocol } from "./network-policy.ts";

export type PortBounds = readonly [number, number];

export type ConnectionSet = Readonly<Record<Protocol, readonly PortBounds[]>>;

export const MIN_PORT = 1;
export const MAX_PORT = 65535;

export const NO_CONNECTIONS: ConnectionSet = { TCP: [], UDP: [], SCTP: [] };
export const ALL_CONNECTIONS: ConnectionSet = {
  TCP: [[MIN_PORT, MAX_PORT]],
  UDP: [[MIN_PORT, MAX_PORT]],
  SCTP: [[MIN_PORT, MAX_PORT]],
};

function normalize(ranges: readonly PortBounds[]): PortBounds[] {
  const sorted = ranges
    .map(([a, b]) => [Math.max(a, MIN_PORT), Math.min(b, MAX_PORT)] as const)
    .filter(([a, b]) => a <= b)
    .sort((x, y) => x[0] - y[0]);
  const out: [number, number][] = [];
  for (const [a, b] of sorted) {
    const last = out.at(-1);
    if (last && a <= last[1] + 1) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

export function connectionSet(
  parts: Partial<Record<Protocol, readonly PortBounds[]>>,
): ConnectionSet {
  return {
    TCP: normalize(parts.TCP ?? []),
    UDP: normalize(parts.UDP ?? []),
    SCTP: normalize(parts.SCTP ?? []),
  };
}

export function union(a: ConnectionSet, b: ConnectionSet): ConnectionSet {
  return connectionSet({
    TCP: [...a.TCP, ...b.TCP],
    UDP: [...a.UDP, ...b.UDP],
    SCTP: [...a.SCTP, ...b.SCTP],
  });
}

function intersectRanges(a: readonly PortBounds[], b: readonly PortBounds[]): PortBounds[] {
  const out: PortBounds[] = [];
  for (const [a0, a1] of a) {
    for (const [b0, b1] of b) {
      const lo = Math.max(a0, b0);
      const hi = Math.min(a1, b1);
      if (lo <= hi) out.push([lo, hi]);
    }
  }
  return normalize(out);
}

export function intersect(a: ConnectionSet, b: ConnectionSet): ConnectionSet {
  return {
    TCP: intersectRanges(a.TCP, b.TCP),
    UDP: intersectRanges(a.UDP, b.UDP),
    SCTP: intersectRanges(a.SCTP, b.SCTP),
  };
}

function subtractRanges(a: readonly PortBounds[], b: readonly PortBounds[]): PortBounds[] {
  let out: PortBounds[] = [...a];
  for (const [b0, b1] of b) {
    out = out.flatMap(([a0, a1]): PortBounds[] => {
      if (b1 < a0 || b0 > a1) return [[a0, a1]];
      const parts: PortBounds[] = [];
      if (a0 < b0) parts.push([a0, b0 - 1]);
      if (b1 < a1) parts.push([b1 + 1, a1]);
      return parts;
    });
  }
  return normalize(out);
}

/** What `a` allows and `b` does not. */
export function subtract(a: ConnectionSet, b: ConnectionSet): ConnectionSet {
  return {
    TCP: subtractRanges(a.TCP, b.TCP),
    UDP: subtractRanges(a.UDP, b.UDP),
    SCTP: subtractRanges(a.SCTP, b.SCTP),
  };
}

export function isEmpty(c: ConnectionSet): boolean {
  return PROTOCOLS.every((p) => c[p].length === 0);
}

export function isAll(c: ConnectionSet): boolean {
  return PROTOCOLS.every(
    (p) => c[p].length === 1 && c[p][0]![0] === MIN_PORT && c[p][0]![1] === MAX_PORT,
  );
}

export function hasPort(c: ConnectionSet, protocol: Protocol, port: number): boolean {
  return c[protocol].some(([a, b]) => a <= port && port <= b);
}

export function equalSets(a: ConnectionSet, b: ConnectionSet): boolean {
  return formatConnections(a) === formatConnections(b);
}

function formatRanges(r: readonly PortBounds[]): string {
  return r.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(",");
}

/** netpol-analyzer's connection text; `No Connections` for the empty set. */
export function formatConnections(c: ConnectionSet): string {
  if (isAll(c)) return "All Connections";
  if (isEmpty(c)) return "No Connections";
  // netpol-analyzer lists protocols by name: SCTP, TCP, UDP
  return [...PROTOCOLS]
    .sort()
    .filter((p) => c[p].length > 0)
    .map((p) => `${p} ${formatRanges(c[p])}`)
    .join(",");
}

/**
 * Parses netpol-analyzer's connection text (connlist/diff form `TCP 8080,UDP 53`, or explain form
 * `TCP:[8080], UDP`); undefined when it is not one.
 */
export function parseConnections(text: string): ConnectionSet | undefined {
  const t = text.trim();
  if (t === "All Connections") return ALL_CONNECTIONS;
  if (t === "No Connections") return NO_CONNECTIONS;
  const parts: Partial<Record<Protocol, PortBounds[]>> = {};
  const re = /(TCP|UDP|SCTP)(?::\[([0-9,-]*)\]| ([0-9][0-9,-]*))?/g;
  let matched = "";
  for (const m of t.matchAll(re)) {
    const proto = m[1] as Protocol;
    const list = m[2] ?? m[3];
    const ranges: PortBounds[] =
      list === undefined
        ? [[MIN_PORT, MAX_PORT]]
        : list
            .split(",")
            .filter(Boolean)
            .map((x) => {
              const [a, b] = x.split("-").map(Number);
              return [a!, b ?? a!] as const;
            });
    parts[proto] = [...(parts[proto] ?? []), ...ranges];
    matched += m[0];
  }
  if (matched.length === 0) return undefined;
  return connectionSet(parts);
}
