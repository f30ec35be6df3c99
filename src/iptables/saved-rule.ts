/**
 * @module iptables/saved-rule — a rule as read from a dump. A line in iptables-save's own form is
 * checked completely when the dump is read (every problem is a diagnostic then), but its matches
 * and target are built only when something asks for them: a kube-proxy node holds hundreds of
 * thousands of rules and a question reaches a few hundred. Lines read the slow way carry their
 * parts from the start. Either way the rule answers exactly as a plain {@link Rule} would.
 */
import type { SourceRef } from "../model/types.ts";
import type { Family } from "../net/cidr.ts";
import type {
  AddrMatch,
  Counters,
  IfaceMatch,
  Match,
  ProtoMatch,
  Rule,
  TableName,
  Target,
} from "./dump.ts";
import type { RuleParts } from "./rule-args.ts";
import {
  assignBase,
  type BaseParts,
  materializeBase,
  materializeRule,
  type SegmentCache,
} from "./rule-fast.ts";
import { parseCounters } from "./values.ts";

/** What the rules of one table of a dump share: where they come from, the segments already read. */
export interface RuleOrigin {
  readonly file: string;
  readonly family: Family;
  readonly table: TableName;
  readonly cache: SegmentCache;
  /** The dump's text, which holds the lines of the rules checked in place. */
  readonly text: string;
}

/** Where a line's arguments start: after `[p:b] ` (its counters, when there) and `-A CHAIN `. */
function argsAt(text: string): { from: number; counters: Counters | undefined } {
  let at = 0;
  let counters: Counters | undefined;
  if (text.charCodeAt(0) === 91) {
    const close = text.indexOf("]");
    counters = parseCounters(text.slice(0, close + 1));
    at = close + 1;
    while (text.charCodeAt(at) === 32) at++;
  }
  const sp = text.indexOf(" ", at + 3);
  return { from: sp < 0 ? text.length : sp + 1, counters };
}

export class SavedRule implements Rule {
  readonly chain: string;
  index: number;
  readonly #origin: RuleOrigin;
  readonly #line: number;
  /** The line is the dump's `text[#start, #end)`; -1 for a rule read whole (parts and source kept). */
  readonly #start: number;
  readonly #end: number;
  #parts: RuleParts | undefined;
  /** The base options read alone (before the rest was asked for). */
  #base: BaseParts | undefined;
  #source: SourceRef | undefined;

  private constructor(
    origin: RuleOrigin,
    chain: string,
    line: number,
    start: number,
    end: number,
    parts: RuleParts | undefined,
    source: SourceRef | undefined,
  ) {
    this.chain = chain;
    this.index = 0;
    this.#origin = origin;
    this.#line = line;
    this.#start = start;
    this.#end = end;
    this.#parts = parts;
    this.#base = undefined;
    this.#source = source;
  }

  /**
   * A line `checkRuleAt` accepted: `text[start, end)` of the dump, `[packets:bytes] ` (valid
   * counters) or nothing, then `-A CHAIN args`. Built on first use.
   */
  static checked(
    origin: RuleOrigin,
    chain: string,
    line: number,
    start: number,
    end: number,
  ): SavedRule {
    return new SavedRule(origin, chain, line, start, end, undefined, undefined);
  }

  /** A line read whole: its parts, and the counters in front of it if any. */
  static read(
    origin: RuleOrigin,
    chain: string,
    line: number,
    text: string,
    parts: RuleParts,
    counters: Counters | undefined,
  ): SavedRule {
    if (counters) parts.counters = counters;
    const source = { file: origin.file, line, text };
    return new SavedRule(origin, chain, line, -1, -1, parts, source);
  }

  #read(): RuleParts {
    let parts = this.#parts;
    if (parts === undefined) {
      const o = this.#origin;
      const text = o.text.slice(this.#start, this.#end);
      const at = argsAt(text);
      parts = materializeRule(text, at.from, o.family, o.cache);
      if (at.counters) parts.counters = at.counters;
      // what was handed out before stays the same object
      if (this.#base !== undefined) {
        assignBase(parts, this.#base);
        this.#base = undefined;
      }
      this.#parts = parts;
    }
    return parts;
  }

  /** The base options, read alone while nothing else is asked for. */
  #readBase(): BaseParts {
    const parts = this.#parts;
    if (parts !== undefined) return parts;
    let b = this.#base;
    if (b === undefined) {
      const o = this.#origin;
      const text = o.text.slice(this.#start, this.#end);
      b = materializeBase(text, argsAt(text).from, o.family, o.cache);
      this.#base = b;
    }
    return b;
  }

  get table(): TableName {
    return this.#origin.table;
  }

  get source(): SourceRef {
    let s = this.#source;
    if (s === undefined) {
      const o = this.#origin;
      s = { file: o.file, line: this.#line, text: o.text.slice(this.#start, this.#end) };
      this.#source = s;
    }
    return s;
  }

  get counters(): Counters | undefined {
    return this.#read().counters;
  }
  get protocol(): ProtoMatch | undefined {
    return this.#readBase().protocol;
  }
  get src(): AddrMatch | undefined {
    return this.#readBase().src;
  }
  get dst(): AddrMatch | undefined {
    return this.#readBase().dst;
  }
  get inIface(): IfaceMatch | undefined {
    return this.#readBase().inIface;
  }
  get outIface(): IfaceMatch | undefined {
    return this.#readBase().outIface;
  }
  get fragment(): { readonly negated: boolean } | undefined {
    return this.#readBase().fragment;
  }
  get matches(): readonly Match[] {
    return this.#read().matches;
  }
  get target(): Target | undefined {
    return this.#read().target;
  }

  /** The rule as a plain object (JSON output, inspection, comparison in tests). */
  toJSON(): Rule {
    const p = this.#read();
    const out: { -readonly [K in keyof Rule]: Rule[K] } = {
      table: this.table,
      chain: this.chain,
      index: this.index,
      source: this.source,
      matches: p.matches,
    };
    if (p.counters) out.counters = p.counters;
    assignBase(out, p);
    if (p.target) out.target = p.target;
    return out;
  }

  [Symbol.for("nodejs.util.inspect.custom")](): Rule {
    return this.toJSON();
  }
}
