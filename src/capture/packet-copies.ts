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

/** A packet's later copy matched to its first copy. `T` is what the caller attached to each. */
export interface CopyMatch<T> {
  /** The packet's first copy in the capture (the one that entered the node). */
  readonly first: { readonly packet: Packet; readonly tag: T };
  /** How many copies came before this one (1: this is the second). */
  readonly seenBefore: number;
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

interface Group<T> {
  readonly first: Packet;
  readonly frame: Frame;
  readonly tag: T;
  readonly key: string;
  /** Direction of the latest copy. */
  lastDirection: Direction | undefined;
  /** Interfaces the copies were seen on. */
  readonly ifaces: (string | undefined)[];
  copies: number;
}

/** The fields forwarding and NAT leave alone, as one string (the lookup key). */
function invariantKey(f: Frame): string | undefined {
  const ip = f.ip;
  if (ip === undefined) return undefined;
  const t = f.transport;
  let tail: string;
  if (t === undefined) {
    // a later fragment: nothing but the IP header, so only the identification pairs it
    if (ip.id === undefined) return undefined;
    tail = "-";
  } else if (t.kind === "tcp")
    tail = `${t.seq ?? "-"}|${t.ack ?? "-"}|${t.flags ?? "-"}|${t.payloadLength ?? "-"}`;
  else if (t.kind === "udp") tail = `${t.payloadLength ?? "-"}`;
  else if (t.kind === "icmp") tail = `${t.version}|${t.type}|${t.code ?? "-"}|${t.seq ?? "-"}`;
  else if (t.kind === "esp") tail = `${t.spi}|${t.seq}`;
  else tail = "";
  return `${ip.family}|${ip.protocol}|${ip.length ?? "-"}|${ip.id ?? "-"}|${t?.kind ?? "frag"}|${tail}`;
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
  private readonly byKey = new Map<string, Group<T>[]>();
  private readonly queue: Group<T>[] = [];
  private head = 0;
  private latestNs: bigint | undefined;

  constructor(opts: { windowNs?: bigint } = {}) {
    this.windowNs = opts.windowNs ?? COPY_WINDOW_NS;
  }

  /**
   * Offers the next packet of the capture. Returns the match when it is a later copy of a packet
   * already offered; otherwise remembers it as a first copy (with its tag) and returns undefined.
   */
  add(p: Packet, tag: T): CopyMatch<T> | undefined {
    if (this.latestNs === undefined || p.timeNs > this.latestNs) this.latestNs = p.timeNs;
    this.evict();
    const f = innermost(p);
    const key = invariantKey(f);
    if (key === undefined || !isPairable(p.direction)) return undefined;
    const bucket = this.byKey.get(key);
    if (bucket !== undefined) {
      // the latest first copy that this packet can repeat
      for (let i = bucket.length - 1; i >= 0; i--) {
        const g = bucket[i]!;
        const m = this.match(g, p, f);
        if (m === undefined) continue;
        g.copies++;
        g.lastDirection = p.direction;
        g.ifaces.push(p.iface);
        return m;
      }
    }
    const g: Group<T> = {
      first: p,
      frame: f,
      tag,
      key,
      lastDirection: p.direction,
      ifaces: [p.iface],
      copies: 1,
    };
    if (bucket === undefined) this.byKey.set(key, [g]);
    else bucket.push(g);
    this.queue.push(g);
    return undefined;
  }

  private evict(): void {
    const oldest = this.latestNs! - this.windowNs;
    while (this.head < this.queue.length && this.queue[this.head]!.first.timeNs < oldest) {
      const g = this.queue[this.head++]!;
      const bucket = this.byKey.get(g.key);
      if (bucket !== undefined) {
        const i = bucket.indexOf(g);
        if (i >= 0) bucket.splice(i, 1);
        if (bucket.length === 0) this.byKey.delete(g.key);
      }
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }

  private match(g: Group<T>, p: Packet, f: Frame): CopyMatch<T> | undefined {
    const gap = p.timeNs - g.first.timeNs;
    if (gap > this.windowNs || gap < -this.windowNs) return undefined;
    const a = g.frame;
    const ipA = a.ip!;
    const ipB = f.ip!;
    const byIpId = ipA.id !== undefined && ipB.id !== undefined;
    // Direction: a copy arrives (in) and leaves (out), never the other way round within the node
    // (an out followed by an in is the loopback device, or two separate packets).
    const dirKnown = g.lastDirection !== undefined && p.direction !== undefined;
    if (g.lastDirection === "out" && p.direction === "in") return undefined;
    const ifKnown = p.iface !== undefined && g.ifaces.every((x) => x !== undefined);
    const sameIfaceSameWay =
      ifKnown && g.ifaces.includes(p.iface) && g.lastDirection === p.direction;
    if (sameIfaceSameWay) return undefined;
    // in then in (a bridge port, then the bridge) or out then out (a tunnel device, then the
    // encapsulated packet) only on two interfaces the capture names
    if (dirKnown && g.lastDirection === p.direction && !ifKnown) return undefined;
    const crossing =
      (dirKnown && g.lastDirection === "in" && p.direction === "out") ||
      (ifKnown && !g.ifaces.includes(p.iface));
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
      first: { packet: g.first, tag: g.tag },
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
export interface PacketCopy {
  readonly first: number;
  readonly again: number;
  readonly source?: Rewrite;
  readonly destination?: Rewrite;
  readonly echoId?: { readonly from: number; readonly to: number };
  readonly basis: CopyBasis;
  readonly ipId?: number;
  readonly gapNs: bigint;
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
