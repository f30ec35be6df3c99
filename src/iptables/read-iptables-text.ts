/**
 * @module iptables/read-iptables-text — the one entry point for a file of iptables rules as a person
 * hands it over: iptables-save (with or without `-c`), `iptables -S`, or `iptables -L` in any of its
 * forms, legacy or nf_tables, with shell prompt lines (`# iptables -t nat -L -n -v`,
 * `$ sudo iptables-save`) and iptables' own warnings pasted in between. It tells the forms apart,
 * reads each listing with its reader and gives one dump. A real iptables-save file goes straight
 * to the iptables-save reader, untouched.
 */
import type { Diagnostic, Parsed } from "../model/types.ts";
import type { Family } from "../net/cidr.ts";
import type { IptablesDump, Table, TableName } from "./dump.ts";
import { placeExcerptLines } from "./excerpt-tables.ts";
import { iptablesNoise, type PastedCommand, readCommandLine } from "./list-command.ts";
import { parseIptablesList } from "./list-parser.ts";
import { parseIptablesSave } from "./save-parser.ts";

export interface ReadIptablesTextOptions {
  /** The family the file holds (from its name: iptables-save or ip6tables-save). */
  readonly family: Family;
}

type Kind = "save" | "spec" | "list";

/** The output of one command: lines `[from, to)` (0-based), after the command line if any. */
interface Segment {
  readonly command?: PastedCommand;
  readonly commandLine?: number;
  readonly from: number;
  to: number;
  kind?: Kind;
  /** First line that is neither blank, a comment nor iptables' own noise. */
  firstContent?: number;
}

const MAX_CITED = 200;

/** What the first content line of a listing says it is. */
function kindOf(line: string): Kind | undefined {
  const t = line.trimStart();
  if (t.startsWith("*") || t.startsWith(":")) return "save";
  if (/^(?:\[[0-9]+:[0-9]+\]\s*)?-[APNI] /.test(t)) return "spec";
  if (/^Chain \S+ \(/.test(t)) return "list";
  return undefined;
}

/** Does the text start (after `#` lines) with a `*table` line: a plain iptables-save file? */
function isPlainSave(text: string): boolean {
  let pos = 0;
  for (let n = 0; n < 64 && pos < text.length; n++) {
    const c = text.charCodeAt(pos);
    if (c === 42 /* * */) return true;
    if (c !== 35 /* # */ && c !== 10 && c !== 13) return false;
    const nl = text.indexOf("\n", pos);
    if (nl < 0) return false;
    // a pasted command line with a `#` prompt above the dump is more than a comment
    if (c === 35 && readCommandLine(text.slice(pos, nl)) !== undefined) return false;
    pos = nl + 1;
  }
  return false;
}

/**
 * Reads a file of iptables rules in whichever form it holds. `value` is undefined when nothing in
 * it is iptables output; the diagnostic then names the line and the command to run instead.
 *
 * @example
 * const { value } = readIptablesText(text, "nodes/n1/iptables-save.txt", { family: 4 });
 * value?.format; // "save", "spec" or "list"
 */
export function readIptablesText(
  text: string,
  file: string,
  options: ReadIptablesTextOptions,
): Parsed<IptablesDump | undefined> {
  const family = options.family;
  // the fast path: a real iptables-save file is read as it always was
  if (isPlainSave(text)) return parseIptablesSave(text, file, { family });
  if (text.trim().length === 0) return emptyFile(file, family);

  const lines = text.split("\n");
  const diagnostics: Diagnostic[] = [];
  const { segments, blank, legacyWarning } = segmentsOf(lines);
  const used = segments.filter((s) => s.firstContent !== undefined || s.command !== undefined);
  const dumps: IptablesDump[] = [];
  for (const s of used) {
    const d = readSegment(s, { lines, blank, text, file, family }, diagnostics);
    if (d !== undefined) dumps.push(d);
  }
  if (dumps.length === 0) {
    if (!diagnostics.some((d) => d.severity === "error")) {
      const first = lines.findIndex((l) => l.trim().length > 0);
      diagnostics.push(
        first < 0
          ? {
              code: "IPTABLES_UNRECOGNISED",
              severity: "error",
              message: `${file} is empty; run \`${family === 6 ? "ip6tables" : "iptables"}-save > ${file}\` on the node (or \`-t nat\` for the nat table only)`,
              source: { file, line: 1 },
            }
          : unrecognised(file, first + 1, lines[first]!, family),
      );
    }
    return { value: undefined, diagnostics };
  }
  const merged = merge(dumps, diagnostics);
  return {
    value:
      legacyWarning && !merged.legacyTablesPresent
        ? { ...merged, legacyTablesPresent: true }
        : merged,
    diagnostics,
  };
}

/** iptables-save prints nothing at all when no table is loaded in the namespace. */
function emptyFile(file: string, family: Family): Parsed<IptablesDump> {
  const tool = family === 6 ? "ip6tables" : "iptables";
  return {
    value: { ...parseIptablesSave("", file, { family }).value, tables: new Map() },
    diagnostics: [
      {
        code: "IPTABLES_NO_TABLES",
        severity: "info",
        message: `${file} is empty: read as ${tool}-save's output where no table is loaded (no rules). If it was meant to hold a paste, run \`${tool}-save > ${file}\` on the node`,
        source: { file, line: 1 },
      },
    ],
  };
}

/**
 * The text cut at its command lines into segments, each with where its content starts and its
 * form; lines that are commands or tool noise are `blank`.
 */
function segmentsOf(lines: readonly string[]): {
  segments: Segment[];
  blank: Set<number>;
  legacyWarning: boolean;
} {
  const segments: Segment[] = [{ from: 0, to: lines.length }];
  const blank = new Set<number>();
  let legacyWarning = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const c = line.charCodeAt(0);
    // the rule and chain lines of every form start with one of these: not a command, not noise
    if (c === 45 /* - */ || c === 58 /* : */ || c === 42 /* * */ || line.startsWith("Chain "))
      noteContent(segments, i, line);
    else {
      const noise = iptablesNoise(line);
      if (noise !== undefined) {
        if (noise === "legacy-warning") legacyWarning = true;
        blank.add(i);
        continue;
      }
      const cmd = line.trim().length === 0 ? undefined : readCommandLine(line);
      if (cmd !== undefined) {
        segments[segments.length - 1]!.to = i;
        segments.push({ command: cmd, commandLine: i, from: i + 1, to: lines.length });
        blank.add(i);
        continue;
      }
      if (line.trim().length > 0 && !line.trimStart().startsWith("#"))
        noteContent(segments, i, line);
    }
  }
  return { segments, blank, legacyWarning };
}

/** One segment read in its form (save, spec or list); undefined, with a diagnostic, when it cannot be. */
function readSegment(
  s: Segment,
  c: {
    lines: readonly string[];
    blank: Set<number>;
    text: string;
    file: string;
    family: Family;
  },
  diagnostics: Diagnostic[],
): IptablesDump | undefined {
  const { lines, file, family } = c;
  const at = s.firstContent;
  if (s.command !== undefined && s.command.family !== family) {
    const want = family === 6 ? "ip6tables-save" : "iptables-save";
    diagnostics.push({
      code: "IPTABLES_FAMILY",
      severity: "error",
      message: `${s.command.tool} output in ${file}, which holds IPv${family} rules: not read; put it in ${s.command.family === 6 ? "ip6tables-save.txt" : "iptables-save.txt"} beside it, or run ${want} here`,
      source: { file, line: (s.commandLine ?? 0) + 1 },
    });
    return undefined;
  }
  if (at === undefined) {
    diagnostics.push({
      code: "IPTABLES_EMPTY",
      severity: "warning",
      message: `the command "${lines[s.commandLine!]!.trim().slice(0, MAX_CITED)}" has no output below it in ${file}`,
      source: { file, line: s.commandLine! + 1 },
    });
    return undefined;
  }
  const kind = s.kind ?? s.command?.kind;
  if (kind === undefined) {
    diagnostics.push(unrecognised(file, at + 1, lines[at]!, family));
    return undefined;
  }
  const view = viewOf(lines, s, c.blank, c.text);
  if (kind !== "list" && s.command?.table === undefined) {
    const mixed = readMixedExcerpt(s, c, diagnostics);
    if (mixed !== undefined) return withPipe(mixed, s.command);
  }
  const r =
    kind === "list"
      ? parseIptablesList(view, file, {
          family,
          ...(s.command ? { command: s.command } : {}),
        })
      : parseIptablesSave(view, file, {
          family,
          ...(s.command?.table ? { table: s.command.table } : {}),
          asHandedOver: true,
        });
  diagnostics.push(...r.diagnostics);
  return kind === "list" ? r.value : withPipe(r.value, s.command);
}

/**
 * A headless excerpt whose lines come from several tables (`iptables-save | grep KUBE`): each
 * table's lines read as that table; the lines whose table is not certain left out and named, with
 * the commands that tell. Undefined when the segment is not such an excerpt.
 */
function readMixedExcerpt(
  s: Segment,
  c: { lines: readonly string[]; blank: Set<number>; file: string; family: Family },
  diagnostics: Diagnostic[],
): IptablesDump | undefined {
  const { lines, file, family } = c;
  const at: number[] = [];
  for (let i = s.from; i < s.to; i++) {
    if (c.blank.has(i)) continue;
    const l = lines[i]!;
    // a table header, a policy or a -N declaration: the listing says its table(s)
    if (l.startsWith("*") || l.startsWith("-P ") || l.startsWith("-N ")) return undefined;
    if (/^(-[AI] |:)/.test(l)) at.push(i);
  }
  const placed = placeExcerptLines(lines, at);
  if (placed === undefined) return undefined;
  const dumps: IptablesDump[] = [];
  for (const [table, idx] of placed.tables) {
    const out = new Array<string>(lines.length).fill("");
    for (const i of idx) out[i] = lines[i]!;
    const r = parseIptablesSave(out.join("\n"), file, { family, table, asHandedOver: true });
    diagnostics.push(...r.diagnostics);
    dumps.push(r.value);
  }
  const counts = [...placed.tables].map(([t, idx]) => `${idx.length} as ${t}`).join(", ");
  diagnostics.push({
    code: "IPTABLES_TABLE_ASSUMED",
    severity: "info",
    message: `no "*table" line, and the lines come from several tables (a grep of iptables-save): read ${counts}, each by its chain or target${placed.byBlock > 0 ? ` (${placed.byBlock} by the block of the dump it sits in)` : ""}${placed.unplaced.length > 0 ? `; ${placed.unplaced.length} left out (their table is not certain)` : ""}`,
    source: { file, line: at[0]! + 1 },
  });
  const tool = family === 6 ? "ip6tables-save" : "iptables-save";
  for (const u of placed.unplaced) {
    const text = lines[u.line]!.trim();
    // a declaration alone changes no answer: said, not warned about
    const decl = text.startsWith(":");
    diagnostics.push({
      code: "IPTABLES_TABLE_UNKNOWN",
      severity: decl ? "info" : "warning",
      message: `this ${decl ? "chain declaration" : "line"} could be in table ${u.tables.join(" or ")}: left out of the answer. \`${u.tables.map((t) => `${tool} -t ${t}`).join("` / `")}\` on the node shows which`,
      source:
        text.length > MAX_CITED ? { file, line: u.line + 1 } : { file, line: u.line + 1, text },
    });
  }
  const merged = merge(dumps, diagnostics);
  // the rules left out (declarations alone change no answer)
  const rules = placed.unplaced.filter((u) => !lines[u.line]!.startsWith(":"));
  if (rules.length === 0) return merged;
  const shown = rules.slice(0, 10).map((u) => u.line + 1);
  const more = rules.length > shown.length ? ` and ${rules.length - shown.length} more` : "";
  const tables = [...new Set(rules.flatMap((u) => u.tables))];
  const reason = `line${shown.length > 1 ? "s" : ""} ${shown.join(", ")}${more} could be in more than one table (${tables.join(", ")}) and ${rules.length > 1 ? "are" : "is"} left out: \`${tables.map((t) => `${tool} -t ${t}`).join("` / `")}\` on the node tells which`;
  return { ...merged, excerpt: { reasons: [...(merged.excerpt?.reasons ?? []), reason] } };
}

function noteContent(segments: Segment[], i: number, line: string): void {
  const s = segments[segments.length - 1]!;
  if (s.firstContent !== undefined) return;
  s.firstContent = i;
  const k = kindOf(line);
  if (k !== undefined) s.kind = k;
}

function unrecognised(file: string, line: number, text: string, family: Family): Diagnostic {
  const tool = family === 6 ? "ip6tables" : "iptables";
  const t = text.trim();
  return {
    code: "IPTABLES_UNRECOGNISED",
    severity: "error",
    message: `${file} line ${line} is not iptables output podpath reads (iptables-save, ${tool} -S or ${tool} -L); nothing in the file was read. Run \`${tool}-save > ${file}\` on the node (or \`${tool}-save -t nat > ${file}\` for the nat table only)`,
    source: t.length > MAX_CITED ? { file, line } : { file, line, text: t },
  };
}

/** The text with only this segment's lines (others blank, so line numbers stay the file's). */
function viewOf(lines: readonly string[], s: Segment, blank: ReadonlySet<number>, text: string) {
  if (s.from === 0 && s.to === lines.length && blank.size === 0) return text;
  const out = new Array<string>(lines.length).fill("");
  for (let i = s.from; i < s.to; i++) if (!blank.has(i)) out[i] = lines[i]!;
  return out.join("\n");
}

/** A save or -S listing that went through `| grep`, `| head`: any of its chains may be cut. */
function withPipe(dump: IptablesDump, cmd: PastedCommand | undefined): IptablesDump {
  if (cmd?.filter === undefined) return dump;
  for (const t of dump.tables.values()) for (const c of t.chains.values()) c.partial = true;
  const reason = `the listing went through "| ${cmd.filter}", so any chain may be missing rules`;
  return { ...dump, excerpt: { reasons: [...(dump.excerpt?.reasons ?? []), reason] } };
}

/** Several listings in one file: one dump, tables and chains of the first listing kept. */
function merge(dumps: readonly IptablesDump[], diagnostics: Diagnostic[]): IptablesDump {
  const first = dumps[0]!;
  if (dumps.length === 1) return first;
  const tables = new Map<TableName, Table>(first.tables);
  const reasons = [...(first.excerpt?.reasons ?? [])];
  let legacy = first.legacyTablesPresent;
  for (const d of dumps.slice(1)) {
    legacy ||= d.legacyTablesPresent;
    reasons.push(...(d.excerpt?.reasons ?? []));
    for (const [name, t] of d.tables) {
      const have = tables.get(name);
      if (!have) {
        tables.set(name, t);
        continue;
      }
      for (const [cn, c] of t.chains) {
        if (have.chains.has(cn)) {
          diagnostics.push({
            code: "IPTABLES_DUPLICATE_CHAIN",
            severity: "warning",
            message: `chain ${cn} of table ${name} is shown again; the first showing is kept`,
            ...(c.declared ? { source: c.declared } : {}),
          });
        } else have.chains.set(cn, c);
      }
    }
  }
  return {
    ...first,
    legacyTablesPresent: legacy,
    tables,
    ...(reasons.length > 0 ? { excerpt: { reasons } } : {}),
  };
}
