/**
 * @module iptables/render — prints rules and dumps back in iptables-save's canonical form, so a
 * parsed rule can be shown, compared with what the kernel holds, or fed to iptables-restore.
 */
import { formatCidr } from "../net/cidr.ts";
import type { Chain, IptablesDump, Match, ModuleOption, Rule, Table } from "./dump.ts";
import { SAVE_STRING_OPTIONS } from "./match-spec.ts";
import { targetOptions } from "./target-spec.ts";
import { quoteArg, quoteSaveString } from "./tokenize.ts";

function renderOptions(options: readonly ModuleOption[], out: string[]): void {
  for (const o of options) {
    if (o.negated) out.push("!");
    out.push(o.name);
    const saveString = SAVE_STRING_OPTIONS.has(o.name);
    for (const v of o.values) out.push(saveString ? quoteSaveString(v) : quoteArg(v));
  }
}

function renderMatch(m: Match, out: string[]): void {
  out.push("-m", m.module);
  renderOptions(m.options, out);
}

export interface RenderRuleOptions {
  /** Print `[packets:bytes]` before `-A` when the rule has counters (iptables-save -c). */
  readonly counters?: boolean;
}

/**
 * One rule as iptables-save prints it: `-A CHAIN`, then `-s -d -i -o -p -f` (each with its `!`),
 * the match modules in order with their options in the module's own order, then `-j`/`-g` and the
 * target's options.
 *
 * @example renderRule(rule) // '-A IP-MASQ -d 10.0.0.0/8 -m comment --comment "ip-masq: ..." -j RETURN'
 */
export function renderRule(rule: Rule, options: RenderRuleOptions = {}): string {
  const out: string[] = [];
  if (options.counters && rule.counters)
    out.push(`[${rule.counters.packets}:${rule.counters.bytes}]`);
  out.push("-A", rule.chain);
  if (rule.src) {
    if (rule.src.negated) out.push("!");
    out.push("-s", formatCidr(rule.src.cidr));
  }
  if (rule.dst) {
    if (rule.dst.negated) out.push("!");
    out.push("-d", formatCidr(rule.dst.cidr));
  }
  for (const [flag, iface] of [
    ["-i", rule.inIface],
    ["-o", rule.outIface],
  ] as const) {
    if (!iface) continue;
    if (iface.negated) out.push("!");
    out.push(flag, iface.name + (iface.wildcard ? "+" : ""));
  }
  if (rule.protocol) {
    if (rule.protocol.negated) out.push("!");
    out.push("-p", rule.protocol.name);
  }
  if (rule.fragment) {
    if (rule.fragment.negated) out.push("!");
    out.push("-f");
  }
  for (const m of rule.matches) renderMatch(m, out);
  const t = rule.target;
  if (t) {
    if (t.kind === "chain") out.push(t.goto ? "-g" : "-j", t.name);
    else {
      out.push("-j", t.name);
      renderOptions(targetOptions(t), out);
    }
  }
  return out.join(" ");
}

function renderChainLine(c: Chain, counters: boolean): string {
  const policy = c.builtin ? (c.policy ?? "ACCEPT") : "-";
  const cnt = c.counters && counters ? c.counters : { packets: 0n, bytes: 0n };
  return `:${c.name} ${policy} [${cnt.packets}:${cnt.bytes}]`;
}

/** One table as iptables-save prints it (`*name`, chain lines, rules, COMMIT). */
export function renderTable(table: Table, options: RenderRuleOptions = {}): string {
  const lines = [`*${table.name}`];
  const chains = [...table.chains.values()];
  const builtins = chains.filter((c) => c.builtin);
  const user = chains
    .filter((c) => !c.builtin)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const c of [...builtins, ...user]) lines.push(renderChainLine(c, options.counters ?? false));
  for (const c of [...builtins, ...user])
    for (const r of c.rules) lines.push(renderRule(r, options));
  lines.push("COMMIT");
  return `${lines.join("\n")}\n`;
}

/** A whole dump in iptables-save form, accepted by iptables-restore. */
export function renderDump(dump: IptablesDump, options: RenderRuleOptions = {}): string {
  return [...dump.tables.values()].map((t) => renderTable(t, options)).join("");
}
