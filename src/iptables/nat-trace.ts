/**
 * @module iptables/nat-trace — the question put to the nat-table evaluator (a {@link Flow} and the
 * node it crosses, {@link NatContext}) and its answer, a {@link NatTrace} citing every rule it used.
 */

import type { SourceRef } from "../model/types.ts";
import type { Cidr, Ip } from "../net/cidr.ts";
import type { PortRange } from "./dump.ts";
import type { IpsetDump } from "./ipset-parser.ts";

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
  /**
   * Whether the destination is the node's own, when the question itself says so (a packet the
   * node forwards out of an interface is not addressed to it). Absent: from the node's addresses
   * and the context's facts, else both outcomes are followed.
   */
  readonly dstLocal?: boolean;
}

export interface NodeInterface {
  readonly name: string;
  /** The primary address MASQUERADE picks on this interface. */
  readonly primary?: Ip;
  /** The `ip addr` line of {@link primary}. */
  readonly primarySource?: SourceRef;
  /** All addresses with their prefix lengths (for addrtype LOCAL and subnet broadcasts). */
  readonly addresses?: readonly { readonly ip: Ip; readonly prefix: number }[];
}

/**
 * A fact about addresses that another piece of evidence states, for matches the rules alone
 * cannot decide when the node's full address list (`ip addr`) is not in the snapshot: the Node's
 * InternalIP and the `src` of its routes are its own, a far site's prefixes and pod addresses are
 * not.
 */
export interface AddressFact {
  readonly cidr: Cidr;
  /** True: the node owns these addresses (addrtype LOCAL). False: they are not the node's. */
  readonly local: boolean;
  readonly source: SourceRef;
  /** Where the fact comes from, in words: "the Node's InternalIP", "onprem-dc1's prefix". */
  readonly what: string;
}

/** What would decide an unknown fact: the snapshot file that holds it and the command. */
export interface Decider {
  readonly file?: string;
  readonly command: string;
}

/** A fact the evidence does not state; the evaluation follows both of its outcomes. */
export interface UnknownFact {
  /** The fact as a statement: "10.20.30.40 is one of the node's own addresses". */
  readonly fact: string;
  /** The rule (or chain) whose outcome depends on it. */
  readonly rule: SourceRef;
  /** Why it is unknown, as the match reads. */
  readonly reason: string;
  readonly decide: Decider;
}

/** An unknown fact taken one way on one branch of the evaluation. */
export interface Assumption extends UnknownFact {
  readonly holds: boolean;
}

/** What the evaluator knows about the node beyond its rules. */
export interface NatContext {
  /**
   * The node's own addresses, complete (addrtype LOCAL), as `ip addr` shows them. Absent: the
   * evaluator uses {@link addressFacts} and follows both outcomes of what they do not settle.
   */
  readonly localAddresses?: readonly (Ip | Cidr)[];
  /** Facts about single addresses or blocks from other evidence, each cited where it is used. */
  readonly addressFacts?: readonly AddressFact[];
  readonly interfaces?: readonly NodeInterface[];
  /** The Node's InternalIP: MASQUERADE's source when the outgoing interface is not known. */
  readonly nodeInternalIp?: Ip;
  /** The node's IP sets (`ipset save` / `ipset list`): decide `-m set --match-set`. */
  readonly ipsets?: IpsetDump;
  /** Where the node's `ipset save` belongs in the snapshot, named when the sets are not given. */
  readonly ipsetFile?: string;
  /** Chains with at least this many rules get an index on the destination. Default 16. */
  readonly indexThreshold?: number;
  /** Give up (cannot-decide) beyond this many branches (statistic or unknown facts). Default 512. */
  readonly maxBranches?: number;
  /**
   * Keep the last evaluation's first hook (PREROUTING) outcomes: the same forwarded flow asked
   * again with only another outgoing interface (the route after DNAT) walks only the second hook
   * again. The answers are the same; a caller that asks each flow twice asks for it.
   */
  readonly reuseFirstHook?: boolean;
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
  /** The chance of the statistic matches on this branch (1 without any), given its assumptions. */
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
  /**
   * Forks: `statistic` branches with their probabilities, and both outcomes of every fact the
   * evidence does not state (each branch's trace lists its `assumptions`), each with its own
   * complete trace.
   */
  readonly branches?: readonly NatBranch[];
  /** On a branch's trace: the unknown facts this branch takes one way. */
  readonly assumptions?: readonly Assumption[];
  /**
   * Unknown facts whose outcomes all lead to this same answer (same decision, source, deciding
   * rule and end): the answer holds without them.
   */
  readonly unknownButSettled?: readonly UnknownFact[];
  /** Facts from other evidence ({@link NatContext.addressFacts}) that decided a match. */
  readonly factsUsed?: readonly AddressFact[];
  /** "local": the destination is the node's own, the packet is delivered (nat INPUT). */
  readonly delivery?: "local" | "forward";
  /** Assumptions and facts the answer rests on, in plain English. */
  readonly notes: readonly string[];
}

/** A compiled nat table: evaluate as many flows as needed. */
export interface NatEvaluator {
  evaluate(flow: Flow): NatTrace;
}
