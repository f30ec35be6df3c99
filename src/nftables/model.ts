/**
 * @module nftables/model — the typed form of an nftables ruleset as `nft list ruleset` (text, with
 * or without `-a`, `-n`, `-nn`, `-s`) and `nft -j list ruleset` (JSON) show it: tables, chains,
 * sets and maps, and every rule's statements, each rule keeping the line it came from.
 */

import type { SourceRef } from "../model/types.ts";

export type NftFamily = "ip" | "ip6" | "inet" | "arp" | "bridge" | "netdev";

/**
 * One value of a match or a set element's component: a numeric range (addresses, ports,
 * protocols, marks, ct state bits, fib types, numgen results) or a name (interface names, with
 * `*` for a prefix wildcard as nft prints `"eth*"`).
 */
export type NftAtom =
  | { readonly kind: "range"; readonly lo: bigint; readonly hi: bigint }
  | { readonly kind: "name"; readonly name: string };

/** A set element: one atom per component of a concatenation (`a . b . c`). */
export type NftElement = readonly NftAtom[];

/** What a selector reads from the packet, normalized (`tcp dport` and `th dport` both "dport"). */
export type NftSelectorKey =
  | "saddr"
  | "daddr"
  | "l4proto"
  | "sport"
  | "dport"
  | "iifname"
  | "oifname"
  | "mark"
  | "ct state"
  | "ct status"
  | "fib daddr type"
  | "fib saddr type"
  | "numgen"
  | "random"
  | "nfproto";

export interface NftSelector {
  readonly key: NftSelectorKey;
  /** As printed: "ip saddr", "tcp dport", "meta mark". */
  readonly text: string;
  /** `numgen random mod N`: N; `meta random & M`: M + 1. */
  readonly modulus?: number;
  /** An address family the selector implies (`ip saddr`: 4, `ip6 daddr`: 6). */
  readonly family?: 4 | 6;
  /** A protocol the selector implies (`tcp dport`: 6); the rule matches only that protocol. */
  readonly impliesProto?: number;
}

/** The left side of a match or map lookup: one selector or a concatenation, with a mask. */
export interface NftKey {
  readonly selectors: readonly NftSelector[];
  /** `meta mark & 0x4000`: the bits kept before comparing. */
  readonly mask?: bigint;
}

export type NftSetRef =
  | { readonly kind: "anonymous"; readonly elements: readonly NftElement[] }
  | { readonly kind: "named"; readonly name: string };

export type NftVerdict =
  | { readonly kind: "accept" | "drop" | "return" | "continue" | "queue" }
  | { readonly kind: "jump" | "goto"; readonly chain: string };

/** The data of a map element: a verdict (vmap) or an address/port (dnat ... map). */
export type NftMapData =
  | { readonly kind: "verdict"; readonly verdict: NftVerdict }
  | { readonly kind: "value"; readonly value: NftElement };

export type NftMapRef =
  | {
      readonly kind: "anonymous";
      readonly entries: readonly { readonly key: NftElement; readonly data: NftMapData }[];
    }
  | { readonly kind: "named"; readonly name: string };

/** Where a NAT statement's address (and port) comes from. */
export type NftNatTo =
  | { readonly kind: "fixed"; readonly addr?: NftAtom; readonly port?: NftAtom }
  /** `dnat ip to numgen random mod 2 map { 0 : 10.4.1.5 . 8080, ... }` */
  | { readonly kind: "map"; readonly key: NftKey; readonly map: NftMapRef };

export type NftStatement =
  | {
      readonly kind: "match";
      readonly key: NftKey;
      readonly op: "==" | "!=" | "<" | ">" | "<=" | ">=";
      /** A single value or an anonymous/named set. */
      readonly right: NftSetRef;
    }
  | { readonly kind: "vmap"; readonly key: NftKey; readonly map: NftMapRef }
  | { readonly kind: "verdict"; readonly verdict: NftVerdict }
  | { readonly kind: "reject"; readonly with?: string }
  | {
      readonly kind: "dnat" | "snat" | "masquerade" | "redirect";
      readonly to?: NftNatTo;
      readonly flags: readonly string[];
    }
  /**
   * `meta mark set meta mark | X` (op "or"), `^ X` ("xor"), `& X` ("and"), or a constant;
   * `second`: a second operation (`meta mark & 0xffffffcf | 0x20`, iptables-nft's `--set-xmark`);
   * `fromCtMark`: `meta mark set ct mark` (the connection's mark; `value` unused).
   */
  | {
      readonly kind: "mark-set";
      readonly op: "set" | "or" | "xor" | "and";
      readonly value: bigint;
      readonly second?: { readonly op: "or" | "xor" | "and"; readonly value: bigint };
      readonly fromCtMark?: boolean;
    }
  /** `ct mark set meta mark`: the connection's mark becomes the packet's. */
  | { readonly kind: "ct-mark-save" }
  /**
   * `set-update`: `update @set { ip saddr }` / `add @set { ... }` (kube-proxy's session affinity):
   * the set changes for later packets; this packet's way does not depend on it.
   */
  | { readonly kind: "counter" | "log" | "comment" | "notrack" | "set-update" }
  /** An expression podpath does not read: the evaluator stops there, undecided, citing it. */
  | { readonly kind: "unknown"; readonly text: string };

export interface NftRule {
  readonly statements: readonly NftStatement[];
  readonly source: SourceRef;
  /** `nft -a`'s `# handle N`. */
  readonly handle?: number;
  readonly comment?: string;
}

export interface NftBaseChain {
  /** "filter", "nat", "route". */
  readonly type: string;
  readonly hook: string;
  /** Numeric, with the names nft prints (`dstnat`, `srcnat - 10`, `filter`) resolved. */
  readonly priority: number;
  readonly policy: "accept" | "drop";
}

export interface NftChain {
  readonly name: string;
  readonly source: SourceRef;
  readonly base?: NftBaseChain;
  readonly rules: NftRule[];
}

export interface NftSet {
  readonly name: string;
  readonly source: SourceRef;
  /** The key's types, one per concatenated component (`ipv4_addr . inet_proto . inet_service`). */
  readonly keyTypes: readonly string[];
  /** For maps: "verdict", "ipv4_addr . inet_service", ... */
  readonly dataType?: string;
  readonly flags: readonly string[];
  readonly elements: NftElement[];
  /** For maps: the data of each element, in the same order. */
  readonly data?: NftMapData[];
}

export interface NftTable {
  readonly family: NftFamily;
  readonly name: string;
  readonly source: SourceRef;
  readonly chains: Map<string, NftChain>;
  readonly sets: Map<string, NftSet>;
  /** nft's "# Warning: table ip nat is managed by iptables-nft, do not touch!", or its JSON hint. */
  readonly iptablesNft: boolean;
}

export interface NftRuleset {
  readonly file: string;
  readonly format: "text" | "json";
  readonly tables: NftTable[];
}

/** The table of `family`/`name`, if the ruleset shows it. */
export function tableOf(rs: NftRuleset, family: NftFamily, name: string): NftTable | undefined {
  return rs.tables.find((t) => t.family === family && t.name === name);
}
