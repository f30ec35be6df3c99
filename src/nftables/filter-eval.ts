/**
 * @module nftables/filter-eval — the filter verdict of one hook (input, forward, output, ...) for
 * a packet, from an nftables ruleset: every table's filter base chains of that hook in priority
 * order; accept ends a base chain, drop and reject end the packet, the policy decides at a base
 * chain's end. Cited like the nat walk; unknown facts and random numbers fork it.
 */

import { addressKnowledge } from "../iptables/nat-match.ts";
import type { Assumption, Flow, NatContext, NatStep } from "../iptables/nat-trace.ts";
import type { SourceRef } from "../model/types.ts";
import type { NftRuleset } from "./model.ts";
import { marksSetOutsideNat, packetOf } from "./nat-eval.ts";
import { type NftHook, NftWalker } from "./walk.ts";

export type FilterDecision = "accept" | "drop" | "reject" | "cannot-decide";

export interface FilterTrace {
  readonly decision: FilterDecision | "branches";
  readonly steps: readonly NatStep[];
  /** The rule (or the chain, for a policy) that decided. */
  readonly decidingRule?: SourceRef;
  /** `reject with ...` as written (absent: the default, ICMP port unreachable). */
  readonly rejectWith?: string;
  readonly reason?: string;
  readonly assumptions?: readonly Assumption[];
  /** For "branches": each outcome with its probability (1 for an unknown fact's outcome). */
  readonly branches?: readonly { readonly probability: number; readonly trace: FilterTrace }[];
}

export interface NftFilterEvaluator {
  /**
   * The verdict at `hook` for the flow's packet as it is there: `dnatted` when a DNAT changed
   * its destination before (the flow then carries the new destination).
   */
  verdict(flow: Flow, hook: NftHook, opts?: { readonly dnatted?: boolean }): FilterTrace;
}

/**
 * Compiles a ruleset's filter chains.
 *
 * @example
 * compileNftFilter(rs, ctx).verdict({ src, dst, proto: "tcp", dport: 80, origin: "pod",
 *   inIface: "cbr0", outIface: "eth0" }, "forward").decision // "reject"
 */
export function compileNftFilter(rs: NftRuleset, ctx: NatContext = {}): NftFilterEvaluator {
  const ifaceAddrs = (ctx.interfaces ?? []).flatMap((i) => i.addresses ?? []);
  const k = addressKnowledge(ctx.localAddresses, ifaceAddrs, ctx.addressFacts);
  const preset = marksSetOutsideNat(rs);
  // one walker per ruleset: it keeps each hook's base chains (a kube-proxy table has 10k chains)
  const walker = new NftWalker(rs, k);
  return {
    verdict(flow, hook, opts = {}) {
      walker.walks = 0;
      const pkt = packetOf(flow, preset);
      pkt.dnatted = opts.dnatted === true;
      // the devices a hook knows (nft_meta breaks on the others)
      pkt.iif = hook === "output" || hook === "postrouting" ? "" : flow.inIface;
      pkt.oif = hook === "prerouting" || hook === "input" ? "" : flow.outIface;
      if (flow.origin === "host") pkt.iif = "";
      const ends = walker.runHook(
        { pkt, frames: [], steps: [], probability: 1, assumptions: [] },
        hook,
        "filter",
      );
      const traces: FilterTrace[] = ends.map((e) => ({
        decision: e.kind === "nat" ? "accept" : e.kind === "undecided" ? "cannot-decide" : e.kind,
        steps: e.w.steps,
        decidingRule: e.ref,
        ...(e.rejectWith ? { rejectWith: e.rejectWith } : {}),
        ...(e.reason ? { reason: e.reason } : {}),
        ...(e.w.assumptions.length > 0 ? { assumptions: e.w.assumptions } : {}),
      }));
      if (traces.length === 1) return traces[0]!;
      const first = traces[0]!;
      if (traces.every((t) => t.decision === first.decision && t.decision !== "cannot-decide")) {
        return {
          ...first,
          branches: traces.map((trace, i) => ({ probability: ends[i]!.w.probability, trace })),
        };
      }
      return {
        decision: "branches",
        steps: [],
        branches: traces.map((trace, i) => ({ probability: ends[i]!.w.probability, trace })),
      };
    },
  };
}
