/**
 * @module capture/flow-key — which conversation a packet belongs to (protocol, the two ends in a
 * canonical order, the key that groups it) and what a conversation keeps of a packet until it is
 * cited (`Seen`, made into a `PacketRef` with the packet number or text line).
 */
import type { Family, Ip } from "../net/cidr.ts";
import {
  type AddressPort,
  type ConversationProtocol,
  formatTime,
  type PacketRef,
} from "./conversation.ts";
import type { Frame, Packet } from "./packet.ts";

/** A packet as its conversation sees it; the copy pairer keeps it with the packet. */
export interface FlowTag {
  readonly key: string;
  /** The packet's source is the conversation's `a` side (the lower key). */
  readonly xFirst: boolean;
  readonly protocol: ConversationProtocol;
  readonly s: AddressPort;
  readonly d: AddressPort;
}

function endpointKey(e: AddressPort): string {
  // IPv4 as a number: converting a bigint to text per packet is the costly part of a key.
  const ip = e.ip.family === 4 ? Number(e.ip.value) : e.ip.value;
  return `${ip}/${e.port ?? ""}`;
}

/** The key of the conversation between two ends (either order gives the same key). */
export function flowKey(
  protocol: string,
  family: Family,
  x: AddressPort,
  y: AddressPort,
  extra = "",
): {
  key: string;
  xFirst: boolean;
} {
  const kx = endpointKey(x);
  const ky = endpointKey(y);
  const xFirst = kx <= ky;
  return { key: `${protocol}|${family}|${xFirst ? kx : ky}|${xFirst ? ky : kx}|${extra}`, xFirst };
}

/**
 * A frame's conversation: TCP/UDP by address and port, ICMP echoes by address and identifier,
 * ESP by address and SPI, anything else by address and protocol.
 */
export function flowTagOf(f: Frame, src: Ip, dst: Ip): FlowTag {
  const t = f.transport;
  let protocol: ConversationProtocol;
  let sp: number | undefined;
  let dp: number | undefined;
  let extra = "";
  if (t?.kind === "tcp" || t?.kind === "udp") {
    protocol = t.kind;
    sp = t.srcPort;
    dp = t.dstPort;
  } else if (t?.kind === "icmp") {
    protocol = "icmp";
    if (t.id !== undefined) extra = `id${t.id}`;
  } else if (t?.kind === "esp") {
    protocol = "esp";
    extra = `spi${t.spi}`;
  } else protocol = "other";
  const s: AddressPort = sp === undefined ? { ip: src } : { ip: src, port: sp };
  const d: AddressPort = dp === undefined ? { ip: dst } : { ip: dst, port: dp };
  const { key, xFirst } = flowKey(protocol, src.family, s, d, extra);
  return { key, xFirst, protocol, s, d };
}

/** What a conversation keeps of a packet; made into evidence only when summarizing. */
export interface Seen {
  readonly index: number;
  readonly line: number | undefined;
  readonly timeNs: bigint;
  readonly timeOfDayOnly: boolean;
  readonly iface: string | undefined;
  readonly direction: string | undefined;
}

export function seenOf(p: Packet): Seen {
  return {
    index: p.index,
    line: p.line,
    timeNs: p.timeNs,
    timeOfDayOnly: p.timeOfDayOnly === true,
    iface: p.iface,
    direction: p.direction,
  };
}

/** Evidence for a packet: `packet 7 at …` (capture file) or `line 12 (packet 5) at …` (text). */
export function refOf(p: Seen, file: string): PacketRef {
  const when = formatTime(p.timeNs, p.timeOfDayOnly === true);
  const where = p.line !== undefined ? `line ${p.line} (packet ${p.index})` : `packet ${p.index}`;
  return {
    ref: { file, line: p.line ?? p.index, text: `${where} at ${when}` },
    index: p.index,
    ...(p.line === undefined ? {} : { line: p.line }),
    timeNs: p.timeNs,
    timeOfDayOnly: p.timeOfDayOnly,
    ...(p.iface === undefined ? {} : { iface: p.iface }),
    ...(p.direction === undefined ? {} : { direction: p.direction }),
  };
}
