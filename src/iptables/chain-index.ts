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

export class ChainIndex {
  readonly #text: string;
  #slots = new Int32Array(SLOT * 1024);
  #mask = 1023;
  readonly #chains: SavedChain[] = [];

  constructor(text: string) {
    this.#text = text;
  }

  /** The slot holding the chain named `text[start, end)`, or -1. */
  #slotOf(start: number, end: number): number {
    const text = this.#text;
    const len = end - start;
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

  /** The chain named `text[start, end)`. */
  find(start: number, end: number): SavedChain | undefined {
    const s = this.#slotOf(start, end);
    return s < 0 ? undefined : this.#chains[this.#slots[s + ENTRY]! - 1];
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
    const size = 2 * (this.#mask + 1);
    this.#slots = new Int32Array(SLOT * size);
    this.#mask = size - 1;
    for (let s = 0; s < old.length; s += SLOT) {
      if (old[s + ENTRY] !== 0) this.#place(old[s]!, old[s + ENTRY]!, old[s + LEN]!, old[s + AT]!);
    }
  }
}

/** Are `text[a, a + len)` and `text[b, b + len)` the same characters? */
export function sameText(text: string, a: number, b: number, len: number): boolean {
  for (let k = 0; k < len; k++) if (text.charCodeAt(a + k) !== text.charCodeAt(b + k)) return false;
  return true;
}
