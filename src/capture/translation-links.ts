/**
 * @module capture/translation-links — the conversations on both sides of a node's NAT. Each pair
 * of copies whose addresses differ (capture/packet-copies.ts) links the first copy's conversation
 * to the later copy's; the links are kept per two conversations (memory per conversation, not per
 * packet) and resolved, once it is known who initiated each conversation, into each one's
 * `Translation`: which side it is, what the node rewrote, and both packets of the first request
 * and reply pairs.
 */
import type { CopyRefs, Translation } from "./conversation.ts";
import { type FlowTag, refOf, type Seen } from "./flow-key.ts";
import type { CopyBasis, CopyEnd, CopyMatch } from "./packet-copies.ts";

/** The first pair linking two conversations one way, and how many pairs followed it. */
interface CopyLink {
  readonly earlier: FlowTag;
  readonly later: FlowTag;
  readonly first: Seen;
  readonly again: Seen;
  readonly echoId?: { readonly from: number; readonly to: number };
  basis: CopyBasis;
  readonly ipId?: number;
  count: number;
}

/** What resolving needs to know of a conversation once it is complete. */
export interface LinkedFlow {
  /** Its `a` side (the lower key) initiated it. */
  readonly aInitiates: boolean;
  /** The conversation as the other side of the NAT shows it (its ends, replies). */
  peer(): Translation["peer"];
}

function sameEnd(a: CopyEnd, b: CopyEnd): boolean {
  return a.ip.family === b.ip.family && a.ip.value === b.ip.value && a.port === b.port;
}

export class TranslationLinks {
  /**
   * By the first copy's conversation, then the later copy's, then the way the first copy went
   * (its source is the conversation's `a` side or not).
   */
  private readonly links = new Map<string, Map<string, (CopyLink | undefined)[]>>();

  /** Records a later copy `again` (conversation `later`) of the first copy `m.first`. */
  add(m: CopyMatch<FlowTag>, later: FlowTag, first: Seen, again: Seen): void {
    const earlier = m.first.tag;
    let byLater = this.links.get(earlier.key);
    if (byLater === undefined) {
      byLater = new Map();
      this.links.set(earlier.key, byLater);
    }
    let ways = byLater.get(later.key);
    if (ways === undefined) {
      ways = [undefined, undefined];
      byLater.set(later.key, ways);
    }
    const way = earlier.xFirst ? 0 : 1;
    const known = ways[way];
    if (known !== undefined) {
      known.count++;
      if (m.basis === "direction") known.basis = "direction";
      return;
    }
    ways[way] = {
      earlier,
      later,
      first,
      again,
      ...(m.echoId === undefined ? {} : { echoId: m.echoId }),
      basis: m.basis,
      ...(m.ipId === undefined ? {} : { ipId: m.ipId }),
      count: 1,
    };
  }

  /** Some link rests on the IP id or sequence alone (no interface or direction known). */
  get anyWithoutDirection(): boolean {
    return this.all().some((l) => l.basis === "id");
  }

  /** In the order the pairs were first seen, so "the first request" is the first in the capture. */
  private all(): CopyLink[] {
    const out: CopyLink[] = [];
    for (const byLater of this.links.values())
      for (const ways of byLater.values()) for (const l of ways) if (l !== undefined) out.push(l);
    return out.sort((x, y) => x.again.index - y.again.index);
  }

  /**
   * Each linked conversation's translation, by conversation key: the pair of conversations most
   * copies link, oriented by who initiated them.
   */
  resolve(flow: (key: string) => LinkedFlow | undefined, file: string): Map<string, Translation> {
    interface Pair {
      readonly before: string;
      readonly after: string;
      readonly srcBefore: CopyEnd;
      readonly srcAfter: CopyEnd;
      readonly dstBefore: CopyEnd;
      readonly dstAfter: CopyEnd;
      echoId?: { readonly from: number; readonly to: number };
      request?: CopyRefs;
      reply?: CopyRefs;
      pairs: number;
      basis: CopyBasis;
      ipId?: number | undefined;
    }
    const pairs = new Map<string, Pair>();
    for (const l of this.all()) {
      const ce = flow(l.earlier.key);
      if (ce === undefined || flow(l.later.key) === undefined) continue;
      // The first copy of a request is the one handed to the node; the first copy of a reply is
      // the one that came back to the node's side of the NAT (the after side).
      const request = l.earlier.xFirst === ce.aInitiates;
      const before = request ? l.earlier.key : l.later.key;
      const after = request ? l.later.key : l.earlier.key;
      const k = `${before}\n${after}`;
      let x = pairs.get(k);
      if (x === undefined) {
        // in the request's orientation: a reply's destination is the request's source
        const e = l.earlier;
        const a = l.later;
        const ends = request
          ? { srcBefore: e.s, dstBefore: e.d, srcAfter: a.s, dstAfter: a.d }
          : { srcBefore: a.d, dstBefore: a.s, srcAfter: e.d, dstAfter: e.s };
        x = { before, after, ...ends, pairs: 0, basis: l.basis };
        pairs.set(k, x);
      }
      x.pairs += l.count;
      if (l.basis === "direction") x.basis = "direction";
      if (l.echoId !== undefined)
        x.echoId ??= request ? l.echoId : { from: l.echoId.to, to: l.echoId.from };
      const refs: CopyRefs = { first: refOf(l.first, file), again: refOf(l.again, file) };
      // the IP identification of the pair cited: the first request, else the first reply
      if (request && x.request === undefined) {
        x.request = refs;
        x.ipId = l.ipId;
      } else if (!request && x.reply === undefined) {
        x.reply = refs;
        if (x.request === undefined) x.ipId = l.ipId;
      }
    }
    const best = new Map<string, Pair>();
    for (const x of pairs.values())
      for (const k of [x.before, x.after]) {
        const prev = best.get(k);
        if (prev === undefined || x.pairs > prev.pairs) best.set(k, x);
      }
    const out = new Map<string, Translation>();
    for (const [k, x] of best) {
      const side = k === x.before ? "before" : "after";
      const peer = flow(side === "before" ? x.after : x.before)!;
      out.set(k, {
        side,
        peer: peer.peer(),
        ...(sameEnd(x.srcBefore, x.srcAfter)
          ? {}
          : { source: { from: x.srcBefore, to: x.srcAfter } }),
        ...(sameEnd(x.dstBefore, x.dstAfter)
          ? {}
          : { destination: { from: x.dstBefore, to: x.dstAfter } }),
        ...(x.echoId === undefined ? {} : { echoId: x.echoId }),
        ...(x.request === undefined ? {} : { request: x.request }),
        ...(x.reply === undefined ? {} : { reply: x.reply }),
        pairs: x.pairs,
        basis: x.basis,
        ...(x.ipId === undefined ? {} : { ipId: x.ipId }),
      });
    }
    return out;
  }
}
