/**
 * @module agents/wireguard/hooks — the iptables commands of a wg-quick config's PostUp/PreUp
 * hooks, read with the project's iptables argument reader (`iptables/rule-args.ts`): which of
 * them add a source NAT (MASQUERADE/SNAT) in nat POSTROUTING, and for which sources. wg-quick
 * replaces `%i` with the interface name before running a hook.
 */

import { parseRuleArgs, type RuleParts } from "../../iptables/rule-args.ts";
import { tokenize } from "../../iptables/tokenize.ts";
import type { SourceRef } from "../../model/types.ts";
import { type Cidr, contains } from "../../net/cidr.ts";
import type { WgHook } from "./config.ts";

/** One iptables command written in a hook, read. */
export interface HookRule {
  readonly hook: WgHook["hook"];
  readonly command: string;
  readonly table: string;
  /** `-A`, `-I`, `-D` … as written. */
  readonly op: string;
  readonly chain: string;
  readonly parts: RuleParts;
  readonly problems: readonly string[];
  readonly source: SourceRef;
}

const BINARIES = /^(?:\S*\/)?(iptables|ip6tables)(?:-legacy|-nft)?$/;
const OPS = new Set(["-A", "--append", "-I", "--insert", "-D", "--delete"]);

/** The iptables commands among a config's hooks (other commands are left alone). */
export function hookRules(hooks: readonly WgHook[], iface = "wg0"): HookRule[] {
  const out: HookRule[] = [];
  for (const h of hooks) {
    const { tokens, quoted } = tokenize(h.command.replaceAll("%i", iface));
    const bin = tokens.findIndex((t) => BINARIES.test(t));
    if (bin < 0) continue;
    const family = /ip6tables/.test(tokens[bin]!) ? 6 : 4;
    let table = "filter";
    let op: string | undefined;
    let chain: string | undefined;
    let from = -1;
    for (let i = bin + 1; i < tokens.length; i++) {
      const t = tokens[i]!;
      if ((t === "-t" || t === "--table") && i + 1 < tokens.length) {
        table = tokens[++i]!;
      } else if (OPS.has(t) && i + 1 < tokens.length) {
        op = t;
        chain = tokens[++i]!;
        // `-I CHAIN 1`: a rule number before the arguments
        if (/^\d+$/.test(tokens[i + 1] ?? "")) i++;
        from = i + 1;
        break;
      } else if (t.startsWith("-") && !["-w", "--wait", "-v"].includes(t)) {
        break; // -N, -F, -P …: not a rule
      }
    }
    if (op === undefined || chain === undefined) continue;
    const problems: string[] = [];
    // arguments before -A (`iptables -A X -t nat`) are rare; -t is read above either way
    const args = tokens.slice(from);
    const quotedArgs = quoted.filter((q) => q >= from).map((q) => q - from);
    const tIdx = args.findIndex((a) => a === "-t" || a === "--table");
    if (tIdx >= 0 && tIdx + 1 < args.length) table = args[tIdx + 1]!;
    const clean = tIdx >= 0 ? [...args.slice(0, tIdx), ...args.slice(tIdx + 2)] : args;
    const parts = parseRuleArgs(clean, tIdx >= 0 ? [] : quotedArgs, 0, family, problems);
    out.push({
      hook: h.hook,
      command: h.command,
      table,
      op,
      chain,
      parts,
      problems,
      source: h.source,
    });
  }
  return out;
}

/**
 * The hook rule that source-NATs every address of `pool` on its way out (`PostUp = iptables -t
 * nat -A POSTROUTING -s POOL -o eth0 -j MASQUERADE`, or with no `-s`), added when the tunnel
 * comes up. A `-D` (PostDown) removes it and does not count.
 */
export function hookMasquerade(rules: readonly HookRule[], pool: Cidr): HookRule | undefined {
  return rules.find((r) => {
    if (r.hook === "PreDown" || r.hook === "PostDown") return false;
    if (r.op === "-D" || r.op === "--delete") return false;
    if (r.table !== "nat" || r.chain !== "POSTROUTING") return false;
    const kind = r.parts.target?.kind;
    if (kind !== "MASQUERADE" && kind !== "SNAT") return false;
    const src = r.parts.src;
    if (!src) return true;
    return !src.negated && src.cidr.family === pool.family && contains(src.cidr, pool);
  });
}
