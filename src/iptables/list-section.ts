/**
 * @module iptables/list-section — one listing of an `iptables -L` paste (the chains one command
 * printed): its table when the listing does not name it, and whether it shows that table whole or
 * only some chains, or was cut short (which chains may then be missing rules).
 */
import type { SourceRef } from "../model/types.ts";
import { BUILTIN_CHAINS, type Counters, type TableName } from "./dump.ts";
import type { PastedCommand } from "./list-command.ts";
import type { ListedRule } from "./list-rule.ts";

/** A chain as listed, before its table is known. */
export interface ListedChain {
  readonly name: string;
  readonly policy?: string;
  readonly counters?: Counters;
  /** `N references` of a user chain. */
  readonly references?: number;
  readonly declared: SourceRef;
  readonly rules: { readonly line: number; readonly text: string; readonly rule: ListedRule }[];
  partial: boolean;
  /** With `partial`: cut short, so only rules after the last one shown may be missing. */
  partialTail?: boolean;
}

/** One listing: the chains printed by one command. */
export interface Section {
  readonly command?: PastedCommand;
  readonly commandLine?: number;
  readonly chains: ListedChain[];
  /** The last line of this listing that was not read (cut mid-line?). */
  lastLineBroken: boolean;
}

const NAT_TARGETS = /^(?:MASQUERADE|SNAT|DNAT|REDIRECT|NETMAP)$/;

/** The table of a listing that does not name it, from its built-in chains and targets. */
export function inferTable(s: Section): { table: TableName; why: string } {
  const builtins = new Set(s.chains.filter((c) => c.policy !== undefined).map((c) => c.name));
  const has = (n: string) => builtins.has(n);
  const targets = s.chains.flatMap((c) => c.rules.map((r) => r.rule.target?.name ?? ""));
  const natTargets = targets.some((t) => NAT_TARGETS.test(t));
  if ((has("PREROUTING") || has("POSTROUTING")) && has("FORWARD"))
    return { table: "mangle", why: "its built-in chains are mangle's" };
  if (has("POSTROUTING") || (has("PREROUTING") && has("INPUT")))
    return { table: "nat", why: "its built-in chains are nat's" };
  if (has("PREROUTING") && !natTargets && targets.some((t) => t === "CT" || t === "NOTRACK"))
    return { table: "raw", why: "its built-in chains are raw's" };
  if (has("PREROUTING")) return { table: "nat", why: "it has PREROUTING and no raw-table targets" };
  if (natTargets) return { table: "nat", why: "it uses NAT targets" };
  if (builtins.size > 0)
    return { table: "filter", why: "its built-in chains are filter's (or security's)" };
  return { table: "filter", why: "nothing in it names another table (iptables' default table)" };
}

/**
 * Why this listing does not show its table whole (empty when it does), marking chains that may be
 * missing rules `partial`. A listing of the whole table starts with the table's first built-in
 * chain and shows every built-in chain, every chain jumped to, and as many jumps to each user chain
 * as its `N references` says; anything less is a listing of some chains, or a paste cut short.
 */
export function completeness(s: Section, table: TableName): string[] {
  const reasons: string[] = [];
  const last = s.chains[s.chains.length - 1]!;
  const filter = s.command?.filter;
  if (filter !== undefined) {
    for (const c of s.chains) c.partial = true;
    return [`the listing went through "| ${filter}", so any chain may be missing rules`];
  }
  if (s.lastLineBroken) {
    last.partial = true;
    last.partialTail = true;
    reasons.push(
      `its last line is not a whole rule (a paste cut short): chain ${last.name} may be missing rules`,
    );
  }
  const names = new Set(s.chains.map((c) => c.name));
  const only = s.command?.chain;
  const startsWhole = s.chains[0]!.name === BUILTIN_CHAINS[table][0];
  if (only !== undefined || !startsWhole) {
    const shown = [...names].join(", ");
    reasons.push(
      only !== undefined
        ? `only chain ${only} is listed (iptables -L ${only}); the other chains are not shown`
        : `only chains ${shown} are listed; the other chains are not shown`,
    );
    return reasons;
  }
  const missing: string[] = [];
  for (const b of BUILTIN_CHAINS[table]) if (!names.has(b)) missing.push(b);
  const jumps = new Map<string, number>();
  for (const c of s.chains) {
    for (const r of c.rules) {
      const t = r.rule.target;
      if (t?.kind !== "chain") continue;
      jumps.set(t.name, (jumps.get(t.name) ?? 0) + 1);
      if (!names.has(t.name) && !missing.includes(t.name)) missing.push(t.name);
    }
  }
  const short: string[] = [];
  for (const c of s.chains) {
    if (c.references !== undefined && (jumps.get(c.name) ?? 0) < c.references) short.push(c.name);
  }
  if (missing.length > 0 || short.length > 0) {
    if (!last.partial) {
      last.partial = true;
      last.partialTail = true;
      const parts = [
        missing.length > 0 ? `chains ${missing.slice(0, 5).join(", ")} are not shown` : "",
        short.length > 0
          ? `fewer rules jump to ${short.slice(0, 5).join(", ")} than iptables counted references`
          : "",
      ].filter((x) => x !== "");
      reasons.push(
        `the listing looks cut short (${parts.join("; ")}): chain ${last.name} may be missing rules`,
      );
    }
  }
  return reasons;
}
