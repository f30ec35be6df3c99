/**
 * @module iptables/nat-trace — the question put to the nat-table evaluator (a {@link Flow} and the
 * node it crosses, {@link NatContext}) and its answer, a {@link NatTrace} citing every rule it used.
 */

import type { SourceRef } from "../model/types.ts";
import type { Cidr, Ip } from "../net/cidr.ts";
import type { PortRange } from "./dump.ts";

/** Where the packet comes from: a pod on this node, the node itself, or forwarded from elsewhere. */
export type Origin = "pod" | "host" | "forwarded";

export type CtState = "NEW" | "ESTABLISHED" | "RELATED" | "INVALID" | "UNTRACKED";

/** The first packet of a connection, as the nat table sees it. */
export interface Flow {
  readonly src: Ip;
  readonly dst: Ip;
  /** `tcp`, `udp`, `icmp`, `sctp`, ... or a protocol number as text. */
  readonly proto: string;
  readonly sport?: number;
  readonly dport?: number;
  readonly origin: Origin;
  /** Interface the packet arrives on (pod/forwarded); unknown makes `-i` rules undecidable. */
  readonly inIface?: string;
  /** Interface the packet leaves by (from routing); unknown makes `-o` rules undecidable. */
  readonly outIface?: string;
  /**
   * The packet mark on entry. Default 0: a packet crossing a veth or arriving from a NIC has its
   * mark cleared; when the dump's mangle or raw table can set marks the default is "unknown".
   */
  readonly mark?: number;
  /** Default NEW (the nat table is consulted only for the first packet of a connection). */
  readonly ctstate?: CtState;
}

export interface NodeInterface {
  readonly name: string;
  /** The primary address MASQUERADE picks on this interface. */
  readonly primary?: Ip;
  /** All addresses with their prefix lengths (for addrtype LOCAL and subnet broadcasts). */
  readonly addresses?: readonly { readonly ip: Ip; readonly prefix: number }[];
}

/** What the evaluator knows about the node beyond its rules. */
export interface NatContext {
  /** The node's own addresses (addrtype LOCAL). Absent: addrtype LOCAL cannot be decided. */
  readonly localAddresses?: readonly (Ip | Cidr)[];
  readonly interfaces?: readonly NodeInterface[];
  /** The Node's InternalIP: MASQUERADE's source when the outgoing interface is not known. */
  readonly nodeInternalIp?: Ip;
  /** Chains with at least this many rules get an index on the destination. Default 16. */
  readonly indexThreshold?: number;
  /** Give up (cannot-decide) beyond this many statistic branches. Default 512. */
  readonly maxBranches?: number;
}

export type NatStepKind =
  | "enter"
  | "jump"
  | "goto"
  | "return"
  | "policy"
  | "accept"
  | "mark"
  | "dnat"
  | "redirect"
  | "snat"
  | "masquerade"
  | "netmap"
  | "drop"
  | "branch"
  | "log"
  | "cannot-decide";

export interface NatStep {
  readonly kind: NatStepKind;
  readonly chain: string;
  /** 1-based rule position in `chain`; 0 for a chain's policy or entry. */
  readonly ruleIndex: number;
  readonly source: SourceRef;
  readonly note: string;
}

export type NatDecision = "masquerade" | "snat" | "keep" | "dropped" | "cannot-decide" | "branches";

export interface SourceOut {
  /** The source address the packet leaves with; absent when it cannot be known. */
  readonly ip?: Ip;
  /** Last address when SNAT maps to a range (the kernel picks one per connection). */
  readonly rangeEnd?: Ip;
  readonly ports?: PortRange;
  readonly how:
    | "unchanged"
    | "interface-primary"
    | "to-source"
    | "netmap"
    | "node-internal-ip-fallback"
    | "unknown";
  readonly note: string;
}

export interface DstOut {
  readonly ip: Ip;
  readonly port?: number;
  readonly how: "unchanged" | "dnat" | "redirect" | "netmap";
}

export interface Undecided {
  readonly chain: string;
  readonly ruleIndex: number;
  readonly rule: SourceRef;
  readonly reason: string;
}

export interface NatBranch {
  readonly probability: number;
  readonly trace: NatTrace;
}

export interface NatTrace {
  readonly flow: Flow;
  readonly steps: readonly NatStep[];
  readonly decision: NatDecision;
  /** For "branches": set only when every branch leaves with the same source. */
  readonly sourceOut?: SourceOut;
  readonly dstOut?: DstOut;
  /** The rule that decided the source (MASQUERADE/SNAT/ACCEPT), or the policy's chain line. */
  readonly decidingRule?: SourceRef;
  readonly undecided?: Undecided;
  /** `statistic` forks: each branch with its probability and its own complete trace. */
  readonly branches?: readonly NatBranch[];
  /** Assumptions and facts the answer rests on, in plain English. */
  readonly notes: readonly string[];
}

/** A compiled nat table: evaluate as many flows as needed. */
export interface NatEvaluator {
  evaluate(flow: Flow): NatTrace;
}
