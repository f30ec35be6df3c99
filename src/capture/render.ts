/**
 * @module capture/render — packets and conversations as text lines, JSON objects and document
 * blocks (report/document) for `podpath capture read|flows`. Pure: data in, strings and plain
 * objects out (bigint as string).
 */
import { formatIp, type Ip } from "../net/cidr.ts";
import {
  type Block,
  code,
  type Document,
  list,
  paragraph,
  section,
  table,
} from "../report/document.ts";
import type { AddressPort, Conversation, PacketRef } from "./conversations.ts";
import { formatTime } from "./conversations.ts";
import {
  type Frame,
  formatTcpFlags,
  IP_PROTOCOL_NAMES,
  type NamedIpHeader,
  type Packet,
} from "./packet.ts";

function ip(family: 4 | 6, value: bigint): string {
  return formatIp({ family, value });
}

function hostPort(family: 4 | 6, value: bigint, port: number | undefined): string {
  const a = ip(family, value);
  if (port === undefined) return a;
  return family === 6 ? `[${a}]:${port}` : `${a}:${port}`;
}

/** One end of a packet tcpdump printed with names: the name (or address) and port or service. */
function namedEnd(
  h: NamedIpHeader,
  side: "src" | "dst",
  port: number | undefined,
  service: string | undefined,
): string {
  const name = side === "src" ? h.srcName : h.dstName;
  const value = side === "src" ? h.src : h.dst;
  const p = service ?? port;
  if (name === undefined) {
    if (value === undefined) return "?";
    return typeof p === "string"
      ? `${hostPort(h.family, value, undefined)}:${p}`
      : hostPort(h.family, value, p);
  }
  return p === undefined ? name : `${name}:${p}`;
}

const ICMP4_NAMES: Readonly<Record<number, string>> = {
  0: "echo-reply",
  3: "unreachable",
  4: "source-quench",
  5: "redirect",
  8: "echo-request",
  11: "time-exceeded",
  12: "parameter-problem",
};
const ICMP6_NAMES: Readonly<Record<number, string>> = {
  1: "unreachable",
  2: "packet-too-big",
  3: "time-exceeded",
  4: "parameter-problem",
  128: "echo-request",
  129: "echo-reply",
  130: "mld-query",
  131: "mld-report",
  132: "mld-done",
  133: "router-solicitation",
  134: "router-advertisement",
  135: "neighbor-solicitation",
  136: "neighbor-advertisement",
  137: "redirect",
  143: "mld-report-v2",
};

/** One frame as `src > dst proto details`. */
export function describeFrame(f: Frame): string {
  if (f.arp !== undefined) {
    const sender = f.arp.senderIp === undefined ? (f.arp.senderName ?? "?") : ip(4, f.arp.senderIp);
    if (f.arp.op === 2) return `arp reply ${sender} is-at`;
    const target = f.arp.targetIp === undefined ? (f.arp.targetName ?? "?") : ip(4, f.arp.targetIp);
    return f.arp.op === 1 ? `arp who-has ${target} tell ${sender}` : `arp op ${f.arp.op}`;
  }
  const h = f.ip ?? f.named;
  if (h === undefined) return "(not IP)";
  const t = f.transport;
  const ports = t?.kind === "tcp" || t?.kind === "udp" ? [t.srcPort, t.dstPort] : [];
  const services = t?.kind === "tcp" || t?.kind === "udp" ? [t.srcService, t.dstService] : [];
  let s =
    f.ip !== undefined
      ? `${hostPort(f.ip.family, f.ip.src, ports[0])} > ${hostPort(f.ip.family, f.ip.dst, ports[1])} `
      : `${namedEnd(f.named!, "src", ports[0], services[0])} > ${namedEnd(f.named!, "dst", ports[1], services[1])} `;
  if (t === undefined) s += IP_PROTOCOL_NAMES[h.protocol] ?? `proto-${h.protocol}`;
  else if (t.kind === "tcp")
    s += `tcp [${t.flags === undefined ? "?" : formatTcpFlags(t.flags)}]${t.payloadLength === undefined ? "" : ` len ${t.payloadLength}`}`;
  else if (t.kind === "udp")
    s += `udp${t.payloadLength === undefined ? "" : ` len ${t.payloadLength}`}`;
  else if (t.kind === "icmp") {
    const names = t.version === 4 ? ICMP4_NAMES : ICMP6_NAMES;
    s += `${t.version === 4 ? "icmp" : "icmp6"} ${names[t.type] ?? `type-${t.type}`}`;
    if (t.code !== undefined && t.code !== 0) s += ` code ${t.code}`;
    if (t.id !== undefined) s += ` id ${t.id} seq ${t.seq ?? "?"}`;
    if (t.quoted !== undefined) {
      const q = t.quoted;
      s += ` about ${hostPort(q.ip.family, q.ip.src, q.srcPort)} > ${hostPort(q.ip.family, q.ip.dst, q.dstPort)}`;
    } else if (t.quotedNamed !== undefined) {
      const q = t.quotedNamed;
      s += ` about ${namedEnd(q.ip, "src", q.srcPort, q.srcService)} > ${namedEnd(q.ip, "dst", q.dstPort, q.dstService)}`;
    }
  } else if (t.kind === "esp") s += `esp spi 0x${t.spi.toString(16)} seq ${t.seq}`;
  else s += IP_PROTOCOL_NAMES[t.protocol] ?? `proto-${t.protocol}`;
  if (f.tunnel !== undefined)
    s += ` | ${f.tunnel.kind} vni ${f.tunnel.vni}: ${describeFrame(f.tunnel.inner)}`;
  return s;
}

/** `capture read` text: index, time, interface and direction, the frame, length, origin. */
export function packetLine(p: Packet): string {
  const where = [p.iface, p.direction].filter((x) => x !== undefined).join(" ");
  const len = p.length === undefined ? "" : `  length ${p.length}`;
  return `${String(p.index).padStart(5)}  ${formatTime(p.timeNs, p.timeOfDayOnly === true)}  ${where === "" ? "" : `${where}  `}${describeFrame(p)}${len}`;
}

function frameJson(f: Frame): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  if (f.ether !== undefined) {
    o["ether"] = {
      src: f.ether.src,
      dst: f.ether.dst,
      ethertype: f.ether.ethertype,
      vlans: f.ether.vlans,
    };
  }
  if (f.arp !== undefined) {
    o["arp"] = {
      op: f.arp.op,
      ...(f.arp.senderIp === undefined ? {} : { senderIp: ip(4, f.arp.senderIp) }),
      ...(f.arp.senderName === undefined ? {} : { senderName: f.arp.senderName }),
      ...(f.arp.targetIp === undefined ? {} : { targetIp: ip(4, f.arp.targetIp) }),
      ...(f.arp.targetName === undefined ? {} : { targetName: f.arp.targetName }),
    };
  }
  const h = f.ip ?? f.named;
  if (h !== undefined) {
    // A named packet (tcpdump text without -n) has srcName/dstName where it has no address.
    const src = f.ip?.src ?? f.named?.src;
    const dst = f.ip?.dst ?? f.named?.dst;
    if (src !== undefined) o["src"] = ip(h.family, src);
    if (f.named?.srcName !== undefined) o["srcName"] = f.named.srcName;
    if (dst !== undefined) o["dst"] = ip(h.family, dst);
    if (f.named?.dstName !== undefined) o["dstName"] = f.named.dstName;
    o["protocol"] = IP_PROTOCOL_NAMES[h.protocol] ?? h.protocol;
    if (h.ttl !== undefined) o["ttl"] = h.ttl;
    if (h.id !== undefined) o["ipId"] = h.id;
  }
  const t = f.transport;
  if (t?.kind === "tcp" || t?.kind === "udp") {
    // A service name podpath does not know leaves the port unknown: the name is given instead.
    if (t.srcService === undefined) o["srcPort"] = t.srcPort;
    else o["srcService"] = t.srcService;
    if (t.dstService === undefined) o["dstPort"] = t.dstPort;
    else o["dstService"] = t.dstService;
  }
  if (t?.kind === "tcp") {
    if (t.flags !== undefined) o["tcpFlags"] = formatTcpFlags(t.flags);
    if (t.seq !== undefined) o["seq"] = t.seq;
  }
  if (t?.kind === "icmp") {
    o["icmpType"] = t.type;
    if (t.code !== undefined) o["icmpCode"] = t.code;
    if (t.quoted !== undefined) {
      o["quoted"] = {
        src: ip(t.quoted.ip.family, t.quoted.ip.src),
        dst: ip(t.quoted.ip.family, t.quoted.ip.dst),
        ...(t.quoted.srcPort === undefined ? {} : { srcPort: t.quoted.srcPort }),
        ...(t.quoted.dstPort === undefined ? {} : { dstPort: t.quoted.dstPort }),
      };
    }
  }
  if (t?.kind === "esp") o["esp"] = { spi: t.spi, seq: t.seq };
  if (f.tunnel !== undefined) {
    o["encapsulation"] = {
      kind: f.tunnel.kind,
      vni: f.tunnel.vni,
      inner: frameJson(f.tunnel.inner),
    };
  }
  return o;
}

/** `capture read -o jsonl`: one object per packet, keys in a stable order. */
export function packetJson(p: Packet): Record<string, unknown> {
  return {
    index: p.index,
    time: formatTime(p.timeNs, p.timeOfDayOnly === true),
    timeNs: p.timeNs.toString(),
    ...(p.iface === undefined ? {} : { interface: p.iface }),
    ...(p.direction === undefined ? {} : { direction: p.direction }),
    ...(p.length === undefined ? {} : { length: p.length }),
    ...(p.capturedLength === undefined ? {} : { capturedLength: p.capturedLength }),
    ...(p.offset === undefined ? {} : { offset: p.offset }),
    ...(p.line === undefined ? {} : { line: p.line }),
    ...frameJson(p),
  };
}

function endpoint(e: AddressPort): string {
  return hostPort(e.ip.family, e.ip.value, e.port);
}

function refText(r: PacketRef): string {
  return r.ref.text ?? `packet ${r.index}`;
}

/** `capture flows` text: one conversation per block. */
export function conversationLines(c: Conversation): string[] {
  const lines = [
    `${c.protocol} ${endpoint(c.initiator)} → ${endpoint(c.responder)}${c.tunnel ? `  (inside ${c.tunnel.kind} vni ${c.tunnel.vni})` : ""}`,
    `    ${c.verdict}`,
    `    sent ${c.packetsFromInitiator}, back ${c.packetsFromResponder}; first ${refText(c.first)}${c.firstReply ? `; first reply ${refText(c.firstReply)}` : ""}`,
  ];
  if (c.seenOn.length > 0) lines.push(`    seen on ${c.seenOn.join(", ")}`);
  if (c.initiatorBasis === "first-packet")
    lines.push("    who spoke first: the first packet captured (no SYN or echo request seen)");
  return lines;
}

export function conversationJson(c: Conversation): Record<string, unknown> {
  const ref = (r: PacketRef) => ({
    file: r.ref.file,
    line: r.ref.line,
    packet: r.index,
    time: formatTime(r.timeNs, r.timeOfDayOnly),
  });
  return {
    protocol: c.protocol,
    initiator: {
      ip: formatIp(c.initiator.ip),
      ...(c.initiator.port === undefined ? {} : { port: c.initiator.port }),
    },
    responder: {
      ip: formatIp(c.responder.ip),
      ...(c.responder.port === undefined ? {} : { port: c.responder.port }),
    },
    sourceOnWire: formatIp(c.initiator.ip),
    initiatorBasis: c.initiatorBasis,
    packetsFromInitiator: c.packetsFromInitiator,
    packetsFromResponder: c.packetsFromResponder,
    replied: c.replied,
    ...(c.tcp === undefined ? {} : { tcp: c.tcp }),
    icmpErrors: c.icmpErrors.map((e) => ({
      from: formatIp(e.from),
      type: e.type,
      ...(e.code === undefined ? {} : { code: e.code }),
      what: e.what,
      at: ref(e.at),
    })),
    first: ref(c.first),
    ...(c.firstReply === undefined ? {} : { firstReply: ref(c.firstReply) }),
    seenOn: c.seenOn,
    ...(c.tunnel === undefined ? {} : { tunnel: c.tunnel }),
    verdict: c.verdict,
  };
}

export function formatAddress(i: Ip): string {
  return formatIp(i);
}

/** `capture read -o md|html`: the packets as a table, one row per packet. */
export function packetsDocument(
  file: string,
  packets: readonly Packet[],
  format: string | undefined,
): Document {
  return {
    question: "capture read",
    title: `podpath capture read ${file}`,
    blocks: [
      paragraph(`${packets.length} packets${format === undefined ? "" : ` (${format})`}`),
      table(
        ["#", "time", "where", "packet", "length"],
        packets.map((p) => [
          String(p.index),
          formatTime(p.timeNs, p.timeOfDayOnly === true),
          [p.iface, p.direction].filter((x) => x !== undefined).join(" "),
          code(describeFrame(p)),
          p.length === undefined ? "" : String(p.length),
        ]),
      ),
    ],
  };
}

/** One conversation: its first line as the title, the rest under it. */
export function conversationBlock(c: Conversation): Block {
  const [head, ...rest] = conversationLines(c);
  return section(head!, [
    list(
      rest.map((l) => l.trim()),
      false,
    ),
  ]);
}
