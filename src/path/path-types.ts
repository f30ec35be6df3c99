/**
 * @module path/path-types — the question put to a whole-path evaluator (a packet entering a node)
 * and its answer: every step it takes through the netfilter hooks and the routing decision, each
 * cited, and where it ends. The iptables evaluator (path/evaluate-path) and an nftables one answer
 * in this same shape.
 */
import type { Assumption, CtState, UnknownFact } from "../iptables/nat-trace.ts";
import type { SourceRef } from "../model/types.ts";
import type { Ip } from "../net/cidr.ts";

/**
 * Where the packet comes from: a pod on this node (it arrives on the pod's interface), another
 * host (forwarded or delivered), or the node's own process (the OUTPUT hooks).
 */
export type PathOrigin = "pod" | "forwarded" | "host";

/** The packet as it enters the node. An absent field is unknown, never "none". */
export interface PathPacket {
  readonly src: Ip;
  readonly dst: Ip;
  /** `tcp`, `udp`, `icmp`, ... */
  readonly proto: string;
  readonly sport?: number;
  readonly dport?: number;
  readonly origin: PathOrigin;
  /** The interface it arrives on (pod/forwarded); from the routes toward `src` when absent. */
  readonly inIface?: string;
  /** Its mark on entry (0 unless something outside the rules set it). */
  readonly mark?: number;
  /**
   * The connection's state: NEW (the default: the first packet of a connection), ESTABLISHED,
   * RELATED. `"unknown"`: rules that test it are followed both ways.
   */
  readonly ctstate?: CtState | "unknown";
}

/** The netfilter hooks in the order a packet meets them. */
export type Hook = "PREROUTING" | "INPUT" | "FORWARD" | "OUTPUT" | "POSTROUTING";

/** ICMP answers a REJECT can send (`--reject-with`), plus `tcp-reset`. */
export type RejectWith =
  | "icmp-net-unreachable"
  | "icmp-host-unreachable"
  | "icmp-port-unreachable"
  | "icmp-proto-unreachable"
  | "icmp-net-prohibited"
  | "icmp-host-prohibited"
  | "icmp-admin-prohibited"
  | "tcp-reset"
  | "icmp6-no-route"
  | "icmp6-adm-prohibited"
  | "icmp6-addr-unreachable"
  | "icmp6-port-unreachable"
  | "icmp6-policy-fail"
  | "icmp6-reject-route";

/** One cited step of the path. */
export type PathStep =
  | {
      /** A table's hook chain is walked (`filter FORWARD`). */
      readonly kind: "hook";
      readonly table: string;
      readonly hook: Hook;
      readonly source: SourceRef;
    }
  | {
      /** A rule that matched and did not end the walk: jump, goto, RETURN, MARK, LOG... */
      readonly kind: "rule";
      readonly table: string;
      readonly chain: string;
      readonly ruleIndex: number;
      readonly note: string;
      readonly source: SourceRef;
    }
  | {
      /** The destination rewritten (DNAT, REDIRECT) in nat PREROUTING/OUTPUT. */
      readonly kind: "dnat";
      readonly chain: string;
      readonly ruleIndex: number;
      readonly to: Ip;
      readonly port?: number;
      readonly note: string;
      readonly source: SourceRef;
    }
  | {
      /** The routing decision: the `ip rule` that chose the table, the route found there. */
      readonly kind: "route";
      readonly dst: Ip;
      readonly table: string;
      readonly routeType: string;
      readonly dev?: string;
      readonly via?: Ip;
      readonly src?: Ip;
      /** The `ip rule` line that sent the lookup to `table`, when policy rules were read. */
      readonly rule?: SourceRef;
      /** What the main table alone says, when policy routing chose another device or gateway. */
      readonly mainTable?: {
        readonly dev?: string;
        readonly via?: Ip;
        readonly source?: SourceRef;
      };
      readonly note: string;
      readonly source: SourceRef;
    }
  | {
      /** A verdict of filter/mangle/raw: a rule's ACCEPT, DROP, REJECT, or the chain's policy. */
      readonly kind: "verdict";
      readonly table: string;
      readonly chain: string;
      /** 0 for the chain's policy. */
      readonly ruleIndex: number;
      readonly verdict: "ACCEPT" | "DROP" | "REJECT";
      readonly rejectWith?: RejectWith;
      readonly note: string;
      readonly source: SourceRef;
    }
  | {
      /** The source rewritten (MASQUERADE, SNAT) in nat POSTROUTING, or kept. */
      readonly kind: "snat";
      readonly decision: "masquerade" | "snat" | "keep";
      readonly from: Ip;
      readonly to?: Ip;
      readonly note: string;
      readonly source: SourceRef;
    }
  | {
      /** A fact the evidence does not state, taken one way on this outcome. */
      readonly kind: "assume";
      readonly fact: string;
      readonly holds: boolean;
      readonly source: SourceRef;
    };

/** Where the packet ends on this node. */
export type PathVerdict =
  | { readonly kind: "delivered"; readonly dst: Ip; readonly port?: number }
  | {
      readonly kind: "forwarded";
      readonly dev?: string;
      readonly via?: Ip;
      /** The source it leaves with; undefined when the nat step cannot tell. */
      readonly src?: Ip;
      readonly dst: Ip;
      readonly port?: number;
    }
  | {
      readonly kind: "dropped";
      readonly by: SourceRef;
      readonly table: string;
      readonly chain: string;
    }
  | {
      readonly kind: "rejected";
      readonly with: RejectWith;
      readonly by: SourceRef;
      readonly table: string;
      readonly chain: string;
    }
  /** Routing refuses: no route, or a blackhole/unreachable/prohibit route or rule. */
  | {
      readonly kind: "unroutable";
      readonly how: "no-route" | "blackhole" | "unreachable" | "prohibit";
      readonly by?: SourceRef;
    }
  | {
      readonly kind: "undecided";
      readonly reason: string;
      readonly at?: SourceRef;
      readonly unknowns: readonly UnknownFact[];
    };

/** One way the packet can go: its steps, its end, what it takes for true, and its chance. */
export interface PathOutcome {
  readonly steps: readonly PathStep[];
  readonly verdict: PathVerdict;
  /** Unknown facts taken one way on this outcome (empty when the evidence decides). */
  readonly assumptions: readonly Assumption[];
  /** The chance of the `statistic` branches taken (1 without any). */
  readonly probability: number;
  /** The destination after DNAT (the original when nothing rewrote it). */
  readonly dstOut: Ip;
  readonly dportOut?: number;
  /** local: delivered to the node; forward: routed through; output: sent by the node. */
  readonly kind: "local" | "forward" | "output";
}

/** The whole answer: every outcome (one when nothing forks). */
export interface PathResult {
  readonly packet: PathPacket;
  readonly outcomes: readonly PathOutcome[];
  /** Assumptions and facts the answer rests on, in plain English. */
  readonly notes: readonly string[];
}

/** A node's rules compiled once; evaluate as many packets as needed. */
export interface PathEvaluator {
  evaluate(packet: PathPacket): PathResult;
}
