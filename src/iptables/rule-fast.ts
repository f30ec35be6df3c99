/**
 * @module iptables/rule-fast — the fast reader for rule lines as iptables-save prints them:
 * `[base options] (-m MODULE options)* [-j TARGET options]` is cut into those segments and an
 * identical segment seen before in the same dump reuses its interpretation. Anything unusual
 * (implicit modules, options after the target, problems) falls back to {@link parseRuleArgs} on
 * the whole line, which is the reference behaviour; a property test holds the two equal.
 *
 * {@link checkRuleAt} does the same cut in place on the dump's text and builds nothing: a dump's
 * lines are checked when it is read and built when asked for (iptables/saved-rule).
 *
 * Measured for the CLI, which reads a dump once in a fresh process: most of that reading runs
 * before the optimizing compiler has reached these functions, and there the engine's own string
 * functions (indexOf, slice, startsWith, Map lookups) beat loops over character codes written
 * here. Recognising repeated match segments by a hash of their characters instead of copying them
 * out for the cache's Map gained nothing measurable on a warmed-up parse of a 10k-service dump
 * and cost a cold one about 10% (min of 10 fresh processes each), and was dropped.
 */
import type { Family } from "../net/cidr.ts";
import type { Match, Target } from "./dump.ts";
import {
  isProtocolOption,
  PROTO_NAMES,
  parseIface,
  parseRuleArgs,
  protoMatch,
  type RuleParts,
} from "./rule-args.ts";
import { KNOWN_TARGETS } from "./target-spec.ts";
import { tokenize } from "./tokenize.ts";
import { isPlainCidrV4, isPlainHostPortV4, parseAddr, parseNatRange } from "./values.ts";

export type BaseParts = Omit<RuleParts, "matches" | "target" | "counters">;

/**
 * Interpretations of segments already seen in this dump. Match and target objects are immutable
 * and carry no position, so identical ones (kube-proxy repeats the same port and probability
 * thousands of times) are shared rather than rebuilt. One per dump, kept with it (its rules are
 * built with it when asked for); nothing is shared between dumps.
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

/**
 * One segment read alone, when it reads the same alone as within any rule: without a problem,
 * and without options a module podpath does not know took only because no `-p` stood before it
 * (`-p tcp -m foo --dport 80` gives `--dport` to tcp, `-m foo --dport 80` alone to foo).
 */
function segmentAlone(text: string, family: Family): RuleParts | undefined {
  const tk = tokenize(text);
  if (tk.unterminatedQuoteAt !== undefined) return undefined;
  scratchProblems.length = 0;
  const parts = parseRuleArgs(tk.tokens, tk.quoted, 0, family, scratchProblems);
  if (scratchProblems.length > 0 || parts.counters !== undefined) return undefined;
  for (const m of parts.matches) {
    if (m.kind === "opaque" && m.options.some((o) => isProtocolOptionMemo(o.name)))
      return undefined;
  }
  return parts;
}

/** {@link isProtocolOption}, remembered by name: a dump repeats a few option names many times. */
const protocolOptions = new Map<string, boolean>();
function isProtocolOptionMemo(name: string): boolean {
  let r = protocolOptions.get(name);
  if (r === undefined) {
    r = isProtocolOption(name);
    if (protocolOptions.size < 1024) protocolOptions.set(name, r);
  }
  return r;
}

const BOUNDARY_M = 109; // m
const BOUNDARY_J = 106; // j
const BOUNDARY_G = 103; // g
const SPACE = 32;
const QUOTE = 34;
const BACKSLASH = 92;
const DASH = 45;
const BANG = 33;

/** Does the " -" at `cand` start a segment, " -m ", " -j " or " -g " (or one ending at `end`)? */
function isBoundaryAt(text: string, cand: number, end: number): boolean {
  if (cand + 2 >= end) return false;
  const k = text.charCodeAt(cand + 2);
  return (
    (k === BOUNDARY_M || k === BOUNDARY_J || k === BOUNDARY_G) &&
    (cand + 3 === end || text.charCodeAt(cand + 3) === SPACE)
  );
}

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
  const fast = buildRule(line, from, family, cache);
  if (fast) return fast;
  const tk = tokenize(line, from);
  if (tk.unterminatedQuoteAt !== undefined) {
    problems.push(
      `quote opened at column ${tk.unterminatedQuoteAt + 1} is never closed; expected a closing "`,
    );
  }
  return parseRuleArgs(tk.tokens, tk.quoted, 0, family, problems);
}

/**
 * Where the next `needle` is in a text at or after a position, remembered: asked again for a
 * position before the answer, it answers without searching.
 */
class NextOf {
  readonly #text: string;
  readonly #needle: string;
  #at = -1;
  #from = 0;

  constructor(text: string, needle: string) {
    this.#text = text;
    this.#needle = needle;
  }

  /** The first occurrence at or after `p`, or the text's length when there is none. */
  at(p: number): number {
    if (this.#at < p || p < this.#from) {
      const q = this.#text.indexOf(this.#needle, p);
      this.#at = q < 0 ? this.#text.length : q;
      this.#from = p;
    }
    return this.#at;
  }
}

/**
 * Where the next quote, backslash, " -", tab and carriage return are in a dump's text, at or
 * after the last position asked for. Lines are checked in order, so each search starts where the
 * last one ended and the whole text is searched once (a search bounded by the line would start
 * again on every line, and one that is not would cross the rest of the text on every line).
 */
export class TextCursor {
  readonly text: string;
  readonly #quote: NextOf;
  readonly #backslash: NextOf;
  readonly #spaceDash: NextOf;
  readonly #tab: NextOf;
  readonly #cr: NextOf;

  constructor(text: string) {
    this.text = text;
    this.#quote = new NextOf(text, '"');
    this.#backslash = new NextOf(text, "\\");
    this.#spaceDash = new NextOf(text, " -");
    this.#tab = new NextOf(text, "\t");
    this.#cr = new NextOf(text, "\r");
  }

  /** The first `"` at or after `p` (`text.length` when none). */
  quote(p: number): number {
    return this.#quote.at(p);
  }

  /** The first backslash at or after `p` (`text.length` when none). */
  backslash(p: number): number {
    return this.#backslash.at(p);
  }

  /** The first " -" at or after `p` (`text.length` when none). */
  spaceDash(p: number): number {
    return this.#spaceDash.at(p);
  }

  /**
   * The first tab or carriage return at or after `p` (`text.length` when none): the general
   * reader splits arguments on them too, the checker only on spaces.
   */
  otherSpace(p: number): number {
    return Math.min(this.#tab.at(p), this.#cr.at(p));
  }
}

/**
 * Checks the rule arguments in `text[from, stop)` (a line of a dump, just after `-A CHAIN `) the
 * way {@link parseRuleText} reads them, without building them and without copying the line: the
 * segments are cut where the cursor finds them, the ones seen before are looked up, new ones are
 * read and kept. Returns {@link NOT_CHECKED} when the line is not one the fast reader takes (read
 * it with {@link parseRuleText} then, which reports its problems); otherwise the line reads
 * without a problem, and the result is where the name of the chain it jumps or goes to starts
 * (the name runs to `stop`), or {@link NO_JUMP}. {@link materializeRule} reads an accepted line,
 * with the same cache, to exactly what {@link parseRuleText} gives. Lines of one text must be
 * checked in order.
 */
export function checkRuleAt(
  cur: TextCursor,
  from: number,
  stop: number,
  family: Family,
  cache: SegmentCache,
): number {
  const text = cur.text;
  if (cur.otherSpace(from) < stop) return NOT_CHECKED; // tabs, a carriage return inside
  let jump = NO_JUMP;
  let baseEnd = stop;
  let segStart = -1;
  let segIsTarget = false;
  let targetSeen = false;
  // the quoted part of the current segment when it has exactly one (a comment's text)
  let quotes = 0;
  let open = -1;
  let close = -1;
  let quote = cur.quote(from);
  // boundaries are " -m ", " -j ", " -g " outside quotes; one may be the space before `from`
  // (a rule without base options)
  let search = from > 0 ? from - 1 : 0;
  for (;;) {
    let cand = cur.spaceDash(search);
    if (cand >= stop) cand = stop;
    // the quoted parts before the candidate; a boundary inside quotes is none
    while (quote < cand) {
      const q = cur.quote(quote + 1);
      if (q >= stop) return NOT_CHECKED; // never closed: the general reader says so
      if (cur.backslash(quote + 1) < q) return NOT_CHECKED; // escapes: for the general reader
      quotes++;
      open = quote;
      close = q;
      quote = cur.quote(q + 1);
      if (q > cand) {
        cand = cur.spaceDash(q + 1);
        if (cand >= stop) cand = stop;
      }
    }
    if (cand < stop && !isBoundaryAt(text, cand, stop)) {
      search = cand + 2;
      continue;
    }
    // a segment ends at cand
    if (segStart < 0) baseEnd = cand;
    else {
      if (targetSeen) return NOT_CHECKED; // something after the target
      if (segIsTarget) {
        const t = checkTarget(text, segStart, cand, family, cache, quotes === 0);
        if (t === NOT_CHECKED) return NOT_CHECKED;
        jump = t;
        targetSeen = true;
      } else if (
        !(
          quotes === 1 &&
          open === segStart + COMMENT_PREFIX.length - 1 &&
          close === cand - 1 &&
          text.startsWith(COMMENT_PREFIX, segStart)
        )
      ) {
        // not a plain comment (those are read directly when built)
        if (readMatch(text.slice(segStart, cand), family, cache) === undefined) return NOT_CHECKED;
      }
    }
    if (cand >= stop) break;
    segStart = cand + 1;
    segIsTarget = text.charCodeAt(cand + 2) !== BOUNDARY_M;
    quotes = 0;
    search = cand + 3;
  }
  if (baseEnd > from && !(family === 4 && isPlainBaseV4(text, from, baseEnd))) {
    if (readBase(text.slice(from, baseEnd), family, cache) === undefined) return NOT_CHECKED;
  }
  return jump;
}

/** {@link checkRuleAt}: the line is not one the fast reader takes. */
export const NOT_CHECKED = -1;
/** {@link checkRuleAt}: the line's target is not a chain. */
export const NO_JUMP = 0;

/**
 * {@link checkRuleAt} on one line: undefined when it is not on the fast path, else the chain it
 * jumps or goes to ("" when none).
 */
export function checkRuleText(
  line: string,
  from: number,
  family: Family,
  cache: SegmentCache,
): string | undefined {
  const r = checkRuleAt(new TextCursor(line), from, line.length, family, cache);
  return r === NOT_CHECKED ? undefined : r === NO_JUMP ? "" : line.slice(r);
}

/** The parts of a line {@link checkRuleAt} accepted, read with the same cache. */
export function materializeRule(
  line: string,
  from: number,
  family: Family,
  cache: SegmentCache,
): RuleParts {
  // the general reader is not reached for a line checkRuleAt accepted (a property test holds it)
  return buildRule(line, from, family, cache) ?? parseRuleText(line, from, family, [], cache);
}

/**
 * The base options alone (`-s -d -i -o -p -f`) of a line {@link checkRuleAt} accepted, read with
 * the same cache: indexing a chain on destinations needs no more. The same objects as the whole
 * reading gives, when they are cached; equal ones otherwise.
 */
export function materializeBase(
  line: string,
  from: number,
  family: Family,
  cache: SegmentCache,
): BaseParts {
  // an accepted line has no quote in its base options: the first boundary ends them
  let search = from > 0 ? from - 1 : 0;
  let end = line.length;
  for (;;) {
    const cand = line.indexOf(" -", search);
    if (cand < 0) break;
    if (isBoundaryAt(line, cand, line.length)) {
      end = cand;
      break;
    }
    search = cand + 2;
  }
  if (end <= from) return NO_BASE;
  const quote = line.indexOf('"', from);
  const base =
    quote >= 0 && quote < end ? undefined : readBase(line.slice(from, end), family, cache);
  if (base !== undefined) return base;
  const {
    matches: _m,
    target: _t,
    counters: _c,
    ...rest
  } = materializeRule(line, from, family, cache);
  return rest;
}

const NO_BASE: BaseParts = Object.freeze({});

/** Puts the base options `base` has into `parts` (the same objects). */
export function assignBase(
  parts: { -readonly [K in keyof BaseParts]?: BaseParts[K] | undefined },
  base: BaseParts,
): void {
  if (base.protocol) parts.protocol = base.protocol;
  if (base.src) parts.src = base.src;
  if (base.dst) parts.dst = base.dst;
  if (base.inIface) parts.inIface = base.inIface;
  if (base.outIface) parts.outIface = base.outIface;
  if (base.fragment) parts.fragment = base.fragment;
}

/**
 * The target segment `text[a, b)` (`-j ...` or `-g ...`, the last of its line): where the name of
 * the chain it names starts, {@link NO_JUMP}, or {@link NOT_CHECKED}. `unquoted`: the segment
 * holds no quote.
 */
function checkTarget(
  text: string,
  a: number,
  b: number,
  family: Family,
  cache: SegmentCache,
  unquoted: boolean,
): number {
  const sp = text.indexOf(" ", a + 3);
  if (b - a > 3 && unquoted && (sp < 0 || sp >= b)) {
    // `-j CHAIN` alone: kube-proxy has one per service and endpoint, all different (and longer
    // than any target's name, so not copied out to be told from one)
    if (b - a - 3 > LONGEST_TARGET || !KNOWN_TARGETS.has(text.slice(a + 3, b))) return a + 3;
  } else if (
    family === 4 &&
    text.startsWith(DNAT_PREFIX, a) &&
    isPlainHostPortV4(text, a + DNAT_PREFIX.length, b)
  ) {
    return NO_JUMP; // `-j DNAT --to-destination ADDR:PORT`: one per endpoint, all different
  }
  const t = readTarget(text.slice(a, b), family, cache);
  if (t === undefined) return NOT_CHECKED;
  if (t.kind !== "chain") return NO_JUMP;
  // a chain named otherwise than as written (in quotes): for the general reader
  return b - a - 3 === t.name.length && text.startsWith(t.name, a + 3) ? a + 3 : NOT_CHECKED;
}

const LONGEST_TARGET = Math.max(...[...KNOWN_TARGETS].map((t) => t.length));

/** Index of the first space in `text[a, b)`, or b. */
function spaceOrEnd(text: string, a: number, b: number): number {
  const sp = text.indexOf(" ", a);
  return sp < 0 || sp > b ? b : sp;
}

/** Index of the quote that closes a quoted argument opened before `from`, or -1. */
function closingQuote(line: string, from: number): number {
  let q = line.indexOf('"', from);
  while (q >= 0) {
    let bs = 0;
    while (line.charCodeAt(q - 1 - bs) === BACKSLASH) bs++;
    if (bs % 2 === 0) return q;
    q = line.indexOf('"', q + 1);
  }
  return -1;
}

/** Builds the parts of a line in iptables-save's form, or undefined when it is not one. */
function buildRule(
  line: string,
  from: number,
  family: Family,
  cache: SegmentCache,
): RuleParts | undefined {
  const n = line.length;
  // the general reader also splits on tabs and carriage returns; this one only on spaces
  if (line.indexOf("\t", from) >= 0 || line.indexOf("\r", from) >= 0) return undefined;
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
    // skip the quoted parts before the candidate; a quote never closed is not for this reader
    while (quote >= 0 && (cand < 0 || quote < cand)) {
      const close = closingQuote(line, quote + 1);
      if (close < 0) return undefined;
      quote = line.indexOf('"', close + 1);
      if (cand >= 0 && close > cand) cand = line.indexOf(" -", close + 1);
    }
    if (cand >= 0 && !isBoundaryAt(line, cand, n)) {
      search = cand + 2;
      continue;
    }
    const end = cand < 0 ? n : cand;
    if (segStart < 0) baseEnd = end;
    else {
      if (target) return undefined; // something after the target
      const seg = line.slice(segStart, end);
      if (segIsTarget) {
        const name =
          seg.length > 3 && seg.indexOf(" ", 3) < 0 && seg.indexOf('"', 3) < 0
            ? seg.slice(3)
            : undefined;
        if (name !== undefined && !KNOWN_TARGETS.has(name)) {
          target = { kind: "chain", name, goto: seg.charCodeAt(1) === BOUNDARY_G };
        } else {
          target = readTarget(seg, family, cache);
          if (target === undefined) return undefined;
        }
      } else {
        const m = readMatch(seg, family, cache);
        if (m === undefined) return undefined;
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
    base = readBase(line.slice(from, baseEnd), family, cache);
    if (base === undefined) return undefined;
  }
  // exactly sized: a dump holds hundreds of thousands of these arrays
  const out: RuleParts = { matches: matches.slice() };
  if (base) assignBase(out, base);
  if (target) out.target = target;
  return out;
}

/** A `-m MODULE ...` segment: a plain comment directly, the rest cached; undefined if unusual. */
function readMatch(seg: string, family: Family, cache: SegmentCache): Match | undefined {
  // comments are mostly different from rule to rule: read them directly, unhashed
  const direct = directComment(seg);
  if (direct) return direct;
  const key = family === 4 ? seg : `6 ${seg}`;
  let m = cache.match.get(key);
  if (m === undefined) {
    const parts = segmentAlone(seg, family);
    if (!parts || parts.target || parts.matches.length !== 1 || hasBase(parts)) return undefined;
    m = parts.matches[0]!;
    remember(cache.match, key, m);
  }
  return m;
}

/** A target segment other than a bare chain: DNAT to one endpoint directly, the rest cached. */
function readTarget(seg: string, family: Family, cache: SegmentCache): Target | undefined {
  if (seg.startsWith(DNAT_PREFIX) && seg.indexOf(" ", DNAT_PREFIX.length) < 0) {
    // `-j DNAT --to-destination ADDR:PORT`: one per endpoint, all different
    const r = parseNatRange(seg.slice(DNAT_PREFIX.length), family);
    if (r.ok) {
      return {
        kind: "DNAT",
        name: "DNAT",
        to: r.value,
        random: false,
        randomFully: false,
        persistent: false,
      };
    }
  }
  const key = family === 4 ? seg : `6 ${seg}`;
  let t = cache.target.get(key);
  if (t === undefined) {
    const parts = segmentAlone(seg, family);
    if (!parts?.target || parts.matches.length > 0 || hasBase(parts)) return undefined;
    t = parts.target;
    remember(cache.target, key, t);
  }
  return t;
}

/** The base options (`-s -d -i -o -p -f`, each with its `!`): cached unless they hold an address. */
function readBase(baseText: string, family: Family, cache: SegmentCache): BaseParts | undefined {
  const key = family === 4 ? baseText : `6 ${baseText}`;
  let base = cache.base.get(key);
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
  return base;
}

const DNAT_PREFIX = "-j DNAT --to-destination ";
const COMMENT_PREFIX = '-m comment --comment "';

/** `-m comment --comment "text"` without escapes, read without tokenizing. */
function directComment(seg: string): Match | undefined {
  const n = seg.length;
  if (!isPlainCommentAt(seg, 0, n)) return undefined;
  const text = seg.slice(COMMENT_PREFIX.length, n - 1);
  return {
    kind: "comment",
    module: "comment",
    comment: text,
    options: [{ name: "--comment", negated: false, values: [text] }],
  };
}

/** Is `text[a, b)` `-m comment --comment "..."` with no quote or backslash inside the quotes? */
function isPlainCommentAt(text: string, a: number, b: number): boolean {
  if (b - a <= COMMENT_PREFIX.length || text.charCodeAt(b - 1) !== QUOTE) return false;
  if (!text.startsWith(COMMENT_PREFIX, a)) return false;
  for (let i = a + COMMENT_PREFIX.length; i < b - 1; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE || c === BACKSLASH) return false;
  }
  return true;
}

/** Base options in iptables-save's form (`! -s A -d B -i X -o Y -p P`), or undefined. */
function directBase(text: string, family: Family): BaseParts | undefined {
  const t = text.split(" ");
  const out: BaseParts = {};
  let neg = false;
  for (let i = 0; i < t.length; i++) {
    const tok = t[i]!;
    if (tok === "!") {
      if (neg) return undefined; // "!" twice: the general reader says so
      neg = true;
      continue;
    }
    const v = t[i + 1];
    if (v === undefined || v === "" || v === "!" || v.charCodeAt(0) === DASH) return undefined;
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

const OPT_S = 115; // s
const OPT_D = 100; // d
const OPT_P = 112; // p
const OPT_I = 105; // i
const OPT_O = 111; // o

/**
 * Would {@link directBase} read `text[from, end)` (IPv4) without a problem? Checked in place,
 * without building anything, for the common forms only: false means "read it the usual way".
 */
function isPlainBaseV4(text: string, from: number, end: number): boolean {
  let i = from;
  let neg = false;
  while (i < end) {
    const sp = spaceOrEnd(text, i, end);
    if (sp === i + 1 && text.charCodeAt(i) === BANG) {
      if (neg) return false;
      neg = true;
      i = sp + 1;
      continue;
    }
    // an option "-x", then its value
    if (sp !== i + 2 || sp >= end || text.charCodeAt(i) !== DASH) return false;
    const opt = text.charCodeAt(i + 1);
    const v = sp + 1;
    const ve = spaceOrEnd(text, v, end);
    if (ve === v) return false;
    const c0 = text.charCodeAt(v);
    if (c0 === DASH || c0 === BANG || c0 === QUOTE) return false;
    if (opt === OPT_S || opt === OPT_D) {
      if (!isPlainCidrV4(text, v, ve)) return false;
    } else if (opt === OPT_P) {
      if (!isPlainProto(text, v, ve)) return false;
    } else if (opt === OPT_I || opt === OPT_O) {
      if (ve - v > 16 || !isPlainName(text, v, ve)) return false;
    } else return false;
    neg = false;
    i = ve + 1;
  }
  return !neg && i === end + 1;
}

/** `tcp`, `udp`, `icmp` or `sctp` at `text[v, ve)`: protocols directBase keeps by name. */
function isPlainProto(text: string, v: number, ve: number): boolean {
  const n = ve - v;
  if (n === 3) return text.startsWith("tcp", v) || text.startsWith("udp", v);
  if (n === 4) return text.startsWith("icmp", v) || text.startsWith("sctp", v);
  return false;
}

/** An interface name without quotes or backslashes (the tokenizer would read those). */
function isPlainName(text: string, v: number, ve: number): boolean {
  for (let i = v; i < ve; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE || c === BACKSLASH || c === 9 || c === 13) return false;
  }
  return true;
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
