/**
 * @module iptables/list-parser — reads `iptables -L` / `ip6tables -L` output in every form people
 * paste (`-n`, `-v`, `-x`, `--line-numbers`, one chain or all, several tables one after another)
 * into the same {@link IptablesDump} the iptables-save reader gives, with `format: "list"`. Each rule
 * cites its line. What a form does not show is kept as unknown: interfaces without `-v`, names
 * without `-n` and match text podpath cannot read back become `rule.hidden`; chains a listing does
 * not show, or may show only in part, make the dump an `excerpt` and the chain `partial`.
 */
import type { Diagnostic, Parsed } from "../model/types.ts";
import type { Family } from "../net/cidr.ts";
import {
  BUILTIN_CHAINS,
  type Chain,
  type Counters,
  type IptablesDump,
  type Rule,
  type Table,
  type TableName,
} from "./dump.ts";
import { iptablesNoise, type PastedCommand, readCommandLine } from "./list-command.ts";
import { type ListedRule, type ListLayout, readHeaderLine, readRuleLine } from "./list-rule.ts";
import { completeness, inferTable, type ListedChain, type Section } from "./list-section.ts";

export interface ParseIptablesListOptions {
  /** Address family; from the command line or the addresses when absent. */
  readonly family?: Family;
  /** The table, when the caller knows it (the listing itself never names it). */
  readonly table?: TableName;
  /** The command pasted above the listing (`iptables -t nat -L -n -v`), when there was one. */
  readonly command?: PastedCommand;
}

const CHAIN_LINE =
  /^Chain (\S+) \((?:policy (\S+)(?: (\S+) packets, (\S+) bytes)?|([0-9]+) references)\)\s*$/;

const MAX_CITED = 500;

/** Counters printed in a chain line: exact when digits only (`-x`, or small numbers). */
function exactCounters(p?: string, b?: string): Counters | undefined {
  if (p === undefined || b === undefined || !/^[0-9]+$/.test(p) || !/^[0-9]+$/.test(b))
    return undefined;
  return { packets: BigInt(p), bytes: BigInt(b) };
}

/** Which interfaces a rule of this chain can test (iptables refuses `-i` in OUTPUT, ...). */
function hooks(chain: string): { inIface: boolean; outIface: boolean } {
  if (chain === "OUTPUT" || chain === "POSTROUTING") return { inIface: false, outIface: true };
  if (chain === "PREROUTING" || chain === "INPUT") return { inIface: true, outIface: false };
  return { inIface: true, outIface: true };
}

/**
 * Parses `iptables -L` output (any flags, one or several listings).
 *
 * @example
 * const { value: dump } = parseIptablesList(text, "nodes/n1/iptables-save.txt", { table: "nat" });
 * dump.tables.get("nat")?.chains.get("POSTROUTING")?.rules[0]?.hidden;
 */
export function parseIptablesList(
  text: string,
  file: string,
  options: ParseIptablesListOptions = {},
): Parsed<IptablesDump> {
  const family = options.family ?? options.command?.family ?? detectFamily(text);
  let first: Section = { chains: [], lastLineBroken: false };
  if (options.command) first = { ...first, command: options.command };
  const r: ListReading = {
    file,
    family,
    diagnostics: [],
    sections: [first],
    section: first,
    chain: undefined,
    layout: undefined,
    numeric: options.command?.numeric ?? /(?:^|\s)(?:0\.0\.0\.0\/0|::\/0|\*)\s/m.test(text),
    legacyTablesPresent: false,
  };
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    let line = lines[i]!;
    if (line.endsWith("\r")) line = line.slice(0, -1);
    const trimmed = line.trim();
    r.section.lastLineBroken = false;
    if (trimmed.length === 0) continue;
    const noise = iptablesNoise(line);
    if (noise === "legacy-warning") {
      r.legacyTablesPresent = true;
      continue;
    }
    const cmd = trimmed.startsWith("Chain ") ? undefined : readCommandLine(line);
    if (cmd !== undefined) {
      r.section = { command: cmd, commandLine: lineNo, chains: [], lastLineBroken: false };
      r.sections.push(r.section);
      r.chain = undefined;
      r.layout = undefined;
      r.numeric = cmd.numeric;
      continue;
    }
    if (noise === "error") {
      listDiag(r, "IPTABLES_TOOL_ERROR", "warning", lineNo, line, `iptables said: ${trimmed}`);
      continue;
    }
    if (trimmed.startsWith("#")) continue;
    const cm = CHAIN_LINE.exec(trimmed);
    if (cm) {
      openChain(r, cm, lineNo, trimmed);
      continue;
    }
    const header = readHeaderLine(line);
    if (header) {
      r.layout = header;
      continue;
    }
    addListedRule(r, line, lineNo);
  }
  return build(file, family, r.sections, r.legacyTablesPresent, options, r.diagnostics);
}

/** Reading an `iptables -L` listing: where it is. */
interface ListReading {
  readonly file: string;
  readonly family: Family;
  readonly diagnostics: Diagnostic[];
  readonly sections: Section[];
  /** The listing being read (one per command line, or per chain listed twice). */
  section: Section;
  chain: ListedChain | undefined;
  /** The columns of the chain's header line; undefined until one is seen or guessed. */
  layout: ListLayout | undefined;
  /** Addresses are numbers (-n), not names. */
  numeric: boolean;
  legacyTablesPresent: boolean;
}

/** A diagnostic on line `line`, citing its text when it is not too long. */
function listDiag(
  r: ListReading,
  code: string,
  severity: Diagnostic["severity"],
  line: number,
  lineText: string,
  message: string,
): void {
  const cited = lineText.length > MAX_CITED ? undefined : lineText;
  r.diagnostics.push({
    code,
    severity,
    message,
    source: cited === undefined ? { file: r.file, line } : { file: r.file, line, text: cited },
  });
}

/** A line that cannot be read: the section's last line is broken, and a syntax error says why. */
function unreadable(r: ListReading, line: number, lineText: string, message: string): void {
  r.section.lastLineBroken = true;
  listDiag(r, "IPTABLES_LIST_SYNTAX", "error", line, lineText, message);
}

/** `Chain NAME (policy P …)` or `Chain NAME (N references)`: the chain its rules go to. */
function openChain(r: ListReading, cm: RegExpExecArray, lineNo: number, trimmed: string): void {
  const name = cm[1]!;
  if (r.section.chains.some((c) => c.name === name)) {
    // a second listing pasted without its command line
    r.section = { chains: [], lastLineBroken: false };
    r.sections.push(r.section);
  }
  const counters = exactCounters(cm[3], cm[4]);
  r.chain = {
    name,
    ...(cm[2] !== undefined ? { policy: cm[2] } : {}),
    ...(counters ? { counters } : {}),
    ...(cm[5] !== undefined ? { references: Number(cm[5]) } : {}),
    declared: { file: r.file, line: lineNo, text: trimmed },
    rules: [],
    partial: false,
  };
  r.section.chains.push(r.chain);
  r.layout = undefined;
}

/** A rule line of the current chain, read by the chain's columns (guessed when it has no header). */
function addListedRule(r: ListReading, line: string, lineNo: number): void {
  const chain = r.chain;
  if (!chain) {
    unreadable(
      r,
      lineNo,
      line,
      'line outside a chain: an iptables -L listing starts each chain with "Chain NAME (policy ...)" or "Chain NAME (N references)"',
    );
    return;
  }
  const read = readRule(line, r.layout, r.numeric, r.family, chain.name);
  if ("error" in read) {
    unreadable(
      r,
      lineNo,
      line,
      `rule line of chain ${chain.name}: ${read.error}; expected the columns of the header "${describeLayout(r.layout)}"`,
    );
    return;
  }
  if (r.layout === undefined) {
    r.layout = read.layout;
    listDiag(
      r,
      "IPTABLES_LIST_NO_HEADER",
      "info",
      lineNo,
      line,
      `chain ${chain.name} has no column header line; its rules were read as "${describeLayout(r.layout)}"`,
    );
  }
  for (const p of read.problems) listDiag(r, "IPTABLES_RULE", "error", lineNo, line, p);
  const index = chain.rules.length + 1;
  const num = read.rule.num;
  if (num !== undefined && num !== index) {
    chain.partial = true;
    listDiag(
      r,
      "IPTABLES_LIST_NUMBER",
      "warning",
      lineNo,
      line,
      `rule numbered ${num} is rule ${index} of chain ${chain.name} as listed: ${
        num > index ? "rules are missing before it" : "the numbers repeat or go back"
      }; the chain may not be shown whole`,
    );
  }
  chain.rules.push({ line: lineNo, text: line, rule: read.rule });
}

function describeLayout(l: ListLayout | undefined): string {
  if (!l) return "target prot opt source destination";
  return [
    l.lineNumbers ? "num" : "",
    l.verbose ? "pkts bytes" : "",
    "target prot opt",
    l.verbose ? "in out" : "",
    "source destination",
  ]
    .filter((s) => s !== "")
    .join(" ");
}

const LAYOUTS: readonly ListLayout[] = [
  { lineNumbers: false, verbose: false },
  { lineNumbers: true, verbose: false },
  { lineNumbers: false, verbose: true },
  { lineNumbers: true, verbose: true },
];

/** A rule line in the header's layout, or (no header seen) in the first layout that reads it. */
function readRule(
  line: string,
  layout: ListLayout | undefined,
  numeric: boolean,
  family: Family,
  chain: string,
): { rule: ListedRule; problems: string[]; layout: ListLayout } | { error: string } {
  const tries = layout ? [layout] : LAYOUTS;
  let firstError: string | undefined;
  for (const l of tries) {
    const r = readRuleLine(line, l, { numeric }, family, hooks(chain));
    if (!("error" in r)) return { ...r, layout: l };
    firstError ??= r.error;
  }
  return { error: firstError ?? "unreadable" };
}

function detectFamily(text: string): Family {
  // an IPv6 address column: `::/0`, `fd00::/8`, `::1`
  return /(?:^|\s)!?[0-9a-fA-F]*:[0-9a-fA-F:]*:[0-9a-fA-F:./]*\s/m.test(text.slice(0, 1 << 20)) &&
    !/(?:^|\s)!?(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?:\/[0-9]+)?\s/m.test(text.slice(0, 1 << 16))
    ? 6
    : 4;
}

/** Turns the sections into tables, decides what is an excerpt, and makes the rules. */
function build(
  file: string,
  family: Family,
  sections: readonly Section[],
  legacyTablesPresent: boolean,
  options: ParseIptablesListOptions,
  diagnostics: Diagnostic[],
): Parsed<IptablesDump> {
  const tables = new Map<TableName, Table>();
  const reasons: string[] = [];
  const firstListed = sections.find((s) => s.chains.length > 0);
  for (const s of sections) {
    if (s.chains.length === 0) continue;
    const cmd = s.command;
    let name: TableName | undefined = cmd?.table ?? (s === firstListed ? options.table : undefined);
    const at = s.commandLine ?? s.chains[0]!.declared.line;
    if (cmd?.badTable !== undefined) {
      diagnostics.push({
        code: "IPTABLES_SYNTAX",
        severity: "error",
        message: `-t ${cmd.badTable}: not an iptables table; expected one of raw, mangle, nat, filter, security`,
        source: { file, line: at },
      });
    }
    if (name === undefined && cmd !== undefined && cmd.badTable === undefined) name = "filter";
    if (name === undefined) {
      const inf = inferTable(s);
      name = inf.table;
      diagnostics.push({
        code: "IPTABLES_TABLE_ASSUMED",
        severity: "info",
        message: `iptables -L does not print its table and no command line (e.g. "# iptables -t nat -L -n -v") stands above it: read as table ${name}, because ${inf.why}`,
        source: { file, line: at },
      });
    }
    let table = tables.get(name);
    if (!table) {
      table = { name, chains: new Map(), committed: false };
      tables.set(name, table);
    }
    const why = completeness(s, name);
    if (why.length > 0) reasons.push(...why.map((w) => `table ${name}: ${w}`));
    for (const c of s.chains) {
      if (table.chains.has(c.name)) {
        diagnostics.push({
          code: "IPTABLES_DUPLICATE_CHAIN",
          severity: "warning",
          message: `chain ${c.name} of table ${name} is listed again (first at line ${table.chains.get(c.name)!.declared?.line}); the first listing is kept`,
          source: c.declared,
        });
        continue;
      }
      const builtin = BUILTIN_CHAINS[name].includes(c.name);
      if (builtin !== (c.policy !== undefined)) {
        diagnostics.push({
          code: "IPTABLES_LIST_TABLE",
          severity: "warning",
          message: builtin
            ? `${c.name} is a built-in chain of table ${name} but is listed without a policy`
            : `${c.name} is listed with a policy but is not a built-in chain of table ${name}: the table may not be ${name}`,
          source: c.declared,
        });
      }
      const chain: Chain = {
        name: c.name,
        builtin,
        ...(c.policy !== undefined ? { policy: c.policy } : {}),
        ...(c.counters ? { counters: c.counters } : {}),
        declared: c.declared,
        rules: c.rules.map((r, k) => makeRule(name!, c.name, k + 1, file, r.line, r.text, r.rule)),
        ...(c.partial ? { partial: true } : {}),
        ...(c.partial && c.partialTail ? { partialTail: true } : {}),
      };
      table.chains.set(c.name, chain);
    }
  }
  if (reasons.length > 0) {
    diagnostics.push({
      code: "IPTABLES_EXCERPT",
      severity: "info",
      message: `${file} shows only part of the rules (${reasons.join("; ")}): what it does not show is unknown; iptables-save shows everything`,
      source: {
        file,
        line: firstListed?.commandLine ?? firstListed?.chains[0]?.declared.line ?? 1,
      },
    });
  }
  const value: IptablesDump = {
    file,
    family,
    format: "list",
    legacyTablesPresent,
    tables,
    ...(reasons.length > 0 ? { excerpt: { reasons } } : {}),
  };
  return { value, diagnostics };
}

function makeRule(
  table: TableName,
  chain: string,
  index: number,
  file: string,
  line: number,
  text: string,
  r: ListedRule,
): Rule {
  return {
    table,
    chain,
    index,
    source: { file, line, text },
    ...(r.counters ? { counters: r.counters } : {}),
    ...(r.protocol ? { protocol: r.protocol } : {}),
    ...(r.src ? { src: r.src } : {}),
    ...(r.dst ? { dst: r.dst } : {}),
    ...(r.inIface ? { inIface: r.inIface } : {}),
    ...(r.outIface ? { outIface: r.outIface } : {}),
    ...(r.fragment ? { fragment: r.fragment } : {}),
    matches: r.matches,
    ...(r.target ? { target: r.target } : {}),
    ...(r.hidden.length > 0 ? { hidden: r.hidden } : {}),
  };
}
