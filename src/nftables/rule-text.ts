/**
 * @module nftables/rule-text — one rule of nft's text listing read into statements: matches on
 * selectors and concatenations against values, anonymous sets and named `@sets`, verdict maps,
 * verdicts, reject, NAT (fixed or through a map, numgen), mark set, a dynamic set's update
 * (kube-proxy's session affinity), counter, comment. A word it does not know turns the rest of the
 * rule into one `unknown` statement, kept and named.
 */

import type {
  NftAtom,
  NftElement,
  NftKey,
  NftMapData,
  NftMapRef,
  NftNatTo,
  NftSelector,
  NftSetRef,
  NftStatement,
  NftVerdict,
} from "./model.ts";
import { atomOf, type NftValueType, valueTypeOfSetType } from "./values.ts";

/** What the rule parser needs to know beyond the words: the table's named sets' key types. */
export interface RuleScope {
  readonly setTypes: (name: string) => readonly string[] | undefined;
}

export interface ParsedRule {
  readonly statements: NftStatement[];
  readonly comment?: string;
  /** The unknown statement's first word and why, when there is one. */
  readonly problem?: string;
}

interface SelectorSpec {
  readonly words: readonly string[];
  readonly sel: Omit<NftSelector, "text">;
  readonly type: NftValueType;
}

const TRANSPORT: Record<string, number> = { tcp: 6, udp: 17, sctp: 132, udplite: 136, dccp: 33 };

const SELECTORS: readonly SelectorSpec[] = [
  { words: ["ip", "saddr"], sel: { key: "saddr", family: 4 }, type: "addr" },
  { words: ["ip", "daddr"], sel: { key: "daddr", family: 4 }, type: "addr" },
  { words: ["ip", "protocol"], sel: { key: "l4proto", family: 4 }, type: "proto" },
  { words: ["ip6", "saddr"], sel: { key: "saddr", family: 6 }, type: "addr" },
  { words: ["ip6", "daddr"], sel: { key: "daddr", family: 6 }, type: "addr" },
  { words: ["ip6", "nexthdr"], sel: { key: "l4proto", family: 6 }, type: "proto" },
  { words: ["meta", "l4proto"], sel: { key: "l4proto" }, type: "proto" },
  { words: ["l4proto"], sel: { key: "l4proto" }, type: "proto" },
  { words: ["meta", "iifname"], sel: { key: "iifname" }, type: "ifname" },
  { words: ["meta", "oifname"], sel: { key: "oifname" }, type: "ifname" },
  { words: ["iifname"], sel: { key: "iifname" }, type: "ifname" },
  { words: ["oifname"], sel: { key: "oifname" }, type: "ifname" },
  { words: ["meta", "mark"], sel: { key: "mark" }, type: "mark" },
  { words: ["mark"], sel: { key: "mark" }, type: "mark" },
  { words: ["meta", "nfproto"], sel: { key: "nfproto" }, type: "integer" },
  { words: ["meta", "random"], sel: { key: "random" }, type: "integer" },
  { words: ["th", "dport"], sel: { key: "dport" }, type: "port" },
  { words: ["th", "sport"], sel: { key: "sport" }, type: "port" },
  { words: ["ct", "state"], sel: { key: "ct state" }, type: "ct-state" },
  { words: ["ct", "status"], sel: { key: "ct status" }, type: "ct-status" },
  { words: ["fib", "daddr", "type"], sel: { key: "fib daddr type" }, type: "fib-type" },
  { words: ["fib", "saddr", "type"], sel: { key: "fib saddr type" }, type: "fib-type" },
  ...Object.entries(TRANSPORT).flatMap(([p, n]) =>
    (["dport", "sport"] as const).map((f) => ({
      words: [p, f],
      sel: { key: f, impliesProto: n },
      type: "port" as const,
    })),
  ),
];

const OPS = new Set(["==", "!=", "<", ">", "<=", ">="]);
const NAT_FLAGS = new Set(["random", "fully-random", "persistent", "netmap", "prefix"]);
const VERDICTS = new Set(["accept", "drop", "return", "continue", "queue"]);

class RuleError extends Error {}

/** A cursor over one rule's words. */
class Cursor {
  i = 0;
  readonly w: readonly string[];
  readonly scope: RuleScope;
  constructor(w: readonly string[], scope: RuleScope) {
    this.w = w;
    this.scope = scope;
  }
  peek(k = 0): string | undefined {
    return this.w[this.i + k];
  }
  next(): string {
    const t = this.w[this.i++];
    if (t === undefined) throw new RuleError("the rule ends early");
    return t;
  }
  expect(word: string): void {
    const t = this.next();
    if (t !== word) throw new RuleError(`expected "${word}", found "${t}"`);
  }
  done(): boolean {
    return this.i >= this.w.length;
  }
}

function selectorAt(c: Cursor): { sel: NftSelector; type: NftValueType } | undefined {
  // numgen random mod N: its own shape
  if (c.peek() === "numgen" && c.peek(1) === "random" && c.peek(2) === "mod") {
    const n = Number(c.peek(3));
    if (!Number.isInteger(n) || n <= 0) return undefined;
    if (c.peek(4) === "offset") return undefined;
    c.i += 4;
    return { sel: { key: "numgen", text: `numgen random mod ${n}`, modulus: n }, type: "integer" };
  }
  for (const s of SELECTORS) {
    if (s.words.every((w, k) => c.peek(k) === w)) {
      c.i += s.words.length;
      return { sel: { ...s.sel, text: s.words.join(" ") }, type: s.type };
    }
  }
  return undefined;
}

/** A key: selector ( . selector )* [ & mask ]; undefined (cursor unmoved) when none starts here. */
function keyAt(c: Cursor): { key: NftKey; types: NftValueType[] } | undefined {
  const start = c.i;
  const first = selectorAt(c);
  if (!first) {
    c.i = start;
    return undefined;
  }
  const selectors = [first.sel];
  const types = [first.type];
  while (c.peek() === ".") {
    c.i++;
    const s = selectorAt(c);
    if (!s) throw new RuleError(`expected a selector after ".", found "${c.peek() ?? "the end"}"`);
    selectors.push(s.sel);
    types.push(s.type);
  }
  let mask: bigint | undefined;
  if (c.peek() === "&") {
    c.i++;
    const m = atomOf(c.next(), "integer");
    if (m?.kind !== "range") throw new RuleError("expected a number after &");
    mask = m.lo;
    // meta random & M: the random number is in 0..M
    if (selectors.length === 1 && selectors[0]!.key === "random") {
      selectors[0] = { ...selectors[0]!, modulus: Number(mask) + 1 };
    }
  }
  return { key: { selectors, ...(mask !== undefined ? { mask } : {}) }, types };
}

function atomOrThrow(word: string, type: NftValueType): NftAtom {
  const a = atomOf(word, type);
  if (!a) throw new RuleError(`"${word}" is not a value of type ${type}`);
  return a;
}

/** Skips what nft prints inside a set element besides its value. */
function skipElementExtras(c: Cursor): void {
  for (;;) {
    const t = c.peek();
    if (t === "comment") c.i += 2;
    else if (t === "timeout" || t === "expires") c.i += 2;
    else if (t === "counter" && c.peek(1) === "packets") c.i += 5;
    else return;
  }
}

function elementAt(c: Cursor, types: readonly NftValueType[], inSet = true): NftElement {
  const out: NftAtom[] = [];
  for (let k = 0; k < types.length; k++) {
    if (k > 0) c.expect(".");
    out.push(atomOrThrow(c.next(), types[k]!));
  }
  if (inSet) skipElementExtras(c);
  return out;
}

function verdictAt(c: Cursor): NftVerdict | undefined {
  const t = c.peek();
  if (t === undefined) return undefined;
  if (VERDICTS.has(t)) {
    c.i++;
    return { kind: t as "accept" | "drop" | "return" | "continue" | "queue" };
  }
  if (t === "jump" || t === "goto") {
    c.i++;
    return { kind: t, chain: unquote(c.next()) };
  }
  return undefined;
}

function unquote(w: string): string {
  return w.startsWith('"') && w.endsWith('"') ? w.slice(1, -1) : w;
}

/** `{ e, e }` or a single value (possibly `a,b` flags) after a match's key. */
function setRefAt(c: Cursor, types: readonly NftValueType[]): NftSetRef {
  const t = c.peek();
  if (t?.startsWith("@")) {
    c.i++;
    return { kind: "named", name: t.slice(1) };
  }
  const elements: NftElement[] = [];
  if (t === "{") {
    c.i++;
    while (c.peek() !== "}") {
      elements.push(elementAt(c, types));
      if (c.peek() === ",") c.i++;
      else if (c.peek() !== "}") throw new RuleError(`expected "," or "}", found "${c.peek()}"`);
    }
    c.i++;
    return { kind: "anonymous", elements };
  }
  elements.push(elementAt(c, types, false));
  // ct state established,related: a list of flags, any of which matches
  while (c.peek() === ",") {
    c.i++;
    elements.push(elementAt(c, types, false));
  }
  return { kind: "anonymous", elements };
}

function mapDataAt(c: Cursor, dataTypes: readonly NftValueType[] | undefined): NftMapData {
  const v = verdictAt(c);
  if (v) return { kind: "verdict", verdict: v };
  if (!dataTypes) throw new RuleError(`expected a verdict, found "${c.peek() ?? "the end"}"`);
  return { kind: "value", value: elementAt(c, dataTypes) };
}

function mapRefAt(
  c: Cursor,
  types: readonly NftValueType[],
  dataTypes?: readonly NftValueType[],
): NftMapRef {
  const t = c.next();
  if (t.startsWith("@")) return { kind: "named", name: t.slice(1) };
  if (t !== "{") throw new RuleError(`expected "{" or "@map", found "${t}"`);
  const entries: { key: NftElement; data: NftMapData }[] = [];
  while (c.peek() !== "}") {
    const key = elementAt(c, types);
    c.expect(":");
    entries.push({ key, data: mapDataAt(c, dataTypes) });
    if (c.peek() === ",") c.i++;
    else if (c.peek() !== "}") throw new RuleError(`expected "," or "}", found "${c.peek()}"`);
  }
  c.i++;
  return { kind: "anonymous", entries };
}

/** `10.4.1.5:8080`, `10.4.1.5`, `:8080`, `[fd00::1]:80`, `1.2.3.4-1.2.3.9`. */
function natAddrPort(word: string, family: 4 | 6 | undefined): { addr?: NftAtom; port?: NftAtom } {
  let addr = word;
  let port: string | undefined;
  if (word.startsWith("[")) {
    const end = word.indexOf("]");
    addr = word.slice(1, end);
    if (word[end + 1] === ":") port = word.slice(end + 2);
  } else if (word.startsWith(":")) {
    addr = "";
    port = word.slice(1);
  } else if (family !== 6 && word.split(":").length === 2) {
    [addr, port] = word.split(":") as [string, string];
  }
  return {
    ...(addr ? { addr: atomOrThrow(addr, "addr") } : {}),
    ...(port ? { port: atomOrThrow(port, "port") } : {}),
  };
}

function natAt(c: Cursor, kind: "dnat" | "snat" | "masquerade" | "redirect"): NftStatement {
  let family: 4 | 6 | undefined;
  if (c.peek() === "ip" && c.peek(1) === "to") {
    family = 4;
    c.i++;
  } else if (c.peek() === "ip6" && c.peek(1) === "to") {
    family = 6;
    c.i++;
  }
  let to: NftNatTo | undefined;
  if (c.peek() === "to") {
    c.i++;
    const k = keyAt(c);
    if (k) {
      c.expect("map");
      // the map's data: an address, or an address . port (kube-proxy's endpoint maps)
      const dataTypes: NftValueType[] = ["addr"];
      const save = c.i;
      const probe = (): boolean => {
        // look ahead for "a . b" data after the first ':' of an anonymous map
        let j = save;
        while (j < c.w.length && c.w[j] !== ":") j++;
        return c.w[j + 2] === ".";
      };
      if (probe()) dataTypes.push("port");
      to = { kind: "map", key: k.key, map: mapRefAt(c, k.types, dataTypes) };
    } else {
      to = { kind: "fixed", ...natAddrPort(c.next(), family) };
    }
  }
  const flags: string[] = [];
  while (c.peek() !== undefined && NAT_FLAGS.has(c.peek()!)) flags.push(c.next());
  while (c.peek() === ",") {
    c.i++;
    flags.push(c.next());
  }
  return { kind, ...(to ? { to } : {}), flags };
}

/** A key of one bitmask selector (`ct state`, `ct status`), where `!` denies every listed bit. */
function isFlagKey(k: { readonly selectors: readonly { readonly key: string }[] }): boolean {
  const s = k.selectors;
  return s.length === 1 && (s[0]!.key === "ct state" || s[0]!.key === "ct status");
}

/** Whether the word after `ct mark` ends the expression (`meta mark set ct mark`). */
function ops0(next: string | undefined): boolean {
  return next === undefined || !["|", "^", "&", "or", "xor", "and"].includes(next);
}

/** `meta mark set meta mark | 0x4000`, `mark set mark or 0x1`, `meta mark set 0x10`. */
function markSetAt(c: Cursor): NftStatement {
  const t = c.peek();
  if ((t === "meta" && c.peek(1) === "mark") || t === "mark") {
    c.i += t === "meta" ? 2 : 1;
    const opWord = c.next();
    const ops: Record<string, "or" | "xor" | "and"> = {
      "|": "or",
      or: "or",
      "^": "xor",
      xor: "xor",
      "&": "and",
      and: "and",
    };
    const op = ops[opWord];
    if (!op) throw new RuleError(`expected |, ^ or & after the mark, found "${opWord}"`);
    const v = atomOrThrow(c.next(), "mark");
    const value = (v as { lo: bigint }).lo;
    const op2 = ops[c.peek() ?? ""];
    if (!op2) return { kind: "mark-set", op, value };
    c.i++;
    const v2 = atomOrThrow(c.next(), "mark");
    if (ops[c.peek() ?? ""]) throw new RuleError("a mark expression of more than two operations");
    return { kind: "mark-set", op, value, second: { op: op2, value: (v2 as { lo: bigint }).lo } };
  }
  if (t === "ct" && c.peek(1) === "mark" && ops0(c.peek(2))) {
    c.i += 2;
    return { kind: "mark-set", op: "set", value: 0n, fromCtMark: true };
  }
  const v = atomOrThrow(c.next(), "mark");
  return { kind: "mark-set", op: "set", value: (v as { lo: bigint }).lo };
}

function statementAt(c: Cursor, comments: string[]): NftStatement | undefined {
  const t = c.peek()!;
  const v = verdictAt(c);
  if (v) return { kind: "verdict", verdict: v };
  switch (t) {
    case "counter": {
      c.i++;
      if (c.peek() === "packets") c.i += 4;
      return { kind: "counter" };
    }
    case "comment": {
      c.i++;
      comments.push(unquote(c.next()));
      return undefined;
    }
    case "notrack":
      c.i++;
      return { kind: "notrack" };
    case "log": {
      c.i++;
      while (
        ["prefix", "level", "group", "snaplen", "queue-threshold", "flags"].includes(c.peek()!)
      ) {
        c.i += 2;
      }
      return { kind: "log" };
    }
    case "reject": {
      c.i++;
      if (c.peek() !== "with") return { kind: "reject" };
      c.i++;
      const what = [c.next()];
      if (what[0] === "tcp") what.push(c.next());
      else {
        if (c.peek() === "type") c.i++;
        if (c.peek() !== undefined) what.push(c.next());
      }
      return { kind: "reject", with: what.join(" ") };
    }
    case "dnat":
    case "snat":
    case "masquerade":
    case "redirect":
      c.i++;
      return natAt(c, t);
  }
  // meta mark set ..., mark set ...
  if (
    (t === "meta" && c.peek(1) === "mark" && c.peek(2) === "set") ||
    (t === "mark" && c.peek(1) === "set")
  ) {
    c.i += t === "meta" ? 3 : 2;
    return markSetAt(c);
  }
  // ct mark set meta mark / ct mark set mark (CONNMARK --save-mark)
  if (t === "ct" && c.peek(1) === "mark" && c.peek(2) === "set") {
    const isMeta = c.peek(3) === "meta" && c.peek(4) === "mark";
    const isMark = c.peek(3) === "mark";
    const n = isMeta ? 5 : isMark ? 4 : 0;
    if (n > 0 && ops0(c.peek(n))) {
      c.i += n;
      return { kind: "ct-mark-save" };
    }
  }
  if ((t === "meta" || t === "ct") && c.peek(1) === "nftrace" && c.peek(2) === "set") {
    c.i += 4;
    return { kind: "log" };
  }
  // `update @set { ip saddr }`, `add @set { ip saddr timeout 3h }`: a dynamic set's update
  if ((t === "update" || t === "add") && c.peek(1)?.startsWith("@") && c.peek(2) === "{") {
    c.i += 3;
    while (c.next() !== "}");
    return { kind: "set-update" };
  }
  const k = keyAt(c);
  if (!k) throw new RuleError(`"${t}" is not an expression podpath reads`);
  if (c.peek() === "vmap") {
    c.i++;
    return { kind: "vmap", key: k.key, map: mapRefAt(c, k.types) };
  }
  let op: "==" | "!=" | "<" | ">" | "<=" | ">=" = "==";
  if (c.peek() !== undefined && OPS.has(c.peek()!)) op = c.next() as typeof op;
  else if (c.peek() === "!" && isFlagKey(k.key)) {
    // `ct state ! established,related` (nft 1.0's listing): none of the bits is set
    c.i++;
    op = "!=";
  }
  if (c.done())
    throw new RuleError(`expected a value after ${k.key.selectors.map((s) => s.text).join(" . ")}`);
  const right = setRefAt(c, k.types);
  if (right.kind === "named" && !c.scope.setTypes(right.name)) {
    throw new RuleError(`the set @${right.name} is not in the table`);
  }
  return { kind: "match", key: k.key, op, right };
}

/**
 * Reads one rule's statements from its words (handle already split off).
 *
 * @example
 * parseNftRuleText('ip daddr . meta l4proto . th dport vmap @service-ips', scope).statements
 * // [{ kind: "vmap", key: { selectors: [daddr, l4proto, dport] }, map: { kind: "named", ... } }]
 */
export function parseNftRuleText(words: readonly string[], scope: RuleScope): ParsedRule {
  const c = new Cursor(words, scope);
  const statements: NftStatement[] = [];
  const comments: string[] = [];
  let problem: string | undefined;
  while (!c.done()) {
    const start = c.i;
    try {
      const s = statementAt(c, comments);
      if (s) statements.push(s);
    } catch (e) {
      if (!(e instanceof RuleError)) throw e;
      problem = e.message;
      statements.push({ kind: "unknown", text: words.slice(start).join(" ") });
      break;
    }
  }
  return {
    statements,
    ...(comments.length > 0 ? { comment: comments.join(" ") } : {}),
    ...(problem ? { problem } : {}),
  };
}

/** The value types of a named set's key, from its declared types. */
export function valueTypes(setTypes: readonly string[]): NftValueType[] {
  return setTypes.map(valueTypeOfSetType);
}

/**
 * The elements of a set or map listing (`elements = { ... }`'s words between the braces). A map's
 * data is read as verdicts when `dataTypes` is "verdict", else as values of those types.
 */
export function parseElementList(
  words: readonly string[],
  keyTypes: readonly NftValueType[],
  dataTypes: readonly NftValueType[] | "verdict" | undefined,
): { elements: NftElement[]; data?: NftMapData[]; problem?: string } {
  const c = new Cursor(["{", ...words, "}"], { setTypes: () => undefined });
  const elements: NftElement[] = [];
  const data: NftMapData[] = [];
  try {
    c.i++;
    while (c.peek() !== "}") {
      elements.push(elementAt(c, keyTypes));
      if (dataTypes !== undefined) {
        c.expect(":");
        data.push(mapDataAt(c, dataTypes === "verdict" ? undefined : dataTypes));
      }
      if (c.peek() === ",") c.i++;
      else if (c.peek() !== "}") throw new RuleError(`expected "," or "}", found "${c.peek()}"`);
    }
  } catch (e) {
    if (!(e instanceof RuleError)) throw e;
    return { elements, ...(dataTypes ? { data } : {}), problem: e.message };
  }
  return { elements, ...(dataTypes ? { data } : {}) };
}
