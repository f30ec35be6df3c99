/**
 * @module checks/vpn-masquerade — does the VPN pod's nat table rewrite a client-pool source on its
 * way out of eth0? Walks `POSTROUTING` in order (jumps, gotos, RETURN) for one client address.
 *
 * Kept to what the return-path question needs rather than a full nat evaluator: addresses,
 * interfaces, protocol and comments are decided; any other match leaves the answer "unknown" at
 * that rule rather than guessing (it is named in the result).
 */

import type { IptablesDump, Rule } from "../iptables/dump.ts";
import type { SourceRef } from "../model/types.ts";
import { contains, type Ip } from "../net/cidr.ts";

export type MasqueradeVerdict =
  | { readonly kind: "masqueraded"; readonly rule: Rule; readonly via: readonly Rule[] }
  | { readonly kind: "not-masqueraded"; readonly last?: SourceRef }
  | { readonly kind: "unknown"; readonly rule: Rule; readonly why: string }
  | { readonly kind: "no-nat-table" };

export interface PacketOut {
  readonly src: Ip;
  readonly dst: Ip;
  readonly outIface: string;
}

function ifaceMatches(
  m: { name: string; wildcard: boolean; negated: boolean },
  iface: string,
): boolean {
  const hit = m.wildcard ? iface.startsWith(m.name) : iface === m.name;
  return hit !== m.negated;
}

/** undefined: the rule has a match this walk does not decide. */
function ruleMatches(r: Rule, p: PacketOut): boolean | string {
  if (r.inIface) return false; // POSTROUTING has no input interface
  if (r.outIface && !ifaceMatches(r.outIface, p.outIface)) return false;
  if (r.src && contains(r.src.cidr, p.src) === r.src.negated) return false;
  if (r.dst && contains(r.dst.cidr, p.dst) === r.dst.negated) return false;
  if (r.protocol && !r.protocol.negated && r.protocol.name !== "all") {
    return `matches only protocol ${r.protocol.name}`;
  }
  for (const m of r.matches) {
    if (m.kind === "comment") continue;
    if (
      m.kind === "addrtype" ||
      m.kind === "mark" ||
      m.kind === "opaque" ||
      m.kind === "conntrack"
    ) {
      return `-m ${m.module}`;
    }
    if (m.kind === "ports" || m.kind === "multiport") return `matches ports (-m ${m.module})`;
  }
  return true;
}

/** Walks nat POSTROUTING for a packet leaving the pod. */
export function masqueradeOf(dump: IptablesDump | undefined, p: PacketOut): MasqueradeVerdict {
  const nat = dump?.tables.get("nat");
  if (!nat) return { kind: "no-nat-table" };
  const visit = (chainName: string, via: Rule[], depth: number): MasqueradeVerdict | "return" => {
    const chain = nat.chains.get(chainName);
    if (!chain || depth > 32) return "return";
    for (const r of chain.rules) {
      const m = ruleMatches(r, p);
      if (m === false) continue;
      if (typeof m === "string") {
        // Only undecidable when the rule would change the answer.
        const t = r.target;
        if (
          t &&
          (t.kind === "MASQUERADE" ||
            t.kind === "SNAT" ||
            t.kind === "chain" ||
            (t.kind === "verdict" && t.name !== "QUEUE"))
        ) {
          return { kind: "unknown", rule: r, why: m };
        }
        continue;
      }
      const t = r.target;
      if (!t) continue;
      if (t.kind === "MASQUERADE" || t.kind === "SNAT")
        return { kind: "masqueraded", rule: r, via };
      if (t.kind === "verdict") {
        if (t.name === "RETURN") return "return";
        return { kind: "not-masqueraded", last: r.source };
      }
      if (t.kind === "chain") {
        const inner = visit(t.name, [...via, r], depth + 1);
        if (inner !== "return") return inner;
        if (t.goto) return "return";
      }
    }
    return "return";
  };
  const v = visit("POSTROUTING", [], 0);
  return v === "return" ? { kind: "not-masqueraded" } : v;
}
