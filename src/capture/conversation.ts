/**
 * @module capture/conversation — what podpath says about one conversation: the summary types
 * (who spoke first, replies, TCP progress, ICMP errors, evidence), its one-line verdict, and
 * capture times as text. Built by capture/conversations.ts.
 */
import type { SourceRef } from "../model/types.ts";
import { type Family, formatIp, type Ip } from "../net/cidr.ts";
import { type CopyBasis, describeBasis, describeRewrite, type Rewrite } from "./packet-copies.ts";
export type ConversationProtocol = "tcp" | "udp" | "icmp" | "esp" | "other";

/** How far a TCP conversation got, in order. */
export const TCP_PROGRESS = [
  "mid-stream",
  "syn-only",
  "syn-ack",
  "established",
  "data-one-way",
  "data-both-ways",
] as const;
export type TcpProgress = (typeof TCP_PROGRESS)[number];

export interface AddressPort {
  readonly ip: Ip;
  readonly port?: number;
}

/** Where in the capture a packet is, for evidence and for people. */
export interface PacketRef {
  readonly ref: SourceRef;
  readonly index: number;
  /** The text line where the packet starts (tcpdump text only). */
  readonly line?: number;
  readonly timeNs: bigint;
  readonly timeOfDayOnly: boolean;
  readonly iface?: string;
  readonly direction?: string;
}

export interface IcmpErrorSeen {
  /** Who sent the error (a router, or the destination itself). */
  readonly from: Ip;
  readonly type: number;
  readonly code?: number;
  readonly what: string;
  readonly at: PacketRef;
}

/** The first copy of a packet and a later copy of it (the same packet on another interface). */
export interface CopyRefs {
  readonly first: PacketRef;
  readonly again: PacketRef;
}

/**
 * The same packets seen more than once in this conversation, not rewritten (a capture on every
 * interface sees a forwarded packet on each one it crosses): counted once.
 */
export interface CopiesSeen {
  /** The first pair: the packet as it arrived and as it was seen again. */
  readonly pair: CopyRefs;
  /** How many later copies were paired. */
  readonly count: number;
  readonly basis: CopyBasis;
  /** The IPv4 identification of the first pair, when the capture shows it. */
  readonly ipId?: number;
}

/** The other conversation of a translated pair, as the node handed it on (or received it). */
export interface TranslatedPeer {
  readonly initiator: AddressPort;
  readonly responder: AddressPort;
  readonly replied: boolean;
  readonly firstReply?: PacketRef;
  readonly packetsFromResponder: number;
}

/**
 * This conversation and another one are the same packets on both sides of a node's NAT: the
 * copies pair (same IP identification, sequence, lengths, microseconds apart) and an address
 * differs. `before` is the side where the request arrived (the pod's veth), `after` the side it
 * left on (eth0) — where the replies come back first.
 */
export interface Translation {
  readonly side: "before" | "after";
  readonly peer: TranslatedPeer;
  /** Source rewritten (SNAT, MASQUERADE): request orientation, from the before side to the after side. */
  readonly source?: Rewrite;
  /** Destination rewritten (DNAT: Service VIP to endpoint, NodePort to pod). */
  readonly destination?: Rewrite;
  readonly echoId?: { readonly from: number; readonly to: number };
  /** The first request seen on both sides: `first` as it arrived, `again` as it left. */
  readonly request?: CopyRefs;
  /** The first reply seen on both sides: `first` as it came back (after side), `again` delivered. */
  readonly reply?: CopyRefs;
  /** How many packets were paired across the translation. */
  readonly pairs: number;
  readonly basis: CopyBasis;
  /** The IPv4 identification of the first pair, when the capture shows it. */
  readonly ipId?: number;
}

export interface TcpSummary {
  readonly progress: TcpProgress;
  readonly synCount: number;
  readonly synAckCount: number;
  readonly retransmissions: number;
  readonly finFrom: readonly ("initiator" | "responder")[];
  readonly rstFrom: readonly ("initiator" | "responder")[];
}

export interface Conversation {
  readonly protocol: ConversationProtocol;
  readonly family: Family;
  /** Who spoke first: the source of the request (the SYN, the echo request, the first packet). */
  readonly initiator: AddressPort;
  readonly responder: AddressPort;
  /** What decided who spoke first. */
  readonly initiatorBasis: "syn" | "syn-ack" | "echo" | "first-packet";
  readonly packetsFromInitiator: number;
  readonly packetsFromResponder: number;
  readonly replied: boolean;
  readonly tcp?: TcpSummary;
  readonly icmpErrors: readonly IcmpErrorSeen[];
  readonly first: PacketRef;
  readonly last: PacketRef;
  readonly firstReply?: PacketRef;
  /** The initiator's first packet recorded as outgoing (LINUX_SLL2, pcapng flags, `-i any` text). */
  readonly firstLeaving?: PacketRef;
  /** Interfaces and directions the initiator's packets were seen with (`eth0 out`). */
  readonly seenOn: readonly string[];
  readonly tunnel?: { readonly kind: string; readonly vni: number };
  /** Copies of this conversation's packets seen again unchanged (another interface). */
  readonly copies?: CopiesSeen;
  /** The same packets on the other side of a NAT, as another conversation. */
  readonly translation?: Translation;
  /** One line: what happened. */
  readonly verdict: string;
}

export interface ConversationOptions {
  /** File name for evidence. */
  readonly file: string;
  /** Only conversations with this address at either end. */
  readonly host?: Ip;
}

export interface ConversationSummary {
  readonly conversations: Conversation[];
  readonly packets: number;
  /** What was assumed because the input does not say (capture point, time zone...). */
  readonly assumptions: string[];
}

/** ISO time with the capture's precision kept to nanoseconds; `HH:MM:SS.fff…` without a date. */
export function formatTime(ns: bigint, timeOfDayOnly = false): string {
  const sec = ns / 1_000_000_000n;
  const frac = (ns % 1_000_000_000n).toString().padStart(9, "0");
  if (timeOfDayOnly) {
    const s = Number(sec % 86400n);
    const hh = String(Math.floor(s / 3600)).padStart(2, "0");
    const mm = String(Math.floor((s % 3600) / 60)).padStart(2, "0");
    const ss = String(s % 60).padStart(2, "0");
    return `${hh}:${mm}:${ss}.${frac}`;
  }
  const iso = new Date(Number(sec) * 1000).toISOString().slice(0, 19);
  return `${iso}.${frac}Z`;
}

const ICMP_WHAT: Readonly<Record<string, string>> = {
  "4:3:0": "net unreachable",
  "4:3:1": "host unreachable",
  "4:3:2": "protocol unreachable",
  "4:3:3": "port unreachable",
  "4:3:4": "fragmentation needed",
  "4:3:13": "administratively prohibited",
  "4:11:0": "TTL exceeded in transit",
  "4:11:1": "fragment reassembly time exceeded",
  "6:1:0": "no route to destination",
  "6:1:1": "administratively prohibited",
  "6:1:3": "address unreachable",
  "6:1:4": "port unreachable",
  "6:2:0": "packet too big",
  "6:3:0": "hop limit exceeded in transit",
};

export function describeIcmpError(version: 4 | 6, type: number, code: number | undefined): string {
  const exact = ICMP_WHAT[`${version}:${type}:${code ?? 0}`];
  if (exact !== undefined && code !== undefined) return exact;
  if (version === 4)
    return type === 3
      ? "destination unreachable"
      : type === 11
        ? "time exceeded"
        : `ICMP type ${type}`;
  return type === 1
    ? "destination unreachable"
    : type === 3
      ? "time exceeded"
      : `ICMPv6 type ${type}`;
}

export function verdictOf(c: Omit<Conversation, "verdict">): string {
  const parts: string[] = [];
  if (c.tcp !== undefined) {
    const t = c.tcp;
    const text: Record<TcpProgress, string> = {
      "mid-stream": "joined mid-stream",
      "syn-only": `SYN only (${t.synCount} sent), no SYN-ACK`,
      "syn-ack": "SYN-ACK came back, handshake not completed",
      established: "handshake completed, no data",
      "data-one-way": "data in one direction only",
      "data-both-ways": "data in both directions",
    };
    parts.push(text[t.progress]);
    if (t.retransmissions > 0)
      parts.push(`${t.retransmissions} retransmission${t.retransmissions === 1 ? "" : "s"}`);
    if (t.finFrom.length > 0) parts.push(`FIN from ${t.finFrom.join(" and ")}`);
    if (t.rstFrom.length > 0) parts.push(`RST from ${t.rstFrom.join(" and ")}`);
  } else {
    parts.push(c.replied ? `replied (${c.packetsFromResponder} packets back)` : "no reply");
  }
  if (c.tcp !== undefined && !c.replied) parts.push("no reply");
  for (const e of c.icmpErrors) parts.push(`ICMP ${e.what} from ${formatIp(e.from)}`);
  if (c.translation !== undefined) parts.push(describeTranslation(c.translation));
  return parts.join("; ");
}

/** `packets 3 and 4` for a capture file, `lines 7 and 9` for tcpdump text. */
export function packetPair(a: PacketRef, b: PacketRef): string {
  if (a.line !== undefined && b.line !== undefined) return `lines ${a.line} and ${b.line}`;
  return `packets ${a.index} and ${b.index}`;
}

/**
 * What the node did, as one phrase: `leaves the node rewritten: source 10.4.0.5 → 10.128.0.2
 * (packets 3 and 4)` on the side it arrived, `rewritten by the node: …` on the side it left.
 */
export function describeTranslation(t: Translation): string {
  const parts: string[] = [];
  if (t.source) parts.push(`source ${describeRewrite(t.source)}`);
  if (t.destination) parts.push(`destination ${describeRewrite(t.destination)}`);
  if (t.echoId) parts.push(`echo id ${t.echoId.from} → ${t.echoId.to}`);
  const pair = t.request ?? t.reply;
  const where = pair === undefined ? "" : ` (${packetPair(pair.first, pair.again)})`;
  const by = t.basis === "id" ? `, ${describeBasis(t.basis, t.ipId)}` : "";
  const what = parts.join(", ");
  return `${t.side === "before" ? "leaves the node rewritten" : "rewritten by the node"}: ${what}${where}${by}`;
}
