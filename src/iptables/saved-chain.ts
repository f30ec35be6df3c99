/**
 * @module iptables/saved-chain — the chains of a dump as read. While the dump is read, a checked
 * rule is three numbers in its table's {@link RuleStore} (line, and where the line is in the
 * text); a chain makes its {@link SavedRule}s when its rules are first asked for. A kube-proxy
 * node's nat table has half a million rules in a hundred thousand chains, and a question reaches
 * a few of them: the others never become objects, so reading them leaves the garbage collector
 * little to do and grows in step with the dump.
 */
import type { SourceRef } from "../model/types.ts";
import type { Chain, Counters, Rule } from "./dump.ts";
import { type RuleOrigin, SavedRule } from "./saved-rule.ts";

/** The rules of one table: checked lines as numbers, rules read whole as objects. */
export class RuleStore {
  readonly origin: RuleOrigin;
  /** Per rule: its line number, and `text[start, end)` of the dump (start < 0: read whole). */
  #line = new Int32Array(1024);
  #start = new Int32Array(1024);
  #end = new Int32Array(1024);
  #size = 0;
  readonly #whole: SavedRule[] = [];

  constructor(origin: RuleOrigin) {
    this.origin = origin;
  }

  /** A line checked in place; returns its id. */
  addChecked(line: number, start: number, end: number): number {
    const id = this.#size;
    if (id === this.#line.length) this.#grow();
    this.#line[id] = line;
    this.#start[id] = start;
    this.#end[id] = end;
    this.#size = id + 1;
    return id;
  }

  /** A rule read whole; returns its id. */
  addWhole(rule: SavedRule): number {
    const id = this.#size;
    if (id === this.#line.length) this.#grow();
    this.#start[id] = -1 - this.#whole.length;
    this.#whole.push(rule);
    this.#size = id + 1;
    return id;
  }

  /** The line `id` stands for, as a source reference (a checked line only). */
  source(id: number): SourceRef {
    const o = this.origin;
    return {
      file: o.file,
      line: this.#line[id]!,
      text: o.text.slice(this.#start[id]!, this.#end[id]!),
    };
  }

  /** The rule with this id, as the `index`th rule of `chain`. */
  rule(id: number, chain: string, index: number): SavedRule {
    const start = this.#start[id]!;
    const r =
      start < 0
        ? this.#whole[-1 - start]!
        : SavedRule.checked(this.origin, chain, this.#line[id]!, start, this.#end[id]!);
    r.index = index;
    return r;
  }

  #grow(): void {
    const n = this.#line.length * 2;
    const grown = (a: Int32Array) => {
      const b = new Int32Array(n);
      b.set(a);
      return b;
    };
    this.#line = grown(this.#line);
    this.#start = grown(this.#start);
    this.#end = grown(this.#end);
  }
}

/**
 * A chain of a parsed dump. Its rules are ids in its table's store until `rules` is first read;
 * then they are {@link SavedRule}s (themselves built on first use), and the array is the chain's
 * own from there on (rules added later, `-I` insertions and callers' changes go into it).
 */
export class SavedChain implements Chain {
  readonly name: string;
  readonly builtin: boolean;
  declare policy?: string;
  declare counters?: Counters;
  /** Where it was declared: as a reference, or as line `#declId` of `#declStore` until asked. */
  #declared: SourceRef | undefined;
  #declStore: RuleStore | undefined;
  #declId = 0;
  #store: RuleStore | undefined;
  /** The rule ids while they run on (the common case): ids first .. first + count - 1. */
  #first = 0;
  #count = 0;
  /** The ids once they do not. */
  #ids: number[] | undefined;
  #rules: Rule[] | undefined;

  constructor(name: string, builtin: boolean, declared?: SourceRef, counters?: Counters) {
    this.name = name;
    this.builtin = builtin;
    this.#declared = declared;
    if (counters !== undefined) this.counters = counters;
  }

  /** A chain declared on line `id` of `store` (a `:NAME - [0:0]` line), cited when asked. */
  static declaredAt(name: string, store: RuleStore, id: number, counters: Counters): SavedChain {
    const c = new SavedChain(name, false, undefined, counters);
    c.#declStore = store;
    c.#declId = id;
    return c;
  }

  get declared(): SourceRef | undefined {
    if (this.#declared === undefined && this.#declStore !== undefined) {
      this.#declared = this.#declStore.source(this.#declId);
      this.#declStore = undefined;
    }
    return this.#declared;
  }

  set declared(ref: SourceRef | undefined) {
    this.#declared = ref;
    this.#declStore = undefined;
  }

  /** How many rules the chain has, without building them. */
  get size(): number {
    return this.#rules ? this.#rules.length : this.#count;
  }

  /** Appends the rule `id` of `store` (the chain's table's). */
  add(store: RuleStore, id: number): void {
    if (this.#rules !== undefined) {
      this.#rules.push(store.rule(id, this.name, this.#rules.length + 1));
      return;
    }
    this.#store = store;
    if (this.#ids !== undefined) this.#ids.push(id);
    else if (this.#count === 0) this.#first = id;
    else if (id !== this.#first + this.#count) {
      this.#ids = [];
      for (let k = 0; k < this.#count; k++) this.#ids.push(this.#first + k);
      this.#ids.push(id);
    }
    this.#count++;
  }

  get rules(): Rule[] {
    let rules = this.#rules;
    if (rules === undefined) {
      rules = new Array<Rule>(this.#count);
      const store = this.#store;
      for (let k = 0; k < this.#count; k++) {
        const id = this.#ids === undefined ? this.#first + k : this.#ids[k]!;
        rules[k] = store!.rule(id, this.name, k + 1);
      }
      this.#rules = rules;
      this.#ids = undefined;
      this.#store = undefined;
    }
    return rules;
  }

  /** The chain as a plain object (JSON output, inspection). */
  toJSON(): Chain {
    const out: { -readonly [K in keyof Chain]: Chain[K] } = {
      name: this.name,
      builtin: this.builtin,
      rules: this.rules,
    };
    if (this.policy !== undefined) out.policy = this.policy;
    if (this.counters !== undefined) out.counters = this.counters;
    const declared = this.declared;
    if (declared !== undefined) out.declared = declared;
    return out;
  }

  [Symbol.for("nodejs.util.inspect.custom")](): Chain {
    return this.toJSON();
  }
}

/** How many rules a chain has; a parsed dump's chains tell without building their rules. */
export function ruleCount(chain: Chain): number {
  return chain instanceof SavedChain ? chain.size : chain.rules.length;
}
