/**
 * @module nftables/values — the words nft prints for values (addresses, prefixes, ranges, ports,
 * protocol and service names, ct states, fib address types, marks, interface names) read into
 * {@link NftAtom}s, by the type of what they are compared with.
 */

import { tryParseCidr, tryParseIp } from "../net/cidr.ts";
import type { NftAtom } from "./model.ts";

/** The value type a selector or a set's key component compares with. */
export type NftValueType =
  | "addr"
  | "proto"
  | "port"
  | "ifname"
  | "mark"
  | "ct-state"
  | "ct-status"
  | "fib-type"
  | "integer";

// protocol and service names nft prints without -n (getprotobyname/getservbyname on Debian)
const PROTOS: Record<string, number> = {
  icmp: 1,
  igmp: 2,
  tcp: 6,
  udp: 17,
  gre: 47,
  esp: 50,
  ah: 51,
  "ipv6-icmp": 58,
  icmpv6: 58,
  sctp: 132,
  udplite: 136,
};
const SERVICES: Record<string, number> = {
  ssh: 22,
  domain: 53,
  http: 80,
  https: 443,
  bootps: 67,
  bootpc: 68,
  ntp: 123,
  bgp: 179,
  "kubernetes-api": 6443,
};
// the kernel's IP_CT_* bits as nft prints them (`ct state 0x2,0x4` with -nn)
export const CT_STATE_BITS: Record<string, number> = {
  invalid: 1,
  established: 2,
  related: 4,
  new: 8,
  untracked: 64,
};
const CT_STATUS_BITS: Record<string, number> = {
  expected: 1,
  "seen-reply": 2,
  assured: 4,
  confirmed: 8,
  snat: 16,
  dnat: 32,
  dying: 512,
};
// RTN_* as `fib daddr type` names them
export const FIB_TYPES: Record<string, number> = {
  unspec: 0,
  unicast: 1,
  local: 2,
  broadcast: 3,
  anycast: 4,
  multicast: 5,
  blackhole: 6,
  unreachable: 7,
  prohibit: 8,
};

/** The value type of a set's declared key type (`ipv4_addr`, `inet_service`, ...). */
export function valueTypeOfSetType(t: string): NftValueType {
  switch (t) {
    case "ipv4_addr":
    case "ipv6_addr":
      return "addr";
    case "inet_proto":
      return "proto";
    case "inet_service":
      return "port";
    case "ifname":
      return "ifname";
    case "mark":
      return "mark";
    case "ct_state":
      return "ct-state";
    default:
      return "integer";
  }
}

const range = (lo: bigint, hi: bigint = lo): NftAtom => ({ kind: "range", lo, hi });

function integer(word: string): bigint | undefined {
  if (/^0x[0-9a-f]+$/i.test(word) || /^[0-9]+$/.test(word)) return BigInt(word);
  return undefined;
}

/** One word read as a value of `type`; undefined when it is not one. */
export function atomOf(word: string, type: NftValueType): NftAtom | undefined {
  const unquoted = word.startsWith('"') && word.endsWith('"') ? word.slice(1, -1) : word;
  if (type === "ifname") return { kind: "name", name: unquoted };
  // a range `a-b` (ports, marks, addresses); addresses hold no '-' otherwise
  const dash = word.indexOf("-", 1);
  if (dash > 0 && type !== "proto" && !(type === "fib-type" || type.startsWith("ct"))) {
    const lo = atomOf(word.slice(0, dash), type);
    const hi = atomOf(word.slice(dash + 1), type);
    if (lo?.kind === "range" && hi?.kind === "range") return range(lo.lo, hi.hi);
    if (type !== "addr") return undefined;
  }
  switch (type) {
    case "addr": {
      if (word.includes("/")) {
        const c = tryParseCidr(word);
        return "cidr" in c ? range(c.cidr.start, c.cidr.end) : undefined;
      }
      const ip = tryParseIp(word);
      return ip ? range(ip.value) : undefined;
    }
    case "proto": {
      const n = integer(word) ?? (PROTOS[word] !== undefined ? BigInt(PROTOS[word]) : undefined);
      return n === undefined ? undefined : range(n);
    }
    case "port": {
      const n =
        integer(word) ?? (SERVICES[word] !== undefined ? BigInt(SERVICES[word]) : undefined);
      return n === undefined || n > 65535n ? undefined : range(n);
    }
    case "ct-state":
    case "ct-status": {
      const names = type === "ct-state" ? CT_STATE_BITS : CT_STATUS_BITS;
      const n = integer(word) ?? (names[word] !== undefined ? BigInt(names[word]) : undefined);
      return n === undefined ? undefined : range(n);
    }
    case "fib-type": {
      const n =
        integer(word) ?? (FIB_TYPES[word] !== undefined ? BigInt(FIB_TYPES[word]) : undefined);
      return n === undefined ? undefined : range(n);
    }
    default: {
      const n = integer(word);
      return n === undefined ? undefined : range(n);
    }
  }
}

/** Whether a value falls in an atom (a name with a trailing `*` matches by prefix). */
export function atomHolds(a: NftAtom, v: bigint | string): boolean {
  if (a.kind === "range") return typeof v === "bigint" && v >= a.lo && v <= a.hi;
  if (typeof v !== "string") return false;
  return a.name.endsWith("*") ? v.startsWith(a.name.slice(0, -1)) : v === a.name;
}
