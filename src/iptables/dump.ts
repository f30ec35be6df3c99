/**
 * @module iptables/dump — the data model of an iptables-save / ip6tables-save / `iptables -S`
 * dump: tables, chains, rules with structured matches and targets, each rule tied to its line.
 */

import type { SourceRef } from "../model/types.ts";
import type { Cidr, Family, Ip } from "../net/cidr.ts";

export const TABLE_NAMES = ["raw", "mangle", "nat", "filter", "security"] as const;
export type TableName = (typeof TABLE_NAMES)[number];

/** Built-in chains per table, in the order iptables-save prints them. */
export const BUILTIN_CHAINS: { readonly [T in TableName]: readonly string[] } = {
  raw: ["PREROUTING", "OUTPUT"],
  mangle: ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"],
  nat: ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
  filter: ["INPUT", "FORWARD", "OUTPUT"],
  security: ["INPUT", "FORWARD", "OUTPUT"],
};

export interface Counters {
  readonly packets: bigint;
  readonly bytes: bigint;
}

/** An inclusive port range; a single port has `from === to`. */
export interface PortRange {
  readonly from: number;
  readonly to: number;
}

/** `-s`/`-d` and the conntrack address options. */
export interface AddrMatch {
  readonly cidr: Cidr;
  readonly negated: boolean;
}

/** `-i`/`-o`: `name` without the trailing `+`; `wildcard` when it ended in `+` (prefix match). */
export interface IfaceMatch {
  readonly name: string;
  readonly wildcard: boolean;
  readonly negated: boolean;
}

export interface ProtoMatch {
  /** Lower-case name (`tcp`, `udp`, `icmp`, `sctp`, ...) or the number as text when unnamed. */
  readonly name: string;
  readonly negated: boolean;
}

/** One option of a match or target as written: `! --dport 80` is {name:"--dport", negated, values:["80"]}. */
export interface ModuleOption {
  readonly name: string;
  readonly negated: boolean;
  readonly values: readonly string[];
}

export interface PortsSpec {
  readonly ranges: readonly PortRange[];
  readonly negated: boolean;
}

export interface TypeSet {
  readonly types: readonly string[];
  readonly negated: boolean;
}

export interface MarkSpec {
  readonly value: number;
  readonly mask: number;
  readonly negated: boolean;
}

/** A match module (`-m NAME ...`) with the parts podpath reasons about given structure. */
export type Match =
  | {
      readonly kind: "ports";
      readonly module: string;
      readonly sport?: PortsSpec;
      readonly dport?: PortsSpec;
      readonly options: readonly ModuleOption[];
    }
  | {
      readonly kind: "multiport";
      readonly module: "multiport";
      readonly sports?: PortsSpec;
      readonly dports?: PortsSpec;
      readonly ports?: PortsSpec;
      readonly options: readonly ModuleOption[];
    }
  | {
      readonly kind: "addrtype";
      readonly module: "addrtype";
      readonly src?: TypeSet;
      readonly dst?: TypeSet;
      readonly limitIfaceIn: boolean;
      readonly limitIfaceOut: boolean;
      readonly options: readonly ModuleOption[];
    }
  | {
      readonly kind: "comment";
      readonly module: "comment";
      readonly comment: string;
      readonly options: readonly ModuleOption[];
    }
  | {
      readonly kind: "mark";
      readonly module: "mark" | "connmark";
      readonly mark: MarkSpec;
      readonly options: readonly ModuleOption[];
    }
  | {
      readonly kind: "conntrack";
      readonly module: "conntrack" | "state";
      readonly ctstate?: TypeSet;
      readonly ctstatus?: TypeSet;
      readonly ctorigsrc?: AddrMatch;
      readonly ctorigdst?: AddrMatch;
      readonly ctreplsrc?: AddrMatch;
      readonly ctrepldst?: AddrMatch;
      readonly ctdir?: "ORIGINAL" | "REPLY";
      readonly options: readonly ModuleOption[];
    }
  | {
      readonly kind: "statistic";
      readonly module: "statistic";
      readonly mode: "random" | "nth";
      /** Chance of matching (for nth: 1/every). Already quantised as the kernel stores it. */
      readonly probability: number;
      readonly every?: number;
      readonly packet?: number;
      readonly negated: boolean;
      readonly options: readonly ModuleOption[];
    }
  | {
      /** A module podpath keeps as written: set, physdev, socket, owner, recent, ... */
      readonly kind: "opaque";
      readonly module: string;
      readonly options: readonly ModuleOption[];
    };

export interface MarkOp {
  /** The kernel's form: mark = (mark & ~mask) ^ value. */
  readonly value: number;
  readonly mask: number;
}

/** A NAT address/port range: `--to-source 1.2.3.4-1.2.3.9:100-200`. */
export interface NatRange {
  readonly from?: Ip;
  readonly to?: Ip;
  readonly ports?: PortRange;
}

export type Target =
  | { readonly kind: "verdict"; readonly name: "ACCEPT" | "DROP" | "RETURN" | "QUEUE" }
  | { readonly kind: "chain"; readonly name: string; readonly goto: boolean }
  | {
      readonly kind: "MASQUERADE";
      readonly name: "MASQUERADE";
      readonly toPorts?: PortRange;
      readonly random: boolean;
      readonly randomFully: boolean;
    }
  | {
      readonly kind: "SNAT" | "DNAT";
      readonly name: "SNAT" | "DNAT";
      readonly to?: NatRange;
      readonly random: boolean;
      readonly randomFully: boolean;
      readonly persistent: boolean;
    }
  | {
      readonly kind: "REDIRECT";
      readonly name: "REDIRECT";
      readonly toPorts?: PortRange;
      readonly random: boolean;
    }
  | { readonly kind: "NETMAP"; readonly name: "NETMAP"; readonly to: Cidr }
  | { readonly kind: "MARK"; readonly name: "MARK"; readonly op: MarkOp }
  | {
      readonly kind: "CONNMARK";
      readonly name: "CONNMARK";
      readonly mode: "set" | "save" | "restore";
      readonly op: MarkOp;
      readonly nfmask: number;
      readonly ctmask: number;
    }
  /** Any other target (LOG, REJECT, NFLOG, ...) with its options as written. */
  | {
      readonly kind: "extension";
      readonly name: string;
      readonly options: readonly ModuleOption[];
    };

/**
 * A part of a rule that the listing it was read from does not show: `iptables -L` without `-v`
 * hides the interfaces, without `-n` it prints names instead of addresses and ports, and it prints
 * some matches in a form that cannot be read back. What is hidden is unknown, never absent: the
 * evaluator treats a rule with hidden parts as undecidable on them.
 */
export interface HiddenPart {
  readonly part:
    | "in-interface"
    | "out-interface"
    | "source"
    | "destination"
    | "protocol"
    | "match"
    | "target";
  /** Plain English: what is hidden and which command shows it. */
  readonly why: string;
}

/**
 * One rule. The optional parts may also be present as undefined: the rules of a parsed dump
 * (iptables/saved-rule) read their parts on first use.
 */
export interface Rule {
  readonly table: TableName;
  readonly chain: string;
  /** 1-based position in its chain (as `iptables -L --line-numbers` counts). */
  readonly index: number;
  readonly source: SourceRef;
  readonly counters?: Counters | undefined;
  readonly protocol?: ProtoMatch | undefined;
  readonly src?: AddrMatch | undefined;
  readonly dst?: AddrMatch | undefined;
  readonly inIface?: IfaceMatch | undefined;
  readonly outIface?: IfaceMatch | undefined;
  /** `-f` / `! -f` (IPv4 only). */
  readonly fragment?: { readonly negated: boolean } | undefined;
  readonly matches: readonly Match[];
  /** Absent for a rule without `-j`/`-g` (it only counts packets). */
  readonly target?: Target | undefined;
  /** Parts the listing did not show (`iptables -L` forms); absent for iptables-save and -S. */
  readonly hidden?: readonly HiddenPart[] | undefined;
}

/** A chain. Those of a parsed dump (iptables/saved-chain) build their rules when first asked. */
export interface Chain {
  readonly name: string;
  readonly builtin: boolean;
  /** Built-in chains: ACCEPT or DROP; undefined when the dump does not show it (an excerpt). */
  policy?: string;
  counters?: Counters;
  /** Where the chain was declared (`:NAME ...` or `-N`/`-P`); undefined when only used. */
  declared?: SourceRef | undefined;
  readonly rules: Rule[];
  /**
   * True when the file may not show every rule of this chain (a `grep` of a dump, a paste cut
   * short): rules may be missing before, between or after the ones shown.
   */
  partial?: boolean;
  /**
   * With `partial`: the rules shown are the chain's first ones, whole (a paste cut short, not a
   * grep): only rules after the last one shown may be missing.
   */
  partialTail?: boolean;
}

export interface Table {
  readonly name: TableName;
  /** The `*nat` line; undefined for `iptables -S` output and excerpts. */
  readonly source?: SourceRef;
  readonly chains: Map<string, Chain>;
  /** Saw COMMIT (save format). */
  committed: boolean;
}

/** "save": iptables-save; "spec": `iptables -S`; "list": `iptables -L` in any of its forms. */
export type DumpFormat = "save" | "spec" | "list";

export interface IptablesDump {
  readonly file: string;
  readonly family: Family;
  /** "save": iptables-save; "spec": `iptables -S` (-P/-N/-A lines). */
  readonly format: DumpFormat;
  /** From the `# Generated by ...` header: "nf_tables", "legacy" or undefined (old versions). */
  readonly backend?: "nf_tables" | "legacy";
  readonly version?: string;
  /** A `# Warning: iptables-legacy tables present` line was seen: more rules live in legacy. */
  readonly legacyTablesPresent: boolean;
  readonly tables: Map<TableName, Table>;
  /**
   * Set when the file shows only part of the rules (no table header and no declarations, no
   * COMMIT, one chain listed, a grep): what it shows is evidence, what it does not show is
   * unknown. Chains that may be missing rules carry `partial`.
   */
  readonly excerpt?: { readonly reasons: readonly string[] } | undefined;
}
