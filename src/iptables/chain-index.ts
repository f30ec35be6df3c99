/**
 * @module iptables/chain-index — the chains of one table by name, looked up while the dump is
 * read by a stretch of its text (`text[start, end)`), without copying the name out.
 *
 * Hand-written rather than a `Map<string, Chain>` lookup: a kube-proxy table has 100,000 and more
 * chains, and every rule that jumps is checked against them. A Map lookup with a fresh string
 * reaches four or five places in memory (bucket, entry, key, the key's characters), which at this
 * size are never in the processor's cache; here a lookup reads one slot of a flat table (which
 * holds the name's hash, length and place in the text) and the declared name's characters. The
 * table's own `chains` Map is still filled, for everyone else.
 */
import type { SavedChain } from "./saved-chain.ts";

/** FNV-1a over `s[start, end)`'s character codes, 32 bits. */
function hashOf(s: string, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

/** Slot layout: hash, 1 + entry (0: empty), name length, name's place in the text (-1: none). */
const HASH = 0;
const ENTRY = 1;
const LEN = 2;
const AT = 3;
const SLOT = 4;

/** Names up to this length have a place in the cache of the last name found at each length. */
const RECENT = 64;

/** How many chains after the last one found {@link ChainIndex.find} tries before hashing. */
const AHEAD = 4;

export class ChainIndex {
  readonly #text: string;
  #slots: Int32Array;
  #mask: number;
  readonly #chains: SavedChain[] = [];
  /** Per chain, in the order added: where its name stands in the text (-1: none), its length. */
  #atOf: Int32Array;
  #lenOf: Int32Array;
  /** The chain after the one {@link find} found last. */
  #next = 0;
  /**
   * By name length: where in the text the last name of that length was found, and its slot.
   * kube-proxy's rules jump to a few chains (KUBE-MARK-MASQ, KUBE-POSTROUTING) over and over,
   * between jumps to chains of another length (a service's endpoints): those are told by their
   * characters here, which the processor has just read, rather than by a slot of a big table.
   */
  readonly #recentAt = new Int32Array(RECENT).fill(-1);
  readonly #recentSlot = new Int32Array(RECENT);

  /** `expected`: how many chains the table will have, when known (the table is made that big). */
  constructor(text: string, expected = 0) {
    this.#text = text;
    let size = 1024;
    while (size < 2 * (expected + 8)) size *= 2;
    this.#slots = new Int32Array(SLOT * size);
    this.#mask = size - 1;
    const n = Math.max(64, expected + 8);
    this.#atOf = new Int32Array(n);
    this.#lenOf = new Int32Array(n);
  }

  /** The slot holding the chain named `text[start, end)`, or -1. */
  #slotOf(start: number, end: number): number {
    const text = this.#text;
    const len = end - start;
    if (len < RECENT) {
      const at = this.#recentAt[len]!;
      if (at >= 0 && sameText(text, at, start, len)) return this.#recentSlot[len]!;
      const s = this.#lookUp(text, start, end, len);
      if (s >= 0) {
        this.#recentAt[len] = start;
        this.#recentSlot[len] = s;
      }
      return s;
    }
    return this.#lookUp(text, start, end, len);
  }

  #lookUp(text: string, start: number, end: number, len: number): number {
    const h = hashOf(text, start, end);
    const slots = this.#slots;
    for (let i = h & this.#mask; ; i = (i + 1) & this.#mask) {
      const s = i * SLOT;
      const e = slots[s + ENTRY]!;
      if (e === 0) return -1;
      if (slots[s + HASH] !== h || slots[s + LEN] !== len) continue;
      const at = slots[s + AT]!;
      if (
        at >= 0 ? sameText(text, at, start, len) : text.startsWith(this.#chains[e - 1]!.name, start)
      )
        return s;
    }
  }

  /** Is a chain named `text[start, end)`? */
  has(start: number, end: number): boolean {
    return this.#slotOf(start, end) >= 0;
  }

  /**
   * The chain named `text[start, end)`. iptables-save prints the rules of a table's chains in the
   * order it declared them, so the chains just after the one found last are tried first: their
   * names are read in the order they stand in the text, where the processor expects them.
   */
  find(start: number, end: number): SavedChain | undefined {
    const text = this.#text;
    const len = end - start;
    const n = this.#chains.length;
    const stopAt = Math.min(n, this.#next + AHEAD);
    for (let e = this.#next; e < stopAt; e++) {
      const at = this.#atOf[e]!;
      if (at >= 0 && this.#lenOf[e] === len && sameText(text, at, start, len)) {
        this.#next = e + 1;
        return this.#chains[e];
      }
    }
    const s = this.#slotOf(start, end);
    if (s < 0) return undefined;
    const e = this.#slots[s + ENTRY]! - 1;
    this.#next = e + 1;
    return this.#chains[e];
  }

  /** The chain named `name`. */
  get(name: string): SavedChain | undefined {
    const h = hashOf(name, 0, name.length);
    const slots = this.#slots;
    for (let i = h & this.#mask; ; i = (i + 1) & this.#mask) {
      const s = i * SLOT;
      const e = slots[s + ENTRY]!;
      if (e === 0) return undefined;
      if (slots[s + HASH] === h && this.#chains[e - 1]!.name === name) return this.#chains[e - 1];
    }
  }

  /** Adds a chain not in the index; `at` is where its name stands in the text, or -1. */
  add(chain: SavedChain, at: number): void {
    if (2 * (this.#chains.length + 1) > this.#mask + 1) this.#grow();
    const e = this.#chains.length;
    if (e === this.#atOf.length) {
      this.#atOf = grown(this.#atOf);
      this.#lenOf = grown(this.#lenOf);
    }
    this.#atOf[e] = at;
    this.#lenOf[e] = chain.name.length;
    this.#chains.push(chain);
    const name = chain.name;
    this.#place(hashOf(name, 0, name.length), this.#chains.length, name.length, at);
  }

  #place(h: number, entry: number, len: number, at: number): void {
    const slots = this.#slots;
    let i = h & this.#mask;
    while (slots[i * SLOT + ENTRY] !== 0) i = (i + 1) & this.#mask;
    const s = i * SLOT;
    slots[s + HASH] = h;
    slots[s + ENTRY] = entry;
    slots[s + LEN] = len;
    slots[s + AT] = at;
  }

  #grow(): void {
    const old = this.#slots;
    // by four while small: a kube-proxy table grows from nothing to 100,000 and more chains
    const size = (this.#mask + 1) * (this.#mask < 1 << 16 ? 4 : 2);
    this.#recentAt.fill(-1);
    this.#slots = new Int32Array(SLOT * size);
    this.#mask = size - 1;
    for (let s = 0; s < old.length; s += SLOT) {
      if (old[s + ENTRY] !== 0) this.#place(old[s]!, old[s + ENTRY]!, old[s + LEN]!, old[s + AT]!);
    }
  }
}

/** `a` copied into an array twice as long. */
function grown(a: Int32Array): Int32Array {
  const b = new Int32Array(a.length * 2);
  b.set(a);
  return b;
}

/**
 * Are `text[a, a + len)` and `text[b, b + len)` the same characters? Compared from the end:
 * chain names share their beginnings (`KUBE-SEP-`, `KUBE-SVC-`) and differ in their last
 * characters (a hash), so two different names are told apart at the first character compared.
 */
export function sameText(text: string, a: number, b: number, len: number): boolean {
  for (let k = len - 1; k >= 0; k--)
    if (text.charCodeAt(a + k) !== text.charCodeAt(b + k)) return false;
  return true;
}
