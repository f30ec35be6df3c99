/**
 * @module evidence/ip-rule — the routing policy database as iproute2 prints it: `ip rule` (and
 * `ip rule show`, `ip -6 rule`, `ip -d rule` with its `proto` word) and `ip -j rule` (JSON). Each
 * rule keeps its priority, selector (`not`, from, to, tos, fwmark/mask, iif, oif, uidrange,
 * ipproto, sport, dport), action (lookup TABLE, goto, nop, blackhole, unreachable, prohibit) and
 * the line it was read from. Written by hand: no library reads iproute2's rule output.
 */
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { type Cidr, tryParseCidr } from "../net/cidr.ts";
import { type Line, lineRef, quote, splitLines, tokens } from "./text-lines.ts";

export const RULE_ACTIONS = [
  "lookup",
  "goto",
  "nop",
  "blackhole",
  "unreachable",
  "prohibit",
] as const;
export type RuleAction = (typeof RULE_ACTIONS)[number];

/** An inclusive range of ports or uids (`1000-2000`; one value is `{ from: n, to: n }`). */
export interface NumberRange {
  readonly from: number;
  readonly to: number;
}

export interface IpRule {
  readonly priority: number;
  /** `not`: the selector as a whole is inverted. */
  readonly not: boolean;
  /** `from all` leaves these undefined. */
  readonly from?: Cidr;
  readonly to?: Cidr;
  readonly tos?: number;
  readonly fwmark?: { readonly value: number; readonly mask: number };
  readonly iif?: string;
  readonly oif?: string;
  readonly uidrange?: NumberRange;
  readonly ipproto?: string;
  readonly sport?: NumberRange;
  readonly dport?: NumberRange;
  readonly action: RuleAction;
  /** With `lookup`: the table's name or number as printed (`local`, `main`, `100`). */
  readonly table?: string;
  /** With `goto`: the priority to continue at. */
  readonly goto?: number;
  /** `suppress_prefixlength N`: a route found with a prefix this short or shorter is refused. */
  readonly suppressPrefixLength?: number;
  /** Other words and attributes as printed (`proto kernel`, `realms`, `l3mdev`…). */
  readonly attributes: Readonly<Record<string, string>>;
  readonly source: SourceRef;
}

const RULE_LINE = /^(\d+):\s+(.*)$/;

function range(text: string): NumberRange | undefined {
  const m = /^(\d+)(?:-(\d+))?$/.exec(text);
  if (!m) return undefined;
  const from = Number(m[1]);
  return { from, to: m[2] === undefined ? from : Number(m[2]) };
}

function num(text: string): number | undefined {
  const n = text.startsWith("0x") ? Number.parseInt(text.slice(2), 16) : Number(text);
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}

function prefix(text: string): Cidr | undefined | "bad" {
  if (text === "all") return undefined;
  const r = tryParseCidr(text);
  return "cidr" in r ? r.cidr : "bad";
}

type Mutable = { -readonly [K in keyof IpRule]?: IpRule[K] } & {
  attributes: Record<string, string>;
};

/** One word of a rule line and what follows it; false when the line does not read. */
function readWord(rule: Mutable, words: readonly string[], i: number): number | false {
  const w = words[i]!;
  const next = words[i + 1];
  const need = (set: (v: string) => boolean): number | false =>
    next !== undefined && set(next) ? i + 2 : false;
  /** Sets `key` from the next word read by `read`; false when it does not read. */
  const value = <K extends keyof Mutable>(
    key: K,
    read: (v: string) => Mutable[K] | undefined,
  ): number | false =>
    need((v) => {
      const x = read(v);
      if (x === undefined) return false;
      rule[key] = x;
      return true;
    });
  switch (w) {
    case "not":
      rule.not = true;
      return i + 1;
    case "from":
    case "to":
      return need((v) => {
        const p = prefix(v);
        if (p === "bad") return false;
        if (p) rule[w] = p;
        return true;
      });
    case "tos":
    case "dsfield":
      return value("tos", num);
    case "fwmark":
      return need((v) => {
        const [value, mask] = v.split("/");
        const m = num(value ?? "");
        const k = mask === undefined ? 0xffffffff : num(mask);
        if (m === undefined || k === undefined) return false;
        rule.fwmark = { value: m, mask: k };
        return true;
      });
    case "iif":
    case "oif": {
      const after = value(w, (v) => v);
      // a device that is gone is printed `[detached]`
      return after !== false && words[after] === "[detached]" ? after + 1 : after;
    }
    case "uidrange":
    case "sport":
    case "dport":
      return value(w, range);
    case "ipproto":
      return value("ipproto", (v) => v);
    case "lookup":
    case "table":
      rule.action = "lookup";
      return value("table", (v) => v);
    case "goto":
      rule.action = "goto";
      return value("goto", num);
    case "suppress_prefixlength":
      return value("suppressPrefixLength", num);
    case "nop":
    case "blackhole":
    case "unreachable":
    case "prohibit":
      rule.action = w;
      return i + 1;
    case "[unresolved]":
      rule.attributes["unresolved"] = "";
      return i + 1;
    default:
      if (next === undefined) return false;
      rule.attributes[w] = next;
      return i + 2;
  }
}

function readLine(l: Line, file: string): IpRule | string {
  const m = RULE_LINE.exec(l.text.trim());
  if (!m) return "a rule line: PRIORITY:<tab>[not] from SELECTOR ... ACTION";
  const rule: Mutable = { priority: Number(m[1]), not: false, attributes: {} };
  const words = tokens(m[2]!);
  for (let i = 0; i < words.length; ) {
    const next = readWord(rule, words, i);
    if (next === false) return `a value after ${quote(words[i]!)}`;
    i = next;
  }
  // iproute2 prints no action word for a rule that only selects (FR_ACT_UNSPEC): treat as nop
  return { ...rule, action: rule.action ?? "nop", source: lineRef(file, l) } as IpRule;
}

/**
 * Reads `ip rule` output in its text or JSON form. A line that cannot be read becomes a diagnostic
 * naming what was expected, and reading goes on; prompt lines (`$ ip rule`) and blank lines are
 * passed over.
 *
 * @example
 *   readIpRule("0:\tfrom all lookup local\n100:\tfrom 10.4.0.0/14 lookup 100\n", "ip-rule.txt")
 *   // value[1]: { priority: 100, from: 10.4.0.0/14, action: "lookup", table: "100", … }
 */
export function readIpRule(text: string, file: string): Parsed<IpRule[]> {
  if (text.trimStart().startsWith("[")) return readIpRuleJson(text, file);
  const value: IpRule[] = [];
  const diagnostics: Diagnostic[] = [];
  for (const l of splitLines(text)) {
    const t = l.text.trim();
    if (t === "" || /^[$#]\s/.test(t) || /^\S*[$#]\s*ip\b/.test(t)) continue;
    const r = readLine(l, file);
    if (typeof r === "string") {
      diagnostics.push({
        code: "IP_RULE_LINE_UNREADABLE",
        severity: "warning",
        message: `${file}:${l.line}: expected ${r}, found ${quote(t)}`,
        source: lineRef(file, l),
      });
    } else value.push(r);
  }
  return { value, diagnostics };
}

type JsonRule = Record<string, unknown>;

/** `ip -j rule`: the same rules as the text form, cited by their index in the array. */
function readIpRuleJson(text: string, file: string): Parsed<IpRule[]> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return {
      value: [],
      diagnostics: [
        {
          code: "IP_RULE_JSON_UNREADABLE",
          severity: "error",
          message: `${file}: expected the JSON array \`ip -j rule\` prints: ${(e as Error).message}`,
          source: { file, line: 1 },
        },
      ],
    };
  }
  const list = Array.isArray(parsed) ? (parsed as JsonRule[]) : [];
  const value: IpRule[] = [];
  const diagnostics: Diagnostic[] = [];
  list.forEach((j, i) => {
    const words: string[] = [];
    if ("not" in j) words.push("not");
    const cidr = (a: unknown, len: unknown) =>
      a === "all" || a === undefined ? "all" : len === undefined ? String(a) : `${a}/${len}`;
    words.push("from", cidr(j["src"], j["srclen"]));
    if (j["dst"] !== undefined) words.push("to", cidr(j["dst"], j["dstlen"]));
    if (j["tos"] !== undefined) words.push("tos", String(j["tos"]));
    if (j["fwmark"] !== undefined)
      words.push("fwmark", `${j["fwmark"]}${j["fwmask"] === undefined ? "" : `/${j["fwmask"]}`}`);
    for (const k of ["iif", "oif", "ipproto"]) if (j[k] !== undefined) words.push(k, String(j[k]));
    const span = (k: string, a: unknown, b: unknown) => {
      if (a !== undefined) words.push(k, b === undefined ? String(a) : `${a}-${b}`);
    };
    span("uidrange", j["uid_start"], j["uid_end"]);
    span("sport", j["sport"] ?? j["sport_start"], j["sport_end"]);
    span("dport", j["dport"] ?? j["dport_start"], j["dport_end"]);
    if (j["table"] !== undefined) words.push("lookup", String(j["table"]));
    if (j["suppress_prefixlen"] !== undefined)
      words.push("suppress_prefixlength", String(j["suppress_prefixlen"]));
    if (j["goto"] !== undefined) words.push("goto", String(j["goto"]));
    if (typeof j["action"] === "string") words.push(j["action"]);
    if ("nop" in j) words.push("nop");
    const line: Line = { line: 1, text: `${j["priority"]}:\t${words.join(" ")}` };
    const r = readLine(line, file);
    if (typeof r === "string")
      diagnostics.push({
        code: "IP_RULE_LINE_UNREADABLE",
        severity: "warning",
        message: `${file}: rule ${i} of the JSON array: expected ${r}`,
        source: { file, line: 1 },
      });
    else value.push({ ...r, source: { file, line: 1, text: `[${i}] ${line.text}` } });
  });
  return { value, diagnostics };
}
