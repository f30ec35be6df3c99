/**
 * @module iptables/rule-args — reads the arguments of one rule (everything after `-A CHAIN`) into
 * its parts: base matches (-s -d -i -o -p -f), match modules, target. Options are given to the
 * module or target that owns them, the way iptables does, so the ip-masq-agent's
 * `-j MASQUERADE --random-fully -p tcp -m statistic ... --to-ports N` form reads correctly.
 */
import type { Family } from "../net/cidr.ts";
import type {
  AddrMatch,
  Counters,
  IfaceMatch,
  Match,
  ModuleOption,
  ProtoMatch,
  Target,
} from "./dump.ts";
import { interpretMatch, MODULE_OPTIONS, OPTION_ALIASES } from "./match-spec.ts";
import { interpretTarget, KNOWN_TARGETS, TARGET_OPTIONS } from "./target-spec.ts";
import { tokenize } from "./tokenize.ts";
import { parseAddr, parseNatRange } from "./values.ts";

export interface RuleParts {
  protocol?: ProtoMatch;
  src?: AddrMatch;
  dst?: AddrMatch;
  inIface?: IfaceMatch;
  outIface?: IfaceMatch;
  fragment?: { readonly negated: boolean };
  matches: Match[];
  target?: Target;
  /** `-c PKTS BYTES` inside the rule (`iptables -S -v`). */
  counters?: Counters;
}

/** IANA numbers to the names iptables-save prints (from /etc/protocols). */
const PROTO_NAMES: Readonly<Record<string, string>> = {
  "1": "icmp",
  "2": "igmp",
  "4": "ipencap",
  "6": "tcp",
  "17": "udp",
  "33": "dccp",
  "41": "ipv6",
  "47": "gre",
  "50": "esp",
  "51": "ah",
  "58": "ipv6-icmp",
  "132": "sctp",
  "136": "udplite",
};

/** The implicit match module a protocol brings (`-p tcp --dport 80` loads `-m tcp`). */
const PROTO_MODULE: Readonly<Record<string, string>> = {
  tcp: "tcp",
  udp: "udp",
  udplite: "udplite",
  sctp: "sctp",
  dccp: "dccp",
  icmp: "icmp",
  "ipv6-icmp": "icmp6",
  icmpv6: "icmp6",
};

const BASE: Readonly<Record<string, string>> = {
  "-s": "s",
  "--source": "s",
  "--src": "s",
  "-d": "d",
  "--destination": "d",
  "--dst": "d",
  "-i": "i",
  "--in-interface": "i",
  "-o": "o",
  "--out-interface": "o",
  "-p": "p",
  "--protocol": "p",
  "-f": "f",
  "--fragment": "f",
  "-m": "m",
  "--match": "m",
  "-j": "j",
  "--jump": "j",
  "-g": "g",
  "--goto": "g",
  "-c": "c",
  "--set-counters": "c",
  "-4": "4",
  "--ipv4": "4",
  "-6": "6",
  "--ipv6": "6",
};

interface Ctx {
  module: string;
  options: ModuleOption[];
  isTarget: boolean;
  isGoto: boolean;
  /** Loaded by `-p PROTO` and a port option, without `-m`. */
  implicit?: boolean;
}

function knows(ctx: Ctx, opt: string): boolean {
  const table = ctx.isTarget ? TARGET_OPTIONS[ctx.module] : MODULE_OPTIONS[ctx.module];
  if (!table) return false;
  return table.includes(opt) || (ctx.module === "tcp" && opt === "--syn");
}

function isKnownCtx(ctx: Ctx): boolean {
  return ctx.isTarget
    ? TARGET_OPTIONS[ctx.module] !== undefined
    : MODULE_OPTIONS[ctx.module] !== undefined;
}

function parseIface(text: string, negated: boolean): IfaceMatch | string {
  if (text.length === 0 || text.length > 16)
    return `interface name ${JSON.stringify(text)} is not 1-15 characters`;
  const wildcard = text.endsWith("+");
  return { name: wildcard ? text.slice(0, -1) : text, wildcard, negated };
}

/** Options with required arguments, by count (the rest are read by shape). */
const ARITY: Readonly<Record<string, number>> = {
  "--comment": 1,
  "--log-prefix": 1,
  "--nflog-prefix": 1,
  "--log-level": 1,
  "--sport": 1,
  "--dport": 1,
  "--sports": 1,
  "--dports": 1,
  "--ports": 1,
  "--icmp-type": 1,
  "--icmpv6-type": 1,
  "--tcp-flags": 2,
  "--tcp-option": 1,
  "--mark": 1,
  "--ctstate": 1,
  "--state": 1,
  "--ctstatus": 1,
  "--ctproto": 1,
  "--ctorigsrc": 1,
  "--ctorigdst": 1,
  "--ctreplsrc": 1,
  "--ctrepldst": 1,
  "--ctdir": 1,
  "--mode": 1,
  "--probability": 1,
  "--every": 1,
  "--packet": 1,
  "--src-type": 1,
  "--dst-type": 1,
  "--match-set": 2,
  "--to-ports": 1,
  "--to-source": 1,
  "--to-destination": 1,
  "--to": 1,
  "--set-xmark": 1,
  "--set-mark": 1,
  "--or-mark": 1,
  "--and-mark": 1,
  "--xor-mark": 1,
  "--nfmask": 1,
  "--ctmask": 1,
  "--reject-with": 1,
};

function isQuotedAt(quoted: readonly number[], i: number): boolean {
  return quoted.length > 0 && quoted.includes(i);
}

function isValueAt(tokens: readonly string[], quoted: readonly number[], i: number): boolean {
  const t = tokens[i]!;
  return isQuotedAt(quoted, i) || (t !== "!" && !(t.length > 1 && t.charCodeAt(0) === 45));
}

function interpretCtx(c: Ctx, family: Family, problems: string[]): Match | Target {
  if (c.isTarget) {
    const r = interpretTarget(c.module, c.isGoto, c.options, family);
    for (const p of r.problems) problems.push(p);
    return r.target;
  }
  const r = interpretMatch(c.module, c.options, family);
  for (const p of r.problems) problems.push(p);
  return r.match;
}

/**
 * Reads rule arguments `tokens[from..]`. `quoted` marks arguments that were in quotes (always
 * values). Problems are appended to `problems` as text; the caller attaches file and line.
 */
export function parseRuleArgs(
  tokens: readonly string[],
  quoted: readonly number[],
  from: number,
  family: Family,
  problems: string[],
): RuleParts {
  const parts: RuleParts = { matches: [] };
  const contexts: Ctx[] = [];
  let target: Ctx | undefined;
  let lastCtx: Ctx | undefined;
  let negate = false;
  const n = tokens.length;

  let i = from;
  while (i < n) {
    const tok = tokens[i]!;
    const q = isQuotedAt(quoted, i);
    if (tok === "!" && !q) {
      if (negate) problems.push('"!" twice in a row');
      negate = true;
      i++;
      continue;
    }
    const base = q ? undefined : BASE[tok];
    if (base !== undefined) {
      const neg = negate;
      negate = false;
      if (base === "f") {
        parts.fragment = { negated: neg };
        i++;
        continue;
      }
      if (base === "4" || base === "6") {
        i++;
        continue;
      }
      // old syntax: `-s ! 10.0.0.0/8`
      let j = i + 1;
      let neg2 = neg;
      if (
        tokens[j] === "!" &&
        !isQuotedAt(quoted, j) &&
        base !== "m" &&
        base !== "j" &&
        base !== "g"
      ) {
        neg2 = !neg2;
        j++;
      }
      const value = tokens[j];
      if (value === undefined) {
        problems.push(`${tok} needs a value`);
        break;
      }
      if (base === "c") {
        const pk = tokens[j];
        const by = tokens[j + 1];
        if (pk === undefined || by === undefined || !/^[0-9]+$/.test(pk) || !/^[0-9]+$/.test(by)) {
          problems.push(`${tok} needs two counters (packets bytes)`);
          i = j + 1;
          continue;
        }
        parts.counters = { packets: BigInt(pk), bytes: BigInt(by) };
        i = j + 2;
        continue;
      }
      i = j + 1;
      switch (base) {
        case "s":
        case "d": {
          if (value.includes(",")) {
            problems.push(
              `${tok} ${value}: address lists are expanded into several rules by iptables; save output never has them`,
            );
          }
          const r = parseAddr(value, family);
          if (!r.ok) problems.push(`${tok}: ${r.error}`);
          else if (r.value.prefix === 0 && !neg2) {
            // matches every address: iptables stores no address test and prints none
          } else if (base === "s") parts.src = { cidr: r.value, negated: neg2 };
          else parts.dst = { cidr: r.value, negated: neg2 };
          break;
        }
        case "i":
        case "o": {
          const r = parseIface(value, neg2);
          if (typeof r === "string") problems.push(`${tok}: ${r}`);
          else if (base === "i") parts.inIface = r;
          else parts.outIface = r;
          break;
        }
        case "p": {
          const lower = value.toLowerCase();
          const name = PROTO_NAMES[lower] ?? (lower === "icmpv6" ? "ipv6-icmp" : lower);
          if (name === "all" || name === "0") {
            if (neg2) problems.push("! -p all matches nothing");
          } else parts.protocol = protoMatch(name, neg2);
          break;
        }
        case "m": {
          const ctx: Ctx = {
            module: value.toLowerCase(),
            options: [],
            isTarget: false,
            isGoto: false,
          };
          contexts.push(ctx);
          lastCtx = ctx;
          break;
        }
        case "j":
        case "g": {
          if (target) problems.push(`second ${tok} ${value}: a rule has one target`);
          target = { module: value, options: [], isTarget: true, isGoto: base === "g" };
          lastCtx = target;
          break;
        }
      }
      continue;
    }
    if (!q && tok.startsWith("--")) {
      const name = OPTION_ALIASES[tok] ?? tok;
      const neg = negate;
      negate = false;
      let j = i + 1;
      let postNeg = false;
      // old syntax: `--dport ! 80`
      if (
        tokens[j] === "!" &&
        !isQuotedAt(quoted, j) &&
        j + 1 < n &&
        isValueAt(tokens, quoted, j + 1)
      ) {
        postNeg = true;
        j++;
      }
      const values: string[] = [];
      // getopt gives an option its required arguments even when they look like options
      // (`--comment -A`); unknown options take what follows until the next option
      const arity = ARITY[name];
      if (arity !== undefined) {
        for (let k = 0; k < arity && j < n; k++) values.push(tokens[j++]!);
      } else {
        while (j < n && isValueAt(tokens, quoted, j)) values.push(tokens[j++]!);
      }
      i = j;
      const opt: ModuleOption = { name, negated: neg !== postNeg, values };
      // who owns it: the latest module/target if it knows it, else the other, else the
      // protocol's implicit module, else whoever came last (unknown extensions take anything)
      const lastMatch = contexts.length > 0 ? contexts[contexts.length - 1] : undefined;
      const first = lastCtx === target ? target : lastMatch;
      const second = lastCtx === target ? lastMatch : target;
      let owner: Ctx | undefined;
      if (first !== undefined && knows(first, name)) owner = first;
      else if (second !== undefined && knows(second, name)) owner = second;
      if (!owner && parts.protocol) {
        const implicit = PROTO_MODULE[parts.protocol.name];
        if (
          implicit &&
          (MODULE_OPTIONS[implicit]!.includes(name) || (implicit === "tcp" && name === "--syn"))
        ) {
          owner = contexts.find((c) => c.module === implicit);
          if (!owner) {
            owner = {
              module: implicit,
              options: [],
              isTarget: false,
              isGoto: false,
              implicit: true,
            };
            contexts.push(owner);
          }
        }
      }
      if (!owner) {
        if (first !== undefined && !isKnownCtx(first)) owner = first;
        else if (second !== undefined && !isKnownCtx(second)) owner = second;
      }
      if (!owner) {
        problems.push(`option ${tok} belongs to no match or target on this rule`);
        continue;
      }
      owner.options.push(opt);
      continue;
    }
    problems.push(`unexpected argument ${JSON.stringify(tok)}`);
    i++;
  }
  if (negate) problems.push('"!" at the end of the rule negates nothing');

  for (const c of contexts) parts.matches.push(interpretCtx(c, family, problems) as Match);
  if (target) parts.target = interpretCtx(target, family, problems) as Target;
  return parts;
}

const protoCache = new Map<string, ProtoMatch>();
function protoMatch(name: string, negated: boolean): ProtoMatch {
  const key = negated ? `!${name}` : name;
  let p = protoCache.get(key);
  if (!p) {
    p = { name, negated };
    protoCache.set(key, p);
  }
  return p;
}

export { KNOWN_TARGETS };

// ---- fast path ------------------------------------------------------------------------------
// iptables-save prints every rule as `[base options] (-m MODULE options)* [-j TARGET options]`.
// Cut such a line into those segments and reuse the interpretation of an identical segment seen
// before; anything unusual (implicit modules, options after the target, problems) falls back to
// parseRuleArgs on the whole line, which is the reference behaviour.

type BaseParts = Omit<RuleParts, "matches" | "target" | "counters">;

/**
 * Interpretations of segments already seen in this dump. Match and target objects are immutable
 * and carry no position, so identical ones (kube-proxy repeats the same comment, port and
 * probability thousands of times) are shared rather than rebuilt. One per parse: nothing is kept
 * between dumps.
 */
export interface SegmentCache {
  readonly base: Map<string, BaseParts>;
  readonly match: Map<string, Match>;
  readonly target: Map<string, Target>;
}

export function newSegmentCache(): SegmentCache {
  return { base: new Map(), match: new Map(), target: new Map() };
}

const CACHE_LIMIT = 200_000;
const scratchProblems: string[] = [];

function remember<T>(cache: Map<string, T>, key: string, value: T): void {
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(key, value);
}

function segmentAlone(text: string, family: Family): RuleParts | undefined {
  const tk = tokenize(text);
  if (tk.unterminatedQuoteAt !== undefined) return undefined;
  scratchProblems.length = 0;
  const parts = parseRuleArgs(tk.tokens, tk.quoted, 0, family, scratchProblems);
  return scratchProblems.length === 0 && parts.counters === undefined ? parts : undefined;
}

const BOUNDARY_M = 109; // m
const BOUNDARY_J = 106; // j
const BOUNDARY_G = 103; // g

/**
 * Reads the arguments of a rule line from `from` (just after `-A CHAIN`). Same result as
 * `parseRuleArgs(tokenize(line).tokens, ..., from)`, faster on iptables-save's own output.
 */
export function parseRuleText(
  line: string,
  from: number,
  family: Family,
  problems: string[],
  cache: SegmentCache = newSegmentCache(),
): RuleParts {
  const fast = fastRule(line, from, family, cache);
  if (fast) return fast;
  const tk = tokenize(line, from);
  if (tk.unterminatedQuoteAt !== undefined) {
    problems.push(
      `quote opened at column ${tk.unterminatedQuoteAt + 1} is never closed; expected a closing "`,
    );
  }
  return parseRuleArgs(tk.tokens, tk.quoted, 0, family, problems);
}

/** Index of the quote that closes a quoted argument opened before `from`, or -1. */
function closingQuote(line: string, from: number): number {
  let q = line.indexOf('"', from);
  while (q >= 0) {
    let bs = 0;
    while (line.charCodeAt(q - 1 - bs) === 92) bs++;
    if (bs % 2 === 0) return q;
    q = line.indexOf('"', q + 1);
  }
  return -1;
}

function fastRule(
  line: string,
  from: number,
  family: Family,
  cache: SegmentCache,
): RuleParts | undefined {
  const n = line.length;
  const matches: Match[] = [];
  let target: Target | undefined;
  let baseEnd = n;
  let segStart = -1;
  let segIsTarget = false;
  let quote = line.indexOf('"', from);
  let search = from > 0 ? from - 1 : 0;
  // boundaries are " -m ", " -j ", " -g " outside quotes; found with indexOf, not a char loop
  for (;;) {
    let cand = line.indexOf(" -", search);
    while (cand >= 0 && quote >= 0 && quote < cand) {
      const close = closingQuote(line, quote + 1);
      if (close < 0) return undefined;
      quote = line.indexOf('"', close + 1);
      if (close > cand) cand = line.indexOf(" -", close + 1);
    }
    let isBoundary = false;
    if (cand >= 0) {
      const k = line.charCodeAt(cand + 2);
      isBoundary =
        (k === BOUNDARY_M || k === BOUNDARY_J || k === BOUNDARY_G) &&
        (cand + 3 === n || line.charCodeAt(cand + 3) === 32);
      if (!isBoundary) {
        search = cand + 2;
        continue;
      }
    }
    const end = cand < 0 ? n : cand;
    if (segStart < 0) baseEnd = end;
    else {
      if (target) return undefined; // something after the target
      const seg = line.slice(segStart, end);
      const key = family === 4 ? seg : `6 ${seg}`;
      if (segIsTarget) {
        let t: Target | undefined;
        // `-j CHAIN` alone: kube-proxy has one per service and endpoint, all different
        if (seg.indexOf(" ", 3) < 0 && !KNOWN_TARGETS.has(seg.slice(3)) && seg.length > 3) {
          t = { kind: "chain", name: seg.slice(3), goto: seg.charCodeAt(1) === BOUNDARY_G };
        } else if (seg.startsWith(DNAT_PREFIX) && seg.indexOf(" ", DNAT_PREFIX.length) < 0) {
          // `-j DNAT --to-destination ADDR:PORT`: one per endpoint, all different
          const r = parseNatRange(seg.slice(DNAT_PREFIX.length), family);
          if (r.ok) {
            t = {
              kind: "DNAT",
              name: "DNAT",
              to: r.value,
              random: false,
              randomFully: false,
              persistent: false,
            };
          }
        } else t = cache.target.get(key);
        if (t === undefined) {
          const parts = segmentAlone(seg, family);
          if (!parts || !parts.target || parts.matches.length > 0 || hasBase(parts))
            return undefined;
          t = parts.target;
          remember(cache.target, key, t);
        }
        target = t;
      } else {
        let m = cache.match.get(key);
        if (m === undefined) m = directComment(seg);
        if (m === undefined) {
          const parts = segmentAlone(seg, family);
          if (!parts || parts.target || parts.matches.length !== 1 || hasBase(parts))
            return undefined;
          m = parts.matches[0]!;
          remember(cache.match, key, m);
        }
        matches.push(m);
      }
    }
    if (cand < 0) break;
    segStart = cand + 1;
    segIsTarget = line.charCodeAt(cand + 2) !== BOUNDARY_M;
    search = cand + 3;
  }
  // base options: -s -d -i -o -p -f with "!" (no quotes, no module options)
  let base: BaseParts | undefined;
  if (baseEnd > from) {
    const baseText = line.slice(from, baseEnd);
    const key = family === 4 ? baseText : `6 ${baseText}`;
    base = cache.base.get(key);
    if (base === undefined) {
      if (baseText.includes('"')) return undefined;
      base = directBase(baseText, family);
      if (base === undefined) {
        const parts = segmentAlone(baseText, family);
        if (!parts || parts.target || parts.matches.length > 0) return undefined;
        const { matches: _m, ...rest } = parts;
        base = rest;
      }
      // bases with an address are mostly unique (one per service or endpoint): not kept
      if (base.src === undefined && base.dst === undefined) remember(cache.base, key, base);
    }
  }
  const out: RuleParts = { matches };
  if (base) {
    if (base.protocol) out.protocol = base.protocol;
    if (base.src) out.src = base.src;
    if (base.dst) out.dst = base.dst;
    if (base.inIface) out.inIface = base.inIface;
    if (base.outIface) out.outIface = base.outIface;
    if (base.fragment) out.fragment = base.fragment;
  }
  if (target) out.target = target;
  return out;
}

const DNAT_PREFIX = "-j DNAT --to-destination ";
const COMMENT_PREFIX = '-m comment --comment "';

/** `-m comment --comment "text"` without escapes, read without tokenizing. */
function directComment(seg: string): Match | undefined {
  const n = seg.length;
  if (!seg.startsWith(COMMENT_PREFIX) || seg.charCodeAt(n - 1) !== 34) return undefined;
  const text = seg.slice(COMMENT_PREFIX.length, n - 1);
  if (text.includes('"') || text.includes("\\")) return undefined;
  return {
    kind: "comment",
    module: "comment",
    comment: text,
    options: [{ name: "--comment", negated: false, values: [text] }],
  };
}

/** Base options in iptables-save's form (`! -s A -d B -i X -o Y -p P`), or undefined. */
function directBase(text: string, family: Family): BaseParts | undefined {
  const t = text.split(" ");
  const out: BaseParts = {};
  let neg = false;
  for (let i = 0; i < t.length; i++) {
    const tok = t[i]!;
    if (tok === "!") {
      neg = true;
      continue;
    }
    const v = t[i + 1];
    if (v === undefined || v === "!" || v.charCodeAt(0) === 45) return undefined;
    i++;
    if (tok === "-s" || tok === "-d") {
      const r = parseAddr(v, family);
      if (!r.ok || (r.value.prefix === 0 && !neg)) return undefined;
      if (tok === "-s") out.src = { cidr: r.value, negated: neg };
      else out.dst = { cidr: r.value, negated: neg };
    } else if (tok === "-p") {
      const name = PROTO_NAMES[v] ?? v;
      if (name !== v.toLowerCase() || name === "all" || name === "0") return undefined;
      out.protocol = protoMatch(name, neg);
    } else if (tok === "-i" || tok === "-o") {
      const r = parseIface(v, neg);
      if (typeof r === "string") return undefined;
      if (tok === "-i") out.inIface = r;
      else out.outIface = r;
    } else return undefined;
    neg = false;
  }
  return neg ? undefined : out;
}

function hasBase(p: RuleParts): boolean {
  return (
    p.protocol !== undefined ||
    p.src !== undefined ||
    p.dst !== undefined ||
    p.inIface !== undefined ||
    p.outIface !== undefined ||
    p.fragment !== undefined
  );
}
