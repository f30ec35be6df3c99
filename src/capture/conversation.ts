/**
 * @module capture/conversation — what podpath says about one conversation: the summary types
 * (who spoke first, replies, TCP progress, ICMP errors, evidence), its one-line verdict, and
 * capture times as text. Built by capture/conversations.ts.
 */
import type { SourceRef } from "../model/types.ts";
import { type Family, formatIp, type Ip } from "../net/cidr.ts";
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

export interface Endpoint {
  readonly ip: Ip;
  readonly port?: number;
}

/** Where in the capture a packet is, for evidence and for people. */
export interface PacketRef {
  readonly ref: SourceRef;
  readonly index: number;
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
  readonly initiator: Endpoint;
  readonly responder: Endpoint;
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
  return parts.join("; ");
}
