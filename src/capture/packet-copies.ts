/**
 * @module capture/packet-copies — one packet seen several times in one capture. `tcpdump -i any`
 * records a forwarded packet on every interface it crosses (arriving on the pod's veth, leaving on
 * eth0), each time as it is then — after whatever translation the node applied in between. The
 * copies are paired by what forwarding and NAT leave alone (the IPv4 identification, the TCP
 * sequence and acknowledgement numbers, the ICMP echo sequence, the lengths), close in time and in
 * a consistent direction; the address that differs between them is the node's translation.
 */
import { formatIp, type Ip } from "../net/cidr.ts";
import { type Direction, type Frame, innermost, type Packet } from "./packet.ts";

/**
 * Copies of one packet are this close in time at most (100 ms). Forwarding takes microseconds;
 * a TCP retransmission of the same segment comes 200 ms (the kernel's minimum RTO) or more later
 * and, on Linux, with a new IPv4 identification.
 */
export const COPY_WINDOW_NS = 100_000_000n;

/** An address with its port (TCP/UDP). */
export interface CopyEnd {
  readonly ip: Ip;
  readonly port?: number;
}

/** What changed between two copies of one packet, in one of its address fields. */
export interface Rewrite {
  readonly from: CopyEnd;
  readonly to: CopyEnd;
}

/** What a pairing rests on, weakest last. */
export type CopyBasis =
  /** Interfaces or directions show the packet crossing the node (in on one, out on another). */
  | "direction"
  /** The capture does not say where a packet was seen: IP identification, sequence and time only. */
  | "id";

/** What a later copy of a packet shows changed since its first copy, and what the pairing rests on. */
export interface CopyChange {
  /** Source address (and port) rewritten between the first copy and this one (SNAT, MASQUERADE). */
  readonly source?: Rewrite;
  /** Destination rewritten (DNAT: a Service VIP to an endpoint, a NodePort to a pod). */
  readonly destination?: Rewrite;
  /** ICMP echo identifier rewritten (NAT treats it as the port of an echo). */
  readonly echoId?: { readonly from: number; readonly to: number };
  readonly basis: CopyBasis;
  /** The IPv4 identification both copies carry, when the capture shows it. */
  readonly ipId?: number;
  /** Time from the first copy to this one. */
  readonly gapNs: bigint;
}

/** A packet's later copy matched to its first copy. `T` is what the caller attached to each. */
export interface CopyMatch<T> extends CopyChange {
  /** The packet's first copy in the capture (the one that entered the node), with its tag. */
  readonly first: { readonly packet: Packet; readonly tag: T };
  /** How many copies came before this one (1: this is the second). */
  readonly seenBefore: number;
}

/** A first copy and what its later copies added; one per packet offered, kept for the window. */
interface Group<T> {
  readonly packet: Packet;
  readonly frame: Frame;
  readonly tag: T;
  readonly key: number;
  /** Direction of the latest copy. */
  lastDirection: Direction | undefined;
  /** Interfaces of the later copies (the first copy's is `packet.iface`). */
  later?: (string | undefined)[];
  copies: number;
  /** The next older first copy with the same key. */
  older: Group<T> | undefined;
}

function sawOn<T>(g: Group<T>, iface: string | undefined): boolean {
  return g.packet.iface === iface || (g.later?.includes(iface) ?? false);
}

function namesEvery<T>(g: Group<T>): boolean {
  return g.packet.iface !== undefined && (g.later?.every((x) => x !== undefined) ?? true);
}

const mix = (h: number, v: number): number => Math.imul(h ^ v, 0x01000193);

/**
 * A hash of the fields forwarding and NAT leave alone (the lookup key; {@link sameInvariants}
 * decides): IP protocol, length and identification; TCP sequence, acknowledgement, flags and
 * payload length; UDP length; ICMP type, code and echo sequence; ESP SPI and sequence.
 */
function invariantHash(f: Frame): number | undefined {
  const ip = f.ip;
  if (ip === undefined) return undefined;
  const t = f.transport;
  // a later fragment is nothing but its IP header: only the identification pairs it
  if (t === undefined && ip.id === undefined) return undefined;
  let h = mix(mix(mix(0x811c9dc5, ip.protocol), ip.length ?? -1), ip.id ?? -1);
  if (t === undefined) return h >>> 0;
  if (t.kind === "tcp") {
    h = mix(mix(h, t.seq ?? -1), t.ack ?? -1);
    h = mix(mix(h, t.flags ?? -1), t.payloadLength ?? -1);
  } else if (t.kind === "udp") h = mix(h, t.payloadLength ?? -1);
  else if (t.kind === "icmp") h = mix(mix(mix(h, t.type), t.code ?? -1), t.seq ?? -1);
  else if (t.kind === "esp") h = mix(mix(h, t.spi), t.seq);
  return h >>> 0;
}

/** The fields {@link invariantHash} covers, compared exactly. */
function sameInvariants(a: Frame, b: Frame): boolean {
  const x = a.ip!;
  const y = b.ip!;
  if (x.family !== y.family || x.protocol !== y.protocol) return false;
  if (x.length !== y.length || x.id !== y.id) return false;
  const s = a.transport;
  const t = b.transport;
  if (s === undefined || t === undefined) return s === t;
  switch (s.kind) {
    case "tcp":
      return (
        t.kind === "tcp" &&
        s.seq === t.seq &&
        s.ack === t.ack &&
        s.flags === t.flags &&
        s.payloadLength === t.payloadLength
      );
    case "udp":
      return t.kind === "udp" && s.payloadLength === t.payloadLength;
    case "icmp":
      return (
        t.kind === "icmp" &&
        s.version === t.version &&
        s.type === t.type &&
        s.code === t.code &&
        s.seq === t.seq
      );
    case "esp":
      return t.kind === "esp" && s.spi === t.spi && s.seq === t.seq;
    default:
      return t.kind === s.kind;
  }
}

function ends(f: Frame): { src: CopyEnd; dst: CopyEnd } {
  const ip = f.ip!;
  const t = f.transport;
  const src: Ip = { family: ip.family, value: ip.src };
  const dst: Ip = { family: ip.family, value: ip.dst };
  if (t?.kind === "tcp" || t?.kind === "udp")
    return { src: { ip: src, port: t.srcPort }, dst: { ip: dst, port: t.dstPort } };
  return { src: { ip: src }, dst: { ip: dst } };
}

function sameEnd(a: CopyEnd, b: CopyEnd): boolean {
  return a.ip.family === b.ip.family && a.ip.value === b.ip.value && a.port === b.port;
}

/** Directions a copy can be recorded with; broadcast, multicast and other-host are not paired. */
function isPairable(d: Direction | undefined): boolean {
  return d === undefined || d === "in" || d === "out";
}

/**
 * Pairs the copies of one packet in a capture, packet by packet, keeping only the last
 * {@link COPY_WINDOW_NS} of first copies (memory grows with the packet rate, not the capture).
 *
 * @example
 * const pairer = new CopyPairer<number>();
 * for (const p of packets) {
 *   const m = pairer.add(p, p.index);
 *   if (m?.source) console.log(`packet ${m.first.tag} → ${p.index}: source rewritten`);
 * }
 */
export class CopyPairer<T> {
  private readonly windowNs: bigint;
  /** The newest first copy per key; older ones with the same key are chained behind it. */
  private readonly byKey = new Map<number, Group<T>>();
  private readonly queue: Group<T>[] = [];
  private head = 0;
  private latestNs: bigint | undefined;

  constructor(opts: { windowNs?: bigint } = {}) {
    this.windowNs = opts.windowNs ?? COPY_WINDOW_NS;
  }

  /**
   * Offers the next packet of the capture. Returns the match when it is a later copy of a packet
   * already remembered; otherwise remembers it as a first copy with its tag (unless `remember` is
   * false: a packet only looked up, e.g. one the caller keeps only if it pairs) and returns
   * undefined.
   */
  add(p: Packet, tag: T, remember = true): CopyMatch<T> | undefined {
    if (this.latestNs === undefined || p.timeNs > this.latestNs) this.latestNs = p.timeNs;
    this.evict();
    if (!isPairable(p.direction)) return undefined;
    const f = innermost(p);
    const key = invariantHash(f);
    if (key === undefined) return undefined;
    const newest = this.byKey.get(key);
    // the latest first copy that this packet can repeat
    for (let g = newest; g !== undefined; g = g.older) {
      const m = this.match(g, p, f);
      if (m === undefined) continue;
      g.copies++;
      g.lastDirection = p.direction;
      if (g.later === undefined) g.later = [p.iface];
      else g.later.push(p.iface);
      return m;
    }
    if (!remember) return undefined;
    const g: Group<T> = {
      packet: p,
      frame: f,
      tag,
      key,
      lastDirection: p.direction,
      copies: 1,
      older: newest,
    };
    this.byKey.set(key, g);
    this.queue.push(g);
    return undefined;
  }

  /** How many first copies are remembered now (those within the window of the latest packet). */
  get remembered(): number {
    return this.queue.length - this.head;
  }

  private evict(): void {
    const oldest = this.latestNs! - this.windowNs;
    while (this.head < this.queue.length && this.queue[this.head]!.packet.timeNs < oldest) {
      const g = this.queue[this.head++]!;
      // the queue is in offering order, so g is the oldest of its chain: cut it off the end
      let x = this.byKey.get(g.key);
      if (x === g) this.byKey.delete(g.key);
      else {
        while (x !== undefined && x.older !== g) x = x.older;
        if (x !== undefined) x.older = undefined;
      }
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }

  private match(g: Group<T>, p: Packet, f: Frame): CopyMatch<T> | undefined {
    const gap = p.timeNs - g.packet.timeNs;
    if (gap > this.windowNs || gap < -this.windowNs) return undefined;
    const a = g.frame;
    if (!sameInvariants(a, f)) return undefined;
    const ipA = a.ip!;
    const ipB = f.ip!;
    const byIpId = ipA.id !== undefined && ipB.id !== undefined;
    // Direction: a copy arrives (in) and leaves (out), never the other way round within the node
    // (an out followed by an in is the loopback device, or two separate packets).
    const dirKnown = g.lastDirection !== undefined && p.direction !== undefined;
    if (g.lastDirection === "out" && p.direction === "in") return undefined;
    const ifKnown = p.iface !== undefined && namesEvery(g);
    const sameIfaceSameWay = ifKnown && sawOn(g, p.iface) && g.lastDirection === p.direction;
    if (sameIfaceSameWay) return undefined;
    // in then in (a bridge port, then the bridge) or out then out (a tunnel device, then the
    // encapsulated packet) only on two interfaces the capture names
    if (dirKnown && g.lastDirection === p.direction && !ifKnown) return undefined;
    const crossing =
      (dirKnown && g.lastDirection === "in" && p.direction === "out") ||
      (ifKnown && !sawOn(g, p.iface));
    const x = ends(a);
    const y = ends(f);
    const sameSrc = sameEnd(x.src, y.src);
    const sameDst = sameEnd(x.dst, y.dst);
    const tA = a.transport;
    const tB = f.transport;
    let echoId: { from: number; to: number } | undefined;
    if (tA?.kind === "icmp" && tB?.kind === "icmp" && tA.id !== tB.id) {
      // NAT may give an echo a new identifier; only the IP identification then says it is one packet
      if (!byIpId || tA.id === undefined || tB.id === undefined) return undefined;
      echoId = { from: tA.id, to: tB.id };
    }
    const strongTransport =
      (tA?.kind === "tcp" && (tA.seq !== undefined || tA.ack !== undefined)) ||
      (tA?.kind === "icmp" && tA.seq !== undefined) ||
      tA?.kind === "esp";
    if (sameSrc && sameDst && echoId === undefined) {
      // Nothing rewritten: without the identification, two interfaces or in→out must tell a copy
      // from the next packet of the same flow.
      if (!crossing && !byIpId) return undefined;
    } else if (!sameSrc && !sameDst) {
      // Both ends rewritten (hairpin NAT) only with the identification: without it, a packet and
      // one going the other way can share sequence-derived fields (tcpdump's relative numbers).
      if (!byIpId) return undefined;
    } else if (!byIpId && !strongTransport && !crossing) return undefined;
    return {
      first: g,
      seenBefore: g.copies,
      ...(sameSrc ? {} : { source: { from: x.src, to: y.src } }),
      ...(sameDst ? {} : { destination: { from: x.dst, to: y.dst } }),
      ...(echoId === undefined ? {} : { echoId }),
      basis: crossing ? "direction" : "id",
      ...(byIpId ? { ipId: ipB.id } : {}),
      gapNs: gap,
    };
  }
}

/** One pairing found by {@link findCopies}: packet numbers as `tcpdump -#` prints them. */
export interface PacketCopy extends CopyChange {
  readonly first: number;
  readonly again: number;
}

/**
 * Every later copy in a capture, matched to its first copy.
 *
 * @example
 * for (const c of await findCopies(readCapture("node.pcap"))) console.log(describeCopy(c));
 * // packets 3 and 4: source 10.4.0.5 → 10.128.0.2
 */
export async function findCopies(
  packets: AsyncIterable<Packet> | Iterable<Packet>,
  opts: { windowNs?: bigint } = {},
): Promise<PacketCopy[]> {
  const pairer = new CopyPairer<number>(opts);
  const out: PacketCopy[] = [];
  for await (const p of packets) {
    const m = pairer.add(p, p.index);
    if (m === undefined) continue;
    out.push({
      first: m.first.tag,
      again: p.index,
      ...(m.source === undefined ? {} : { source: m.source }),
      ...(m.destination === undefined ? {} : { destination: m.destination }),
      ...(m.echoId === undefined ? {} : { echoId: m.echoId }),
      basis: m.basis,
      ...(m.ipId === undefined ? {} : { ipId: m.ipId }),
      gapNs: m.gapNs,
    });
  }
  return out;
}

/** `10.4.0.5` or `10.4.0.5:36826` (`[v6]:port`). */
export function formatEnd(e: CopyEnd): string {
  const a = formatIp(e.ip);
  if (e.port === undefined) return a;
  return e.ip.family === 6 ? `[${a}]:${e.port}` : `${a}:${e.port}`;
}

/** A rewrite as people read it: the port only where it changed. */
export function describeRewrite(r: Rewrite): string {
  const portChanged = r.from.port !== r.to.port;
  const show = (e: CopyEnd) => (portChanged ? formatEnd(e) : formatIp(e.ip));
  return `${show(r.from)} → ${show(r.to)}`;
}

/**
 * What a pairing without interfaces or directions rests on, as a phrase (empty for `direction`):
 * `paired by IP identification (id 4177), sequence and time`.
 */
export function describeBasis(basis: CopyBasis, ipId: number | undefined): string {
  if (basis === "direction") return "";
  return ipId === undefined
    ? "paired by sequence numbers, lengths and time"
    : `paired by IP identification (id ${ipId}), sequence and time`;
}

/** `packets 3 and 4: source 10.4.0.5 → 10.128.0.2` (or `not rewritten`). */
export function describeCopy(c: PacketCopy): string {
  const parts: string[] = [];
  if (c.source) parts.push(`source ${describeRewrite(c.source)}`);
  if (c.destination) parts.push(`destination ${describeRewrite(c.destination)}`);
  if (c.echoId) parts.push(`echo id ${c.echoId.from} → ${c.echoId.to}`);
  const what = parts.length === 0 ? "not rewritten" : parts.join(", ");
  const by = c.basis === "id" ? ` (${describeBasis(c.basis, c.ipId)})` : "";
  return `packets ${c.first} and ${c.again}: ${what}${by}`;
}
