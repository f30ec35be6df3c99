/**
 * @module iptables/rule-fast — the fast reader for rule lines as iptables-save prints them:
 * `[base options] (-m MODULE options)* [-j TARGET options]` is cut into those segments and an
 * identical segment seen before in the same dump reuses its interpretation. Anything unusual
 * (implicit modules, options after the target, problems) falls back to {@link parseRuleArgs} on
 * the whole line, which is the reference behaviour; a property test holds the two equal.
 */
import type { Family } from "../net/cidr.ts";
import type { Match, Target } from "./dump.ts";
import { PROTO_NAMES, parseIface, parseRuleArgs, protoMatch, type RuleParts } from "./rule-args.ts";
import { KNOWN_TARGETS } from "./target-spec.ts";
import { tokenize } from "./tokenize.ts";
import { parseAddr, parseNatRange } from "./values.ts";

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
          if (!parts?.target || parts.matches.length > 0 || hasBase(parts)) return undefined;
          t = parts.target;
          remember(cache.target, key, t);
        }
        target = t;
      } else {
        // comments are mostly different from rule to rule: read them directly, unhashed
        let m = directComment(seg) ?? cache.match.get(key);
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
