/**
 * @module nftables/match — decides one match (or map lookup) of an nftables rule against the
 * packet as the walk tracks it: a value the packet has, a value it does not, a fact the evidence
 * does not state (the walk follows both outcomes), or a random number (numgen, `meta random`)
 * whose every outcome the walk follows with its probability.
 */

import { type AddressKnowledge, isLocalAddress, localFactText } from "../iptables/nat-match.ts";
import type { AddressFact } from "../iptables/nat-trace.ts";
import type { Family } from "../net/cidr.ts";
import type { NftElement, NftKey, NftSelector, NftSet } from "./model.ts";
import { atomHolds, CT_STATE_BITS, FIB_TYPES } from "./values.ts";

/** Where the packet's interfaces are: a name, "" (none at this hook), undefined (not known). */
export interface NftPacket {
  family: Family;
  src: bigint;
  dst: bigint;
  /** Protocol number (6 tcp, 17 udp, 1 icmp, 58 icmpv6). */
  proto: number;
  sport: number | undefined;
  dport: number | undefined;
  iif: string | undefined;
  oif: string | undefined;
  mark: number;
  /** Bits of `mark` that are known. */
  markKnown: number;
  /** The connection's mark (`ct mark`); undefined when not known. */
  ctmark?: number | undefined;
  /** IP_CT_* bit of the packet's conntrack state (NEW: 8). */
  ctState: number;
  dnatted: boolean;
  /** The flow's own word on whether its (original) destination is the node's. */
  premise: { readonly addr: bigint; readonly local: boolean } | undefined;
  /** Values taken on this walk for unknown facts and random numbers, by key. */
  taken: Map<string, boolean | number>;
  factsUsed: AddressFact[] | undefined;
}

/** An outcome of a random number: its value and probability. */
export interface RandomOutcome {
  readonly value: number;
  readonly probability: number;
  readonly note: string;
}

export type NftMatch =
  | { readonly v: "yes" | "no" }
  | { readonly v: "unknown"; readonly key: string; readonly fact: string; readonly command: string }
  | { readonly v: "random"; readonly key: string; readonly outcomes: readonly RandomOutcome[] }
  | { readonly v: "undecided"; readonly reason: string };

export const NFT_YES: NftMatch = { v: "yes" };
export const NFT_NO: NftMatch = { v: "no" };

type Value = bigint | string;
/** A selector's value for the packet, or why it cannot be had. */
type Read = { readonly value: Value } | NftMatch;

const PROTO_NAMES: Record<string, number> = {
  tcp: 6,
  udp: 17,
  icmp: 1,
  sctp: 132,
  icmpv6: 58,
  "ipv6-icmp": 58,
};

/** A flow's protocol as a number; -1 when it is not one podpath knows. */
export function protoNumber(p: string): number {
  const n = PROTO_NAMES[p.toLowerCase()];
  if (n !== undefined) return n;
  return /^\d+$/.test(p) ? Number(p) : -1;
}

/**
 * The value of one selector of a key (`site` names the statement, for keys of unknown facts).
 * `mask` applies to marks and random numbers.
 */
function readSelector(
  s: NftSelector,
  p: NftPacket,
  k: AddressKnowledge,
  site: string,
  mask: bigint | undefined,
): Read {
  if (s.family !== undefined && s.family !== p.family) return NFT_NO;
  if (s.impliesProto !== undefined && s.impliesProto !== p.proto) return NFT_NO;
  switch (s.key) {
    case "saddr":
      return { value: p.src };
    case "daddr":
      return { value: p.dst };
    case "l4proto":
      return { value: BigInt(p.proto) };
    case "nfproto":
      return { value: p.family === 4 ? 2n : 10n };
    case "sport":
    case "dport": {
      const port = s.key === "sport" ? p.sport : p.dport;
      if (port === undefined) {
        if (p.proto === 6 || p.proto === 17 || p.proto === 132) {
          return {
            v: "undecided",
            reason: `the flow's ${s.key === "sport" ? "source" : "destination"} port is not given`,
          };
        }
        // no transport header with ports: the payload read fails and the rule does not match
        return NFT_NO;
      }
      return { value: BigInt(port) };
    }
    case "iifname":
    case "oifname": {
      const dev = s.key === "iifname" ? p.iif : p.oif;
      // nft_meta: the device is absent at this hook, the expression breaks (no match)
      if (dev === "") return NFT_NO;
      if (dev === undefined) {
        return {
          v: "unknown",
          key: `${s.key}@${site}`,
          fact: `the packet ${s.key === "iifname" ? "arrives on" : "leaves by"} an interface that ${site} matches`,
          command: "ip route get <destination> from <source> iif <interface>   # on the node",
        };
      }
      return { value: dev };
    }
    case "mark": {
      const m = BigInt.asUintN(32, mask ?? 0xffffffffn);
      const unknownBits = m & ~BigInt(p.markKnown >>> 0);
      if (unknownBits !== 0n) {
        return {
          v: "unknown",
          key: `mark@${site}`,
          fact: `the packet's mark satisfies ${site}`,
          command: "nft list ruleset   # on the node: the rules that set the mark before this one",
        };
      }
      return { value: BigInt(p.mark >>> 0) & m };
    }
    case "ct state":
      return { value: BigInt(p.ctState) };
    case "ct status":
      // the first packet's status: IPS_DST_NAT once a DNAT binding is set up
      return { value: p.dnatted ? 32n : 0n };
    case "fib daddr type": {
      const local = localOf(p, k);
      if (local === undefined) {
        return {
          v: "unknown",
          key: `local:${p.family}:${p.dst}`,
          fact: localFactText(p.family, p.dst),
          command: "ip -o addr   # on the node",
        };
      }
      return { value: BigInt(local ? FIB_TYPES["local"]! : FIB_TYPES["unicast"]!) };
    }
    case "fib saddr type":
      return { v: "undecided", reason: "fib saddr type is not modelled" };
    case "numgen":
    case "random": {
      const key = `${s.key}@${site}`;
      const t = p.taken.get(key);
      if (typeof t === "number") return { value: BigInt(t) };
      const n = s.modulus ?? 1;
      if (s.key === "numgen") {
        return {
          v: "random",
          key,
          outcomes: Array.from({ length: n }, (_, i) => ({
            value: i,
            probability: 1 / n,
            note: `numgen random mod ${n} gives ${i}`,
          })),
        };
      }
      return { v: "undecided", reason: "meta random outside `& M < V` is not modelled" };
    }
  }
}

/** Whether the packet's destination is the node's own (its premise, the addresses, a fact). */
export function localOf(p: NftPacket, k: AddressKnowledge): boolean | undefined {
  const key = `local:${p.family}:${p.dst}`;
  const t = p.taken.get(key);
  if (typeof t === "boolean") return t;
  if (p.premise !== undefined && p.premise.addr === p.dst) return p.premise.local;
  const st = { premise: undefined, factsUsed: p.factsUsed } as unknown as Parameters<
    typeof isLocalAddress
  >[3];
  const r = isLocalAddress(p.dst, p.family, k, st);
  p.factsUsed = (st as unknown as { factsUsed: AddressFact[] | undefined }).factsUsed;
  return r;
}

/** The packet's values for a key's selectors, or the first reason it has none. */
export function readKey(
  key: NftKey,
  p: NftPacket,
  k: AddressKnowledge,
  site: string,
): { values: Value[] } | NftMatch {
  const values: Value[] = [];
  for (const s of key.selectors) {
    const r = readSelector(s, p, k, site, key.mask);
    if ("v" in r) return r;
    let v = r.value;
    if (key.mask !== undefined && typeof v === "bigint" && s.key !== "mark") v &= key.mask;
    values.push(v);
  }
  return { values };
}

/** Whether the packet's values fall in an element (every component). */
export function elementHolds(
  e: NftElement,
  values: readonly Value[],
  flagKeys: readonly string[],
): boolean {
  if (e.length !== values.length) return false;
  for (let i = 0; i < e.length; i++) {
    const a = e[i]!;
    const v = values[i]!;
    // ct state/status are bitmasks: `ct state established,related` holds for either bit
    if (flagKeys[i] === "ct status" && a.kind === "range" && typeof v === "bigint") {
      if ((a.lo & v) === 0n) return false;
      continue;
    }
    if (!atomHolds(a, v)) return false;
  }
  return true;
}

/** The index of the first element of a named set holding the values (hashed for exact keys). */
export function lookup(set: NftSet, values: readonly Value[]): number {
  const idx = indexOf(set);
  const exact = idx.exact.get(values.map(String).join("|"));
  const best = exact ?? -1;
  for (const i of idx.rest) {
    if (best >= 0 && i > best) break;
    if (elementHolds(set.elements[i]!, values, [])) return i;
  }
  return best;
}

interface SetIndex {
  readonly exact: Map<string, number>;
  /** Elements with a range or wildcard component, in order. */
  readonly rest: number[];
}
const indexes = new WeakMap<NftSet, SetIndex>();

function indexOf(set: NftSet): SetIndex {
  let idx = indexes.get(set);
  if (idx) return idx;
  idx = { exact: new Map(), rest: [] };
  set.elements.forEach((e, i) => {
    const single = e.every((a) => (a.kind === "range" ? a.lo === a.hi : !a.name.endsWith("*")));
    if (single) {
      const k = e.map((a) => (a.kind === "range" ? String(a.lo) : a.name)).join("|");
      if (!idx!.exact.has(k)) idx!.exact.set(k, i);
    } else idx!.rest.push(i);
  });
  indexes.set(set, idx);
  return idx;
}

export { CT_STATE_BITS };
