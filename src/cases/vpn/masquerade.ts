/**
 * @module cases/vpn/masquerade — does the VPN pod's nat table rewrite a client-pool source on its
 * way out of eth0? One forwarded flow (tun0 → eth0) through the shared nat evaluator
 * (`iptables/nat-eval.ts`), reduced to the return-path question.
 */

import type { IptablesDump } from "../../iptables/dump.ts";
import { compileNat } from "../../iptables/nat-eval.ts";
import type { SourceRef } from "../../model/types.ts";
import type { Ip } from "../../net/cidr.ts";

export type MasqueradeVerdict =
  | { readonly kind: "masqueraded"; readonly source: SourceRef }
  | { readonly kind: "not-masqueraded"; readonly last?: SourceRef }
  | { readonly kind: "unknown"; readonly source: SourceRef; readonly why: string }
  | { readonly kind: "no-nat-table" };

export interface PacketOut {
  readonly src: Ip;
  readonly dst: Ip;
  readonly outIface: string;
  /** The tunnel device the client packet arrives on. Default tun0. */
  readonly inIface?: string;
}

/** The nat decision for a client packet the pod forwards. */
export function masqueradeOf(dump: IptablesDump | undefined, p: PacketOut): MasqueradeVerdict {
  if (!dump?.tables.get("nat")) return { kind: "no-nat-table" };
  const trace = compileNat(dump).evaluate({
    src: p.src,
    dst: p.dst,
    proto: "tcp",
    dport: 80,
    origin: "forwarded",
    inIface: p.inIface ?? "tun0",
    outIface: p.outIface,
    // the question is about a packet the pod forwards: it is not addressed to the pod
    dstLocal: false,
  });
  switch (trace.decision) {
    case "masquerade":
    case "snat":
      return trace.decidingRule
        ? { kind: "masqueraded", source: trace.decidingRule }
        : { kind: "unknown", source: { file: dump.file, line: 1 }, why: "no deciding rule" };
    case "keep":
      return trace.decidingRule
        ? { kind: "not-masqueraded", last: trace.decidingRule }
        : { kind: "not-masqueraded" };
    case "dropped":
      return trace.decidingRule
        ? { kind: "not-masqueraded", last: trace.decidingRule }
        : { kind: "not-masqueraded" };
    default:
      return {
        kind: "unknown",
        source: trace.undecided?.rule ?? trace.decidingRule ?? { file: dump.file, line: 1 },
        why: trace.undecided?.reason ?? trace.notes.join("; "),
      };
  }
}
