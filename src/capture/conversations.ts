/**
 * @module capture/conversations — packets grouped into conversations, each with the facts the
 * diagnosis keys on: who spoke first, the source address on the wire, whether replies came, how
 * far TCP got (SYN only … data both ways, FIN/RST), retransmissions, and ICMP errors that quote it.
 *
 * Tunnelled packets count for their innermost frame (the endpoints' own conversation); the
 * tunnel is noted. A packet seen again on another interface (capture/packet-copies.ts) counts
 * once; when the node rewrote it in between, the conversations on both sides of the NAT are linked
 * (`translation`, capture/translation-links.ts), so a reply arriving for the node address answers
 * the pod's request. Evidence is a SourceRef whose `line` is the packet number for pcap/pcapng and
 * the text line for tcpdump text (the `text` says which). The summary types and verdicts are in
 * capture/conversation.ts (re-exported here).
 */
import { type Cidr, contains, type Family, type Ip } from "../net/cidr.ts";
import {
  type AddressPort,
  type Conversation,
  type ConversationOptions,
  type ConversationProtocol,
  type ConversationSummary,
  type CopiesSeen,
  describeIcmpError,
  type IcmpErrorSeen,
  type TcpProgress,
  type TcpSummary,
  type Translation,
  verdictOf,
} from "./conversation.ts";
import { type FlowTag, flowKey, flowTagOf, refOf, type Seen, seenOf } from "./flow-key.ts";
import { type Frame, innermost, type Packet, TCP } from "./packet.ts";
import { type CopyBasis, type CopyMatch, CopyPairer } from "./packet-copies.ts";
import { TranslationLinks } from "./translation-links.ts";

export {
  type AddressPort,
  type Conversation,
  type ConversationOptions,
  type ConversationProtocol,
  type ConversationSummary,
  type CopiesSeen,
  type CopyRefs,
  formatTime,
  type IcmpErrorSeen,
  type PacketRef,
  TCP_PROGRESS,
  type TcpProgress,
  type TcpSummary,
  type TranslatedPeer,
  type Translation,
} from "./conversation.ts";

interface Mutable {
  protocol: ConversationProtocol;
  family: Family;
  a: AddressPort;
  b: AddressPort;
  /** True when `a` is the initiator. */
  aInitiates: boolean;
  basis: Conversation["initiatorBasis"];
  /** Counts per interface (a forwarded packet is seen once per interface it crosses). */
  ifaces: IfaceCounts[];
  firstOutA?: Seen;
  firstOutB?: Seen;
  dataA: boolean;
  dataB: boolean;
  ackAfterSynAck: boolean;
  finA: boolean;
  finB: boolean;
  rstA: boolean;
  rstB: boolean;
  errors: PendingError["error"][];
  first: Seen;
  last: Seen;
  firstFromA?: Seen;
  firstFromB?: Seen;
  seenA: string[];
  seenB: string[];
  tunnel?: { kind: string; vni: number };
  copies?: { first: Seen; again: Seen; count: number; basis: CopyBasis; ipId?: number };
}

const WELL_KNOWN = 1024;

interface PendingError {
  readonly key: string;
  readonly error: Omit<IcmpErrorSeen, "at"> & { readonly at: Seen };
}

/**
 * Groups packets into conversations incrementally; `add` each packet, then `finish`.
 * Memory grows with the number of conversations, not packets.
 */
export class ConversationTracker {
  private readonly flows = new Map<string, Mutable>();
  private readonly pendingErrors: PendingError[] = [];
  private readonly copies = new CopyPairer<FlowTag>();
  /** Conversations on both sides of a NAT (kept per two conversations, not per packet). */
  private readonly links = new TranslationLinks();
  /** Conversations not involving `host` kept because they are another side of one that does. */
  private readonly admitted = new Set<string>();
  private count = 0;
  private sawDirection = false;
  private sawDateless = false;
  private sawTunnel = false;
  private readonly opts: ConversationOptions;

  constructor(opts: ConversationOptions) {
    this.opts = opts;
  }

  add(p: Packet): void {
    this.count++;
    if (p.direction !== undefined) this.sawDirection = true;
    if (p.timeOfDayOnly) this.sawDateless = true;
    const f: Frame = innermost(p);
    if (f !== p) this.sawTunnel = true;
    const ip = f.ip;
    if (ip === undefined) return;
    const t = f.transport;
    const src: Ip = { family: ip.family, value: ip.src };
    const dst: Ip = { family: ip.family, value: ip.dst };
    // ICMP errors belong to the conversation they quote.
    if (t?.kind === "icmp" && t.quoted !== undefined) {
      const q = t.quoted;
      const qp = q.ip.protocol === 6 ? "tcp" : q.ip.protocol === 17 ? "udp" : undefined;
      if (qp !== undefined && q.srcPort !== undefined && q.dstPort !== undefined) {
        const qs: AddressPort = { ip: { family: q.ip.family, value: q.ip.src }, port: q.srcPort };
        const qd: AddressPort = { ip: { family: q.ip.family, value: q.ip.dst }, port: q.dstPort };
        if (
          this.opts.host !== undefined &&
          !this.involves(qs, qd) &&
          !this.involves({ ip: src }, { ip: dst })
        )
          return;
        const { key } = flowKey(qp, q.ip.family, qs, qd);
        this.pendingErrors.push({
          key,
          error: {
            from: src,
            type: t.type,
            ...(t.code === undefined ? {} : { code: t.code }),
            what: describeIcmpError(t.version, t.type, t.code),
            at: seenOf(p),
          },
        });
        return;
      }
    }
    const host = this.opts.host;
    // With a host filter, most packets are no one's: their key is made only when a conversation
    // of the host's may continue on the other side of the node (a Service VIP's endpoint side).
    let tracked = host === undefined || same(host, src) || same(host, dst);
    let tag: FlowTag | undefined;
    if (tracked || this.admitted.size > 0) {
      tag = flowTagOf(f, src, dst);
      if (!tracked && this.admitted.has(tag.key)) tracked = true;
    }
    // Only counted packets are remembered as first copies; any packet may be a later copy of one.
    const m = this.copies.add(p, tag!, tracked);
    if (m !== undefined) {
      const e = m.first.tag;
      tag ??= flowTagOf(f, src, dst);
      // A copy of the host's packet on the other side of the node brings its conversation in:
      // with DNAT the request to a Service VIP leaves toward an endpoint, and replies come from it.
      if (!tracked) this.admitted.add(tag.key);
      if (e.key === tag.key) this.recordCopy(p, tag, m);
      else {
        this.record(p, tag);
        this.links.add(m, tag, seenOf(m.first.packet), seenOf(p));
      }
      return;
    }
    if (tracked) this.record(p, tag!);
  }

  /** Counts a packet for its conversation. */
  private record(p: Packet, tag: FlowTag): void {
    const f = innermost(p);
    const t = f.transport;
    const { key, xFirst, s, d } = tag;
    const sp = s.port;
    const dp = d.port;
    let c = this.flows.get(key);
    const ref = seenOf(p);
    if (c === undefined) {
      const a = xFirst ? s : d;
      const b = xFirst ? d : s;
      c = {
        protocol: tag.protocol,
        family: s.ip.family,
        a,
        b,
        aInitiates: xFirst,
        basis: "first-packet",
        ifaces: [],
        dataA: false,
        dataB: false,
        ackAfterSynAck: false,
        finA: false,
        finB: false,
        rstA: false,
        rstB: false,
        errors: [],
        first: ref,
        last: ref,
        seenA: [],
        seenB: [],
      };
      if (f !== p && p.tunnel !== undefined) {
        c.tunnel = { kind: p.tunnel.kind, vni: p.tunnel.vni };
      }
      // Without a SYN or echo to go by, a well-known source port answering an ephemeral one is
      // the responder.
      if (sp !== undefined && dp !== undefined && sp < WELL_KNOWN && dp >= WELL_KNOWN)
        c.aInitiates = !xFirst;
      if (t?.kind === "icmp" && (t.type === 0 || t.type === 129)) {
        c.aInitiates = !xFirst;
        c.basis = "echo";
      }
      this.flows.set(key, c);
    }
    if (p.index >= c.last.index) c.last = ref;
    const fromA = xFirst;
    const ifKey = p.iface ?? "";
    const counts = countsFor(c, ifKey);
    if (fromA) {
      counts.fromA++;
      c.firstFromA ??= ref;
    } else {
      counts.fromB++;
      c.firstFromB ??= ref;
    }
    this.noteSeen(c, p, ref, fromA);
    if (t?.kind === "icmp" && (t.type === 8 || t.type === 128) && c.basis !== "echo") {
      c.aInitiates = fromA;
      c.basis = "echo";
    }
    if (t?.kind === "tcp") this.tcp(c, counts, fromA, t.flags, t.seq, t.payloadLength);
  }

  /** Where a packet was seen (interface, direction), and the first one leaving per side. */
  private noteSeen(c: Mutable, p: Packet, ref: Seen, fromA: boolean): void {
    if (p.direction === "out") {
      if (fromA) c.firstOutA ??= ref;
      else c.firstOutB ??= ref;
    }
    if (p.iface !== undefined || p.direction !== undefined) {
      const label = [p.iface, p.direction].filter(Boolean).join(" ");
      const list = fromA ? c.seenA : c.seenB;
      if (!list.includes(label)) list.push(label);
    }
  }

  /** A later copy of a packet already counted in the same conversation: seen, not counted. */
  private recordCopy(p: Packet, tag: FlowTag, m: CopyMatch<FlowTag>): void {
    const c = this.flows.get(tag.key)!;
    const ref = seenOf(p);
    if (p.index >= c.last.index) c.last = ref;
    this.noteSeen(c, p, ref, tag.xFirst);
    if (c.copies === undefined)
      c.copies = {
        first: seenOf(m.first.packet),
        again: ref,
        count: 1,
        basis: m.basis,
        ...(m.ipId === undefined ? {} : { ipId: m.ipId }),
      };
    else {
      c.copies.count++;
      if (m.basis === "direction") c.copies.basis = "direction";
    }
  }

  private involves(s: AddressPort, d: AddressPort): boolean {
    const h = this.opts.host!;
    return (
      (s.ip.family === h.family && s.ip.value === h.value) ||
      (d.ip.family === h.family && d.ip.value === h.value)
    );
  }

  private tcp(
    c: Mutable,
    n: IfaceCounts,
    fromA: boolean,
    flags: number | undefined,
    seq: number | undefined,
    len: number | undefined,
  ): void {
    if (flags === undefined) return;
    const syn = (flags & TCP.SYN) !== 0;
    const ack = (flags & TCP.ACK) !== 0;
    if (syn && !ack) {
      n.syn++;
      if (c.basis !== "syn") {
        c.aInitiates = fromA;
        c.basis = "syn";
      }
    } else if (syn && ack) {
      n.synAck++;
      if (c.basis === "first-packet") {
        c.aInitiates = !fromA;
        c.basis = "syn-ack";
      }
    } else if (ack && c.ifaces.some((x) => x.synAck > 0) && fromA === c.aInitiates)
      c.ackAfterSynAck = true;
    const data = (len ?? 0) > 0;
    if (data) {
      if (fromA) c.dataA = true;
      else c.dataB = true;
    }
    if (flags & TCP.FIN) {
      if (fromA) c.finA = true;
      else c.finB = true;
    }
    if (flags & TCP.RST) {
      if (fromA) c.rstA = true;
      else c.rstB = true;
    }
    // A retransmission repeats sequence space already sent on the same interface (the same
    // packet seen on a pod's veth and on eth0 is one packet, not two).
    if (seq !== undefined && (data || syn || flags & TCP.FIN) && !(flags & TCP.RST)) {
      const end = (seq + (len ?? 0) + (syn ? 1 : 0) + (flags & TCP.FIN ? 1 : 0)) >>> 0;
      const prev = fromA ? n.highA : n.highB;
      if (prev !== undefined && seqLeq(end, prev)) n.retrans++;
      else if (fromA) n.highA = end;
      else n.highB = end;
    }
  }

  finish(): ConversationSummary {
    for (const e of this.pendingErrors) {
      const c = this.flows.get(e.key);
      if (c !== undefined) c.errors.push(e.error);
    }
    const translations = this.links.resolve((key) => {
      const c = this.flows.get(key);
      return c === undefined ? undefined : { aInitiates: c.aInitiates, peer: () => this.peerOf(c) };
    }, this.opts.file);
    const conversations = [...this.flows.entries()].map(([k, c]) =>
      this.summarize(c, translations.get(k)),
    );
    conversations.sort((x, y) => x.first.index - y.first.index);
    const assumptions: string[] = [];
    if (!this.sawDirection)
      assumptions.push(
        "the capture does not record packet directions; who spoke first is taken from the SYN, the echo request or the first packet seen",
      );
    if (this.sawDateless)
      assumptions.push("the text has times without a date: times are compared within one day");
    if (this.sawTunnel)
      assumptions.push("tunnelled packets (VXLAN, Geneve) are counted for their inner addresses");
    const byIdOnly =
      this.links.anyWithoutDirection ||
      [...this.flows.values()].some((c) => c.copies?.basis === "id");
    if (byIdOnly)
      assumptions.push(
        "copies of one packet on several interfaces were paired by what NAT leaves alone (IP identification where printed, sequence numbers, lengths) and time: the capture does not say on which interface, or in which direction, each was seen",
      );
    return { conversations, packets: this.count, assumptions };
  }

  private peerOf(c: Mutable): Translation["peer"] {
    const firstReply = c.aInitiates ? c.firstFromB : c.firstFromA;
    const back = maxOf(c, (x) => (c.aInitiates ? x.fromB : x.fromA));
    return {
      initiator: c.aInitiates ? c.a : c.b,
      responder: c.aInitiates ? c.b : c.a,
      replied: back > 0,
      packetsFromResponder: back,
      ...(firstReply === undefined ? {} : { firstReply: refOf(firstReply, this.opts.file) }),
    };
  }

  private summarize(c: Mutable, translation: Translation | undefined): Conversation {
    const ini = c.aInitiates ? c.a : c.b;
    const res = c.aInitiates ? c.b : c.a;
    const fromIni = maxOf(c, (x) => (c.aInitiates ? x.fromA : x.fromB));
    const fromRes = maxOf(c, (x) => (c.aInitiates ? x.fromB : x.fromA));
    const firstLeaving = c.aInitiates ? c.firstOutA : c.firstOutB;
    const firstReply = c.aInitiates ? c.firstFromB : c.firstFromA;
    const replied = fromRes > 0;
    const side = (isA: boolean): "initiator" | "responder" =>
      isA === c.aInitiates ? "initiator" : "responder";
    let tcp: TcpSummary | undefined;
    if (c.protocol === "tcp") {
      const dataIni = c.aInitiates ? c.dataA : c.dataB;
      const dataRes = c.aInitiates ? c.dataB : c.dataA;
      const synCount = maxOf(c, (x) => x.syn);
      const synAckCount = maxOf(c, (x) => x.synAck);
      const progress: TcpProgress =
        dataIni && dataRes
          ? "data-both-ways"
          : (dataIni || dataRes) && (synAckCount > 0 || synCount === 0)
            ? "data-one-way"
            : c.ackAfterSynAck
              ? "established"
              : synAckCount > 0
                ? "syn-ack"
                : synCount > 0
                  ? "syn-only"
                  : "mid-stream";
      const finFrom = [c.finA && side(true), c.finB && side(false)].filter(
        (x): x is "initiator" | "responder" => x !== false,
      );
      const rstFrom = [c.rstA && side(true), c.rstB && side(false)].filter(
        (x): x is "initiator" | "responder" => x !== false,
      );
      tcp = {
        progress,
        synCount,
        synAckCount,
        retransmissions: maxOf(c, (x) => x.retrans),
        finFrom,
        rstFrom,
      };
    }
    const seen = [...(c.aInitiates ? c.seenA : c.seenB)];
    const file = this.opts.file;
    const base = {
      protocol: c.protocol,
      family: c.family,
      initiator: ini,
      responder: res,
      initiatorBasis: c.basis,
      packetsFromInitiator: fromIni,
      packetsFromResponder: fromRes,
      replied,
      icmpErrors: c.errors.map((e) => ({ ...e, at: refOf(e.at, file) })),
      first: refOf(c.first, file),
      last: refOf(c.last, file),
      seenOn: seen,
      ...(tcp === undefined ? {} : { tcp }),
      ...(firstReply === undefined ? {} : { firstReply: refOf(firstReply, file) }),
      ...(firstLeaving === undefined ? {} : { firstLeaving: refOf(firstLeaving, file) }),
      ...(c.tunnel === undefined ? {} : { tunnel: c.tunnel }),
      ...(c.copies === undefined ? {} : { copies: this.copiesOf(c.copies) }),
      ...(translation === undefined ? {} : { translation }),
    };
    return { ...base, verdict: verdictOf(base) };
  }

  private copiesOf(x: NonNullable<Mutable["copies"]>): CopiesSeen {
    const file = this.opts.file;
    return {
      pair: { first: refOf(x.first, file), again: refOf(x.again, file) },
      count: x.count,
      basis: x.basis,
      ...(x.ipId === undefined ? {} : { ipId: x.ipId }),
    };
  }
}

/** Per interface: a forwarded packet is seen once on every interface it crosses. */
interface IfaceCounts {
  readonly name: string;
  fromA: number;
  fromB: number;
  syn: number;
  synAck: number;
  retrans: number;
  /** Highest sequence end seen per side (a retransmission does not go beyond it). */
  highA: number | undefined;
  highB: number | undefined;
}

function countsFor(c: Mutable, name: string): IfaceCounts {
  for (const x of c.ifaces) if (x.name === name) return x;
  const x: IfaceCounts = {
    name,
    fromA: 0,
    fromB: 0,
    syn: 0,
    synAck: 0,
    retrans: 0,
    highA: undefined,
    highB: undefined,
  };
  c.ifaces.push(x);
  return x;
}

/** The count on the interface that saw most: one packet crossing two interfaces counts once. */
function maxOf(c: Mutable, pick: (x: IfaceCounts) => number): number {
  let best = 0;
  for (const x of c.ifaces) best = Math.max(best, pick(x));
  return best;
}

function same(a: Ip, b: Ip): boolean {
  return a.family === b.family && a.value === b.value;
}

function seqLeq(a: number, b: number): boolean {
  return ((b - a) | 0) >= 0;
}

/**
 * Reads packets (any iterable, e.g. `readCapture(...)`) into conversation summaries.
 *
 * @example
 * const { conversations } = await conversations(readCapture("node.pcap"), { file: "node.pcap" });
 */
export async function conversations(
  packets: AsyncIterable<Packet> | Iterable<Packet>,
  opts: ConversationOptions,
): Promise<ConversationSummary> {
  const t = new ConversationTracker(opts);
  for await (const p of packets) t.add(p);
  return t.finish();
}

/** Whether an address is in any of the blocks. */
export function inAny(ip: Ip, blocks: readonly Cidr[]): boolean {
  return blocks.some((b) => contains(b, ip));
}
