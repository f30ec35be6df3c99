/**
 * @module capture/decode — packet bytes to layers: the link types Kubernetes captures produce
 * (Ethernet with 802.1Q/QinQ, LINUX_SLL, LINUX_SLL2, RAW, NULL/LOOP, NFLOG, PPP), IPv4 and IPv6
 * with extension headers, TCP, UDP, ICMP/ICMPv6 with the quoted header of errors, ESP, and the
 * overlays on real paths (VXLAN 4789/8472, Geneve 6081) with their inner frames.
 *
 * Every read is bounds-checked against the captured length: a short capture yields the layers
 * that fit, never an exception.
 */
import type { Family } from "../net/cidr.ts";
import type {
  ArpMessage,
  Direction,
  EthernetHeader,
  Frame,
  IpHeader,
  QuotedHeader,
  Transport,
  Tunnel,
} from "./packet.ts";

/** LINKTYPE_* values (tcpdump.org/linktypes.html) podpath decodes. */
export const LINKTYPE = {
  NULL: 0,
  EN10MB: 1,
  PPP: 9,
  RAW: 101,
  RAW_OPENBSD: 14,
  RAW_BSD: 12,
  LOOP: 108,
  LINUX_SLL: 113,
  IPV4: 228,
  IPV6: 229,
  NFLOG: 239,
  LINUX_SLL2: 276,
} as const;

export const ETHERTYPE = {
  IPV4: 0x0800,
  ARP: 0x0806,
  VLAN: 0x8100,
  QINQ: 0x88a8,
  QINQ_OLD: 0x9100,
  IPV6: 0x86dd,
  TEB: 0x6558,
} as const;

export const PORTS = { vxlan: 4789, vxlanLinux: 8472, geneve: 6081 } as const;

/** Linux packet types (if_packet.h PACKET_*), as LINUX_SLL and SLL2 record them. */
const PKTTYPE: readonly Direction[] = ["in", "broadcast", "multicast", "otherhost", "out"];

export interface LinkDecoded {
  readonly frame: Frame;
  readonly direction?: Direction;
  /** LINUX_SLL2 interface index. */
  readonly ifindex?: number;
}

/** Whether this link type is one podpath decodes. */
export function isKnownLinkType(t: number): boolean {
  return KNOWN_LINKTYPES.has(t);
}

const KNOWN_LINKTYPES: ReadonlySet<number> = new Set(Object.values(LINKTYPE));

/** Decodes one record's bytes `b[start..end)` of link type `linkType`. */
export function decodeLink(
  b: Uint8Array,
  start: number,
  end: number,
  linkType: number,
): LinkDecoded {
  switch (linkType) {
    case LINKTYPE.EN10MB:
      return { frame: decodeEthernet(b, start, end, 0) };
    case LINKTYPE.LINUX_SLL: {
      // pkttype(2) hatype(2) halen(2) addr(8) protocol(2)
      if (end - start < 16) return { frame: {} };
      const dir = PKTTYPE[be16(b, start)];
      const frame = decodeEthertype(b, start + 16, end, be16(b, start + 14), 0);
      return dir === undefined ? { frame } : { frame, direction: dir };
    }
    case LINKTYPE.LINUX_SLL2: {
      // protocol(2) reserved(2) ifindex(4) hatype(2) pkttype(1) halen(1) addr(8)
      if (end - start < 20) return { frame: {} };
      const dir = PKTTYPE[b[start + 10]!];
      const ifindex = be32(b, start + 4);
      const frame = decodeEthertype(b, start + 20, end, be16(b, start), 0);
      return dir === undefined ? { frame, ifindex } : { frame, direction: dir, ifindex };
    }
    case LINKTYPE.RAW:
    case LINKTYPE.RAW_BSD:
    case LINKTYPE.RAW_OPENBSD:
    case LINKTYPE.IPV4:
    case LINKTYPE.IPV6:
      return { frame: decodeIp(b, start, end, 0) };
    case LINKTYPE.NULL:
    case LINKTYPE.LOOP: {
      if (end - start < 4) return { frame: {} };
      // NULL: AF_ value in the capturing host's byte order; LOOP: network order.
      const beV = be32(b, start);
      const leV = le32(b, start);
      const af = linkType === LINKTYPE.LOOP ? beV : leV < 256 ? leV : beV;
      if (af === 2 || af === 10 || af === 24 || af === 28 || af === 30)
        return { frame: decodeIp(b, start + 4, end, 0) };
      return { frame: {} };
    }
    case LINKTYPE.NFLOG:
      return { frame: decodeNflog(b, start, end) };
    case LINKTYPE.PPP: {
      let o = start;
      if (end - o >= 2 && b[o] === 0xff && b[o + 1] === 0x03) o += 2;
      if (end - o < 2) return { frame: {} };
      const proto = be16(b, o);
      if (proto === 0x0021 || proto === 0x0057) return { frame: decodeIp(b, o + 2, end, 0) };
      return { frame: {} };
    }
    default:
      return { frame: {} };
  }
}

function be16(b: Uint8Array, o: number): number {
  return (b[o]! << 8) | b[o + 1]!;
}
function be32(b: Uint8Array, o: number): number {
  return ((b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!) >>> 0;
}
function le16(b: Uint8Array, o: number): number {
  return b[o]! | (b[o + 1]! << 8);
}
function le32(b: Uint8Array, o: number): number {
  return (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
}

function mac(b: Uint8Array, o: number): string {
  const parts: string[] = [];
  for (let i = 0; i < 6; i++) parts.push(b[o + i]!.toString(16).padStart(2, "0"));
  return parts.join(":");
}

/** Tunnels inside tunnels are decoded this deep, no deeper (a crafted packet cannot recurse). */
const MAX_DEPTH = 4;

function decodeEthernet(b: Uint8Array, start: number, end: number, depth: number): Frame {
  if (end - start < 14) return {};
  let o = start + 12;
  let type = be16(b, o);
  const vlans: number[] = [];
  while (
    (type === ETHERTYPE.VLAN || type === ETHERTYPE.QINQ || type === ETHERTYPE.QINQ_OLD) &&
    end - o >= 6 &&
    vlans.length < 8
  ) {
    vlans.push(be16(b, o + 2) & 0x0fff);
    o += 4;
    type = be16(b, o);
  }
  const ether: EthernetHeader = {
    dst: mac(b, start),
    src: mac(b, start + 6),
    ethertype: type,
    vlans,
  };
  return { ether, ...decodeEthertype(b, o + 2, end, type, depth) };
}

function decodeEthertype(
  b: Uint8Array,
  o: number,
  end: number,
  type: number,
  depth: number,
): Frame {
  if (type === ETHERTYPE.IPV4 || type === ETHERTYPE.IPV6) return decodeIp(b, o, end, depth);
  if (type === ETHERTYPE.ARP) return decodeArp(b, o, end);
  return {};
}

function decodeArp(b: Uint8Array, o: number, end: number): Frame {
  if (end - o < 8) return {};
  const op = be16(b, o + 6);
  const hlen = b[o + 4]!;
  const plen = b[o + 5]!;
  const arp: { op: number; senderIp?: bigint; targetIp?: bigint } = { op };
  if (plen === 4 && end - o >= 8 + 2 * hlen + 8) {
    arp.senderIp = BigInt(be32(b, o + 8 + hlen));
    arp.targetIp = BigInt(be32(b, o + 8 + 2 * hlen + 4));
  }
  return { arp: arp satisfies ArpMessage };
}

/** NFLOG (linktype 239): family(1) version(1) resource id(2), then TLVs in host order. */
function decodeNflog(b: Uint8Array, start: number, end: number): Frame {
  let o = start + 4;
  while (o + 4 <= end) {
    const len = le16(b, o);
    const type = le16(b, o + 2);
    if (len < 4) return {};
    // NFULA_PAYLOAD (9) holds the packet from its network header.
    if (type === 9) return decodeIp(b, o + 4, Math.min(end, o + len), 0);
    o += (len + 3) & ~3;
  }
  return {};
}

function readAddr(b: Uint8Array, o: number, family: Family): bigint {
  if (family === 4) return BigInt(be32(b, o));
  let v = 0n;
  for (let i = 0; i < 16; i += 4) v = (v << 32n) | BigInt(be32(b, o + i));
  return v;
}

interface IpParsed {
  readonly ip: IpHeader;
  /** Where the upper-layer header starts, and where the IP payload ends (capped by capture). */
  readonly l4: number;
  readonly l4End: number;
  /** Payload length per the IP header (independent of capture length). */
  readonly l4Length: number;
}

/** Parses an IPv4 or IPv6 header; undefined when it does not fit or is not IP. */
function parseIpHeader(b: Uint8Array, o: number, end: number): IpParsed | undefined {
  if (end - o < 1) return undefined;
  const version = b[o]! >> 4;
  if (version === 4) {
    if (end - o < 20) return undefined;
    const ihl = (b[o]! & 0x0f) * 4;
    if (ihl < 20) return undefined;
    const total = be16(b, o + 2);
    const frag = be16(b, o + 6) & 0x1fff;
    const ip: IpHeader = {
      family: 4,
      src: BigInt(be32(b, o + 12)),
      dst: BigInt(be32(b, o + 16)),
      protocol: b[o + 9]!,
      ttl: b[o + 8]!,
      id: be16(b, o + 4),
      length: total,
      ...(frag !== 0 ? { isLaterFragment: true } : {}),
    };
    // TSO/GRO captures carry total length 0; the captured bytes are then the packet.
    const ipEnd = total >= ihl ? o + total : end;
    return { ip, l4: o + ihl, l4End: Math.min(end, ipEnd), l4Length: Math.max(0, ipEnd - o - ihl) };
  }
  if (version === 6) {
    if (end - o < 40) return undefined;
    const payload = be16(b, o + 4);
    let next = b[o + 6]!;
    let p = o + 40;
    let later = false;
    // RFC 8200 §4: hop-by-hop (0), routing (43), fragment (44), destination options (60),
    // AH (51, RFC 4302: length in 4-octet units + 2); the chain ends at an upper-layer header.
    for (let i = 0; i < 16; i++) {
      if (next === 0 || next === 43 || next === 60) {
        if (end - p < 2) break;
        const n = b[p]!;
        p += (b[p + 1]! + 1) * 8;
        next = n;
      } else if (next === 44) {
        if (end - p < 8) break;
        if ((be16(b, p + 2) & 0xfff8) !== 0) later = true;
        next = b[p]!;
        p += 8;
      } else if (next === 51) {
        if (end - p < 2) break;
        const n = b[p]!;
        p += (b[p + 1]! + 2) * 4;
        next = n;
      } else break;
    }
    const ip: IpHeader = {
      family: 6,
      src: readAddr(b, o + 8, 6),
      dst: readAddr(b, o + 24, 6),
      protocol: next,
      ttl: b[o + 7]!,
      length: payload + 40,
      ...(later ? { isLaterFragment: true } : {}),
    };
    const ipEnd = payload === 0 ? end : o + 40 + payload;
    return { ip, l4: p, l4End: Math.min(end, ipEnd), l4Length: Math.max(0, ipEnd - p) };
  }
  return undefined;
}

function decodeIp(b: Uint8Array, o: number, end: number, depth: number): Frame {
  const h = parseIpHeader(b, o, end);
  if (h === undefined) return {};
  if (h.ip.isLaterFragment || h.l4 > h.l4End) return { ip: h.ip };
  const { transport, tunnel } = decodeTransport(b, h, depth);
  if (transport === undefined) return { ip: h.ip };
  return tunnel === undefined ? { ip: h.ip, transport } : { ip: h.ip, transport, tunnel };
}

function decodeTransport(
  b: Uint8Array,
  h: IpParsed,
  depth: number,
): { transport?: Transport; tunnel?: Tunnel } {
  const o = h.l4;
  const end = h.l4End;
  const proto = h.ip.protocol;
  if (proto === 6) {
    if (end - o < 14) return {};
    const off = end - o >= 13 ? (b[o + 12]! >> 4) * 4 : 20;
    const flags = b[o + 13]! | ((b[o + 12]! & 1) << 8);
    return {
      transport: {
        kind: "tcp",
        srcPort: be16(b, o),
        dstPort: be16(b, o + 2),
        flags,
        seq: be32(b, o + 4),
        ack: be32(b, o + 8),
        payloadLength: Math.max(0, h.l4Length - off),
      },
    };
  }
  if (proto === 17) {
    if (end - o < 8) return {};
    const srcPort = be16(b, o);
    const dstPort = be16(b, o + 2);
    const transport: Transport = {
      kind: "udp",
      srcPort,
      dstPort,
      payloadLength: Math.max(0, be16(b, o + 4) - 8),
    };
    const tunnel =
      depth < MAX_DEPTH ? decodeTunnel(b, o + 8, end, srcPort, dstPort, depth + 1) : undefined;
    return tunnel === undefined ? { transport } : { transport, tunnel };
  }
  if (proto === 1 || proto === 58) {
    if (end - o < 4) return {};
    const version = proto === 1 ? 4 : 6;
    const type = b[o]!;
    const code = b[o + 1]!;
    const echo = version === 4 ? type === 0 || type === 8 : type === 128 || type === 129;
    const error =
      version === 4
        ? type === 3 || type === 4 || type === 5 || type === 11 || type === 12
        : type >= 1 && type <= 4;
    let extra: { id?: number; seq?: number; quoted?: QuotedHeader } = {};
    if (echo && end - o >= 8) extra = { id: be16(b, o + 4), seq: be16(b, o + 6) };
    else if (error) {
      const q = parseIpHeader(b, o + 8, end);
      if (q !== undefined) {
        const hasPorts =
          (q.ip.protocol === 6 || q.ip.protocol === 17) && q.l4 + 4 <= end && !q.ip.isLaterFragment;
        extra = {
          quoted: hasPorts
            ? { ip: q.ip, srcPort: be16(b, q.l4), dstPort: be16(b, q.l4 + 2) }
            : { ip: q.ip },
        };
      }
    }
    return { transport: { kind: "icmp", version, type, code, ...extra } };
  }
  if (proto === 50) {
    if (end - o < 8) return { transport: { kind: "other", protocol: 50 } };
    return { transport: { kind: "esp", spi: be32(b, o), seq: be32(b, o + 4) } };
  }
  return { transport: { kind: "other", protocol: proto } };
}

function decodeTunnel(
  b: Uint8Array,
  o: number,
  end: number,
  srcPort: number,
  dstPort: number,
  depth: number,
): Tunnel | undefined {
  const isPort = (p: number) => srcPort === p || dstPort === p;
  if (isPort(PORTS.vxlan) || isPort(PORTS.vxlanLinux)) {
    // RFC 7348: flags(1, I bit 0x08) reserved(3) VNI(3) reserved(1), then an Ethernet frame.
    if (end - o < 8 || (b[o]! & 0x08) === 0) return undefined;
    const vni = (b[o + 4]! << 16) | (b[o + 5]! << 8) | b[o + 6]!;
    return { kind: "vxlan", vni, inner: decodeEthernet(b, o + 8, end, depth) };
  }
  if (isPort(PORTS.geneve)) {
    // RFC 8926: ver(2) optlen(6) | flags(8) | protocol(16) | VNI(24) reserved(8) | options.
    if (end - o < 8 || b[o]! >> 6 !== 0) return undefined;
    const optLen = (b[o]! & 0x3f) * 4;
    const proto = be16(b, o + 2);
    const vni = (b[o + 4]! << 16) | (b[o + 5]! << 8) | b[o + 6]!;
    const p = o + 8 + optLen;
    const inner =
      proto === ETHERTYPE.TEB
        ? decodeEthernet(b, p, end, depth)
        : decodeEthertype(b, p, end, proto, depth);
    return { kind: "geneve", vni, inner };
  }
  return undefined;
}
