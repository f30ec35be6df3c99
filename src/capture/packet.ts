/**
 * @module capture/packet — the decoded packet every capture reader produces (pcap, pcapng and
 * tcpdump text alike): time, interface and direction, and the layers down to TCP/UDP/ICMP, with
 * tunnels (VXLAN, Geneve) carrying an inner frame.
 *
 * Addresses are bigint (as in net/cidr.ts); MAC addresses stay strings (they are only shown).
 * A field absent means "not known from this input" (tcpdump text omits what its flags hide).
 * tcpdump text printed without `-n` names hosts (and sometimes ports) instead of numbering them:
 * such a packet carries `named` instead of `ip` (see {@link NamedIpHeader}).
 */
import type { Family } from "../net/cidr.ts";

/** Direction of a packet relative to the capturing host, where the link layer says it. */
export type Direction = "in" | "out" | "broadcast" | "multicast" | "otherhost";

/** The IP header fields the diagnosis uses. */
export interface IpHeader {
  readonly family: Family;
  readonly src: bigint;
  readonly dst: bigint;
  /** IP protocol number (IPv6: the upper-layer protocol after the extension headers). */
  readonly protocol: number;
  readonly ttl?: number;
  /**
   * IPv4 identification (tcpdump prints it with -v as `id N`): the same number on every copy of
   * one packet, so copies seen on several interfaces can be paired.
   */
  readonly id?: number;
  /** IPv4 total length, or IPv6 payload length + 40: the length the sender put on the wire. */
  readonly length?: number;
  /** Not the first fragment: there is no transport header. */
  readonly isLaterFragment?: boolean;
}

/**
 * The IP header of a packet tcpdump printed with names (text printed without `-n`): an IP packet
 * whose protocol, ports, flags and lengths are read, but where a host name stands for an address
 * podpath cannot know (the printing machine's resolver chose the name), or a service name podpath's
 * table does not know stands for a port. Each end has either its address or its name.
 *
 * A frame carries this instead of `ip`, so code keyed on addresses (conversations, host matching,
 * pairing copies of a packet) leaves such packets aside rather than mistaking them for others.
 */
export interface NamedIpHeader extends Omit<IpHeader, "src" | "dst"> {
  /** The source address, when it was printed as one. */
  readonly src?: bigint;
  readonly dst?: bigint;
  /** The host name printed instead of the source address. */
  readonly srcName?: string;
  readonly dstName?: string;
}

/** TCP flag bits as in the header's 13th byte (plus NS in bit 8). */
export const TCP = {
  FIN: 0x01,
  SYN: 0x02,
  RST: 0x04,
  PSH: 0x08,
  ACK: 0x10,
  URG: 0x20,
  ECE: 0x40,
  CWR: 0x80,
} as const;

/**
 * tcpdump text without `-n` prints a port as its service name (`/etc/services`). A name podpath's
 * table maps is read as its number; a name it does not know is kept here, its port is unknown and
 * the port field is 0 (only ever in a frame that carries `named`, never `ip`).
 */
export interface PortNames {
  readonly srcService?: string;
  readonly dstService?: string;
}

export interface TcpHeader extends PortNames {
  readonly kind: "tcp";
  readonly srcPort: number;
  readonly dstPort: number;
  /** Flag bits, see {@link TCP}; absent when the input does not show them (tcpdump -q). */
  readonly flags?: number;
  readonly seq?: number;
  readonly ack?: number;
  /** Payload bytes (from the IP length, not the captured length). */
  readonly payloadLength?: number;
}

export interface UdpHeader extends PortNames {
  readonly kind: "udp";
  readonly srcPort: number;
  readonly dstPort: number;
  readonly payloadLength?: number;
}

/** The header an ICMP error quotes: the packet it is about (RFC 792, RFC 4443). */
export interface QuotedHeader {
  readonly ip: IpHeader;
  readonly srcPort?: number;
  readonly dstPort?: number;
}

/** A quoted header as tcpdump printed it with names (see NamedIpHeader, PortNames). */
export interface NamedQuotedHeader extends PortNames {
  readonly ip: NamedIpHeader;
  readonly srcPort?: number;
  readonly dstPort?: number;
}

export interface IcmpHeader {
  readonly kind: "icmp";
  /** 4 for ICMP, 6 for ICMPv6. */
  readonly version: 4 | 6;
  readonly type: number;
  readonly code?: number;
  readonly id?: number;
  readonly seq?: number;
  /** For errors (unreachable, time exceeded, ...): the original packet's header. */
  readonly quoted?: QuotedHeader;
  /** Instead of `quoted`, when tcpdump text named a host or unknown service in it (no `-n`). */
  readonly quotedNamed?: NamedQuotedHeader;
}

/** ESP is counted, never decrypted. */
export interface EspHeader {
  readonly kind: "esp";
  readonly spi: number;
  readonly seq: number;
}

export interface OtherTransport {
  readonly kind: "other";
  readonly protocol: number;
}

export type Transport = TcpHeader | UdpHeader | IcmpHeader | EspHeader | OtherTransport;

export interface ArpMessage {
  /** 1 request, 2 reply. */
  readonly op: number;
  readonly senderIp?: bigint;
  readonly targetIp?: bigint;
  /** Host names tcpdump printed (no `-n`) instead of the sender's or target's address. */
  readonly senderName?: string;
  readonly targetName?: string;
}

export interface EthernetHeader {
  readonly src: string;
  readonly dst: string;
  /** The ethertype after any VLAN tags. */
  readonly ethertype: number;
  /** VLAN ids outermost first (802.1Q, 802.1ad QinQ). */
  readonly vlans: readonly number[];
}

/** A frame's content: what one link-layer payload decodes to. Tunnels nest another Frame. */
export interface Frame {
  readonly ether?: EthernetHeader;
  readonly arp?: ArpMessage;
  readonly ip?: IpHeader;
  /** Instead of `ip`, when tcpdump text named a host or an unknown service (see NamedIpHeader). */
  readonly named?: NamedIpHeader;
  readonly transport?: Transport;
  readonly tunnel?: Tunnel;
}

export interface Tunnel {
  readonly kind: "vxlan" | "geneve";
  readonly vni: number;
  readonly inner: Frame;
}

/** Where a packet was read from: its record's byte offset (binary) or text line. */
export interface PacketOrigin {
  /** Byte offset of the record in the file (pcap/pcapng). */
  readonly offset?: number;
  /** 1-based line where the packet starts (tcpdump text). */
  readonly line?: number;
}

export interface Packet extends Frame, PacketOrigin {
  /** 1-based position in the capture: what `tcpdump -#` prints. */
  readonly index: number;
  /**
   * Nanoseconds since the Unix epoch (UTC). For tcpdump text printed without a date, nanoseconds
   * since midnight, with `timeOfDayOnly` set.
   */
  readonly timeNs: bigint;
  readonly timeOfDayOnly?: boolean;
  /**
   * tcpdump text whose times are not a clock (`timeOfDayOnly` is set too): `none` for `-t` (no
   * time, timeNs 0), `since-first` for `-ttttt` and for `-ttt` (its deltas summed).
   */
  readonly timeBasis?: "none" | "since-first";
  /** Interface name (pcapng if_name, tcpdump text `-i any`) or `ifindex N` (LINUX_SLL2). */
  readonly iface?: string;
  readonly direction?: Direction;
  /** Link-layer type (LINKTYPE_* number), where known. */
  readonly linkType?: number;
  /** Bytes on the wire. */
  readonly length?: number;
  /** Bytes captured (≤ length). */
  readonly capturedLength?: number;
}

/** The innermost frame: through every tunnel to the payload the endpoints exchanged. */
export function innermost(f: Frame): Frame {
  let cur = f;
  while (cur.tunnel !== undefined) cur = cur.tunnel.inner;
  return cur;
}

/** Protocol numbers by name, for rendering. */
export const IP_PROTOCOL_NAMES: Readonly<Record<number, string>> = {
  1: "icmp",
  6: "tcp",
  17: "udp",
  50: "esp",
  58: "icmp6",
  47: "gre",
  132: "sctp",
  51: "ah",
};

/** tcpdump's flag letters, in its order (print-tcp.c): `[S.]`, `[FP.]`, `[S.E]`, `[none]`. */
export function formatTcpFlags(flags: number): string {
  let s = "";
  if (flags & TCP.FIN) s += "F";
  if (flags & TCP.SYN) s += "S";
  if (flags & TCP.RST) s += "R";
  if (flags & TCP.PSH) s += "P";
  if (flags & TCP.ACK) s += ".";
  if (flags & TCP.URG) s += "U";
  if (flags & TCP.ECE) s += "E";
  if (flags & TCP.CWR) s += "W";
  return s === "" ? "none" : s;
}

/** Parses tcpdump's flag letters back into bits; undefined for a letter it never prints. */
export function parseTcpFlags(text: string): number | undefined {
  if (text === "none") return 0;
  let flags = 0;
  for (const ch of text) {
    const bit = FLAG_LETTERS[ch];
    if (bit === undefined) return undefined;
    flags |= bit;
  }
  return flags;
}

const FLAG_LETTERS: Readonly<Record<string, number>> = {
  F: TCP.FIN,
  S: TCP.SYN,
  R: TCP.RST,
  P: TCP.PSH,
  U: TCP.URG,
  E: TCP.ECE,
  W: TCP.CWR,
  ".": TCP.ACK,
};
