/**
 * @module capture/tcpdump-frame — one packet as tcpdump prints it, from the link header on:
 * `-e` headers (Ethernet with VLAN tags, LINUX_SLL and SLL2, NFLOG; MACs as numbers or, without
 * `-n`, with their `(oui …)` or as `Broadcast`), `IP`/`IP6` with the `-v` header group (TTL, ID,
 * length), the two ends (addresses and ports, or host and service names without `-n`), and the
 * protocol text (TCP flags and numbers, UDP, ICMP/ICMPv6 with the packet an error quotes, ESP,
 * ARP), with tunnels' inner frames on the following lines.
 * Used by capture/tcpdump-text.ts, which groups lines into packets.
 */
import type { Family } from "../net/cidr.ts";
import type { ArpMessage, Frame, IpHeader, NamedIpHeader, Transport, Tunnel } from "./packet.ts";
import { parseTcpFlags } from "./packet.ts";
import { isNamed, type PrintedEnd, readEnd } from "./tcpdump-endpoint.ts";
import { type Cursor, parseIcmp } from "./tcpdump-icmp.ts";

export type { Cursor } from "./tcpdump-icmp.ts";

export const MAC = "[0-9a-f]{2}(?::[0-9a-f]{2}){5}";
/** A printed MAC: the number (with `(oui …)` without -n), `Broadcast`, or an /etc/ethers name. */
const LINK_ADDR = "\\S+(?: \\(oui [^)]*\\))?";
const ETHER_HEADER = new RegExp(
  `^(?:(?:In|Out|B|M|P) +)?(?:${LINK_ADDR} > ${LINK_ADDR},? |(?:ifindex \\d+ )?(?:${LINK_ADDR} )?)(?:ethertype (\\S+) \\(0x([0-9a-f]{4})\\)|802\\.3), length (\\d+): `,
);
const VLAN = /^vlan (\d+), p \d+,(?: (?:ethertype (\S+) \(0x([0-9a-f]{4})\),)?)? ?/;
const NFLOG_HEADER = /^version \d+, resource ID \d+, family (\S+) \(\d+\), length (\d+): /;
/** PPP `-e`: the protocol by name and number (`IP (0x0021), length 244: `). */
const PPP_HEADER = /^(IP|IPv6|IP6) \(0x[0-9a-f]{4}\), length (\d+): /;
export const ENCAP_MARKERS =
  /(?:VXLAN, flags \[[^\]]*\] \(0x[0-9a-f]+\), vni (\d+)|OTV, flags \[[^\]]*\] \(0x[0-9a-f]+\), overlay \d+, instance (\d+)|Geneve, Flags \[[^\]]*\], vni 0x([0-9a-f]+))/;

const ETHERTYPE_FAMILY: Readonly<Record<string, Family>> = { IPv4: 4, IPv6: 6 };

/** Parses a frame printed from `text` on, taking continuation lines from `ctx` as needed. */
export function parseFrame(
  text: string,
  ctx: Cursor,
  depth: number,
): { frame: Frame; length?: number } {
  let rest = text;
  let family: Family | undefined;
  let length: number | undefined;
  let isArp = false;
  // -e link headers (the cheap test first: most lines have none)
  const eh = rest.includes("ethertype ") || rest.includes("802.3") ? ETHER_HEADER.exec(rest) : null;
  if (eh) {
    length = Number(eh[3]);
    rest = rest.slice(eh[0].length);
    if (eh[1] !== undefined) family = ETHERTYPE_FAMILY[eh[1]];
    isArp = eh[1] === "ARP";
    for (let i = 0; i < 8; i++) {
      const v = VLAN.exec(rest);
      if (!v) break;
      rest = rest.slice(v[0].length);
      if (v[2] !== undefined) {
        family = ETHERTYPE_FAMILY[v[2]];
        isArp = v[2] === "ARP";
      }
    }
  } else if (rest.startsWith("version ")) {
    const nf = NFLOG_HEADER.exec(rest);
    if (nf) {
      length = Number(nf[2]);
      family = nf[1] === "IPv6" ? 6 : 4;
      rest = rest.slice(nf[0].length);
    }
  } else if (rest.startsWith("ip: ")) {
    // LINKTYPE_RAW with -e: the IP version is the addresses'.
    rest = rest.slice(4);
  } else if (rest.startsWith("IP") && rest.includes(" (0x")) {
    const ppp = PPP_HEADER.exec(rest);
    if (ppp) {
      length = Number(ppp[2]);
      family = ppp[1] === "IP" ? 4 : 6;
      rest = rest.slice(ppp[0].length);
    }
  }
  if (rest.startsWith("ARP, ") || isArp) {
    return {
      frame: { arp: parseArp(rest.replace(/^ARP, /, "")) },
      ...(length === undefined ? {} : { length }),
    };
  }
  if (rest.startsWith("IP6 ")) {
    family = 6;
    rest = rest.slice(4);
  } else if (rest.startsWith("IP ")) {
    family = 4;
    rest = rest.slice(3);
  }
  let headerInfo: HeaderInfo = {};
  if (rest.startsWith("(")) {
    const close = matchParen(rest);
    if (close < 0) return { frame: {} };
    headerInfo = parseHeaderInfo(rest.slice(1, close));
    rest = rest.slice(close + 1).trimStart();
    if (rest === "" && ctx.at < ctx.lines.length) rest = ctx.lines[ctx.at++]!.trimStart();
  }
  const frame = parseAddressed(rest, family, headerInfo, ctx, depth);
  return { frame, ...(length === undefined ? {} : { length }) };
}

function matchParen(s: string): number {
  let depth = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "(") depth++;
    else if (s[i] === ")" && --depth === 0) return i;
  }
  return -1;
}

const IPV6_EXTENSION_HEADERS = new Set([0, 43, 44, 51, 60, 135]);
/** IP protocols whose tcpdump text puts a port after each address. */
const PORTED_PROTOCOLS = new Set([6, 17, 33, 132, 136]);

interface HeaderInfo {
  ttl?: number;
  id?: number;
  protocol?: number;
  length?: number;
  fragmentOffset?: number;
}

/** The `-v` IP header group: `tos 0x0, ttl 64, id 1, offset 0, flags [DF], proto TCP (6), length 60`. */
function parseHeaderInfo(s: string): HeaderInfo {
  const h: HeaderInfo = {};
  const ttl = /\b(?:ttl|hlim) (\d+)/.exec(s);
  if (ttl) h.ttl = Number(ttl[1]);
  const id = /\bid (\d+)/.exec(s);
  if (id) h.id = Number(id[1]);
  const proto = /\b(?:proto|next-header) \S+ \((\d+)\)/.exec(s);
  // IPv6's next-header may name an extension header; the transport text decides then.
  if (proto && !IPV6_EXTENSION_HEADERS.has(Number(proto[1]))) h.protocol = Number(proto[1]);
  const plen = /payload length:? (\d+)/.exec(s);
  if (plen) h.length = Number(plen[1]) + 40;
  else {
    const len = /(?:^|, )length (\d+)/.exec(s);
    if (len) h.length = Number(len[1]);
  }
  const off = /\boffset (\d+)/.exec(s);
  if (off) h.fragmentOffset = Number(off[1]);
  return h;
}

/**
 * Drops what may stand before the protocol text: IPv6 extension headers (`HBH (rtalert: 0x0000)
 * (padn) `, `frag (0|1448) `) and checksum notes (`[icmp6 sum ok] `, 5.x `[no cksum] `).
 */
function protocolText(rest: string): string {
  let r = rest;
  for (let i = 0; i < 8; i++) {
    const next = r
      .replace(/^(?:HBH|DSTOPT|mobility|srcrt)(?: \([^)]*\))* /, "")
      .replace(/^frag \([^)]*\) /, "")
      .replace(/^\[(?:bad )?(?:udp |tcp |icmp6? )?(?:sum|cksum) [^\]]*\] /, "")
      .replace(/^\[no cksum\] /, "");
    if (next === r) break;
    r = next;
  }
  return r;
}

/** Whether the ends carry ports: from the `-v` protocol, else the protocol text; undefined: unsaid. */
function portsExpected(r: string, h: HeaderInfo): boolean | undefined {
  if (h.protocol !== undefined) return PORTED_PROTOCOLS.has(h.protocol);
  if (r.startsWith("Flags [") || /^(?:tcp \d|UDP, |udp \d)/.test(r)) return true;
  if (r.startsWith("ICMP")) return false;
  if (/^(?:ICMP6?[ ,]|ESP\(|AH\(|ip-proto-\d|GREv\d|VRRPv\d|igmp |OSPFv\d|PIMv\d|carp )/.test(r))
    return false;
  return undefined;
}

const ADDRESSES = /^(\S+) > (\S+?):(?: (.*)|$)/;

function parseAddressed(
  text: string,
  family: Family | undefined,
  h: HeaderInfo,
  ctx: Cursor,
  depth: number,
): Frame {
  const m = ADDRESSES.exec(text);
  if (!m) return {};
  const r = protocolText(m[3] ?? "");
  const hasPorts = portsExpected(r, h);
  let a = readEnd(m[1]!, hasPorts);
  let b = readEnd(m[2]!, hasPorts);
  if (a === undefined || b === undefined) return {};
  if (hasPorts === undefined && (a.port === undefined) !== (b.port === undefined)) {
    // Only one end reads as host.port: the protocol has none, the last labels are names.
    a = readEnd(m[1]!, false);
    b = readEnd(m[2]!, false);
    if (a === undefined || b === undefined) return {};
  }
  const fam = a.ip?.family ?? b.ip?.family ?? family;
  if (fam === undefined) return {};
  if ((a.ip !== undefined && a.ip.family !== fam) || (b.ip !== undefined && b.ip.family !== fam))
    return {};
  if (family !== undefined && fam !== family) return {};
  const later = h.fragmentOffset !== undefined && h.fragmentOffset > 0;
  const { transport, tunnel, protocol } = parseTransport(r, fam, a, b, h, ctx, depth);
  const named =
    isNamed(a) || isNamed(b) || (transport?.kind === "icmp" && transport.quotedNamed !== undefined);
  if (!named) {
    const ip: IpHeader = {
      family: fam,
      src: a.ip!.value,
      dst: b.ip!.value,
      protocol: h.protocol ?? protocol ?? 0,
      ...(h.ttl === undefined ? {} : { ttl: h.ttl }),
      ...(h.id === undefined ? {} : { id: h.id }),
      ...(h.length === undefined ? {} : { length: h.length }),
      ...(later ? { isLaterFragment: true } : {}),
    };
    if (transport === undefined) return { ip };
    return tunnel === undefined ? { ip, transport } : { ip, transport, tunnel };
  }
  const header: NamedIpHeader = {
    family: fam,
    ...(a.ip === undefined ? { srcName: a.name! } : { src: a.ip.value }),
    ...(b.ip === undefined ? { dstName: b.name! } : { dst: b.ip.value }),
    protocol: h.protocol ?? protocol ?? 0,
    ...(h.ttl === undefined ? {} : { ttl: h.ttl }),
    ...(h.id === undefined ? {} : { id: h.id }),
    ...(h.length === undefined ? {} : { length: h.length }),
    ...(later ? { isLaterFragment: true } : {}),
  };
  if (transport === undefined) return { named: header };
  return tunnel === undefined ? { named: header, transport } : { named: header, transport, tunnel };
}

function parseTransport(
  r: string,
  family: Family,
  a: PrintedEnd,
  b: PrintedEnd,
  h: HeaderInfo,
  ctx: Cursor,
  depth: number,
): { transport?: Transport; tunnel?: Tunnel; protocol?: number } {
  if (a.port !== undefined && b.port !== undefined) {
    const ports =
      a.service === undefined && b.service === undefined
        ? { srcPort: a.port, dstPort: b.port }
        : {
            srcPort: a.port,
            dstPort: b.port,
            ...(a.service === undefined ? {} : { srcService: a.service }),
            ...(b.service === undefined ? {} : { dstService: b.service }),
          };
    const flags = /^Flags \[([^\]]*)\]/.exec(r);
    if (flags || h.protocol === 6 || /^tcp \d+/.test(r)) {
      const bits = flags ? parseTcpFlags(flags[1]!) : undefined;
      const seq = /(?:^|, )seq (\d+)(?::\d+)?/.exec(r);
      const ack = /(?:^|, )\[?ack (\d+)/.exec(r);
      const len = /(?:, length |^tcp )(\d+)/.exec(r);
      return {
        protocol: 6,
        transport: {
          kind: "tcp",
          ...ports,
          ...(bits === undefined ? {} : { flags: bits }),
          ...(seq ? { seq: Number(seq[1]) } : {}),
          ...(ack && bits !== undefined && bits & 0x10 ? { ack: Number(ack[1]) } : {}),
          ...(len ? { payloadLength: Number(len[1]) } : {}),
        },
      };
    }
    if (h.protocol !== undefined && h.protocol !== 17) {
      return { protocol: h.protocol, transport: { kind: "other", protocol: h.protocol } };
    }
    const len = /^(?:UDP, length|udp) (\d+)/.exec(r);
    const transport: Transport = {
      kind: "udp",
      ...ports,
      ...(len ? { payloadLength: Number(len[1]) } : {}),
    };
    const enc = ENCAP_MARKERS.exec(r);
    if (enc && depth < 4) {
      const vni = enc[1] ?? enc[2];
      const kind = enc[3] !== undefined ? "geneve" : "vxlan";
      const vniNum = vni !== undefined ? Number(vni) : Number.parseInt(enc[3]!, 16);
      let inner: Frame = {};
      if (ctx.at < ctx.lines.length) {
        const next = ctx.lines[ctx.at++]!.trimStart();
        inner = parseFrame(next, ctx, depth + 1).frame;
      }
      return { protocol: 17, transport, tunnel: { kind, vni: vniNum, inner } };
    }
    return { protocol: 17, transport };
  }
  const esp = /^ESP\(spi=0x([0-9a-f]+),seq=0x([0-9a-f]+)\)/.exec(r);
  if (esp) {
    return {
      protocol: 50,
      transport: {
        kind: "esp",
        spi: Number.parseInt(esp[1]!, 16),
        seq: Number.parseInt(esp[2]!, 16),
      },
    };
  }
  if (r.startsWith("ICMP ") && family === 4)
    return parseIcmp(r.slice(5), 4, b, ctx, depth, nestedFrame);
  if (r.startsWith("ICMP6, ") && family === 6)
    return parseIcmp(r.slice(7), 6, b, ctx, depth, nestedFrame);
  if (h.protocol !== undefined)
    return { protocol: h.protocol, transport: { kind: "other", protocol: h.protocol } };
  const other = /^ip-proto-(\d+)/.exec(r);
  if (other)
    return { protocol: Number(other[1]), transport: { kind: "other", protocol: Number(other[1]) } };
  return {};
}

function nestedFrame(text: string, ctx: Cursor, depth: number): Frame {
  return parseFrame(text, ctx, depth).frame;
}

function parseArp(text: string): ArpMessage {
  // -v names the hardware and protocol address formats first.
  const r = text.replace(/^\S+ \(len \d+\), \S+ \(len \d+\), /, "");
  const req = /^Request who-has (\S+?)(?: \([^)]*(?:\([^)]*\))?\))? tell (\S+?),/.exec(r);
  if (req) return { op: 1, ...arpEnd("sender", req[2]!), ...arpEnd("target", req[1]!) };
  const rep = /^Reply (\S+) is-at/.exec(r);
  if (rep) return { op: 2, ...arpEnd("sender", rep[1]!) };
  return { op: 0 };
}

function arpEnd(role: "sender" | "target", text: string): Partial<ArpMessage> {
  const e = readEnd(text, false);
  if (e?.ip !== undefined)
    return role === "sender" ? { senderIp: e.ip.value } : { targetIp: e.ip.value };
  if (e?.name !== undefined)
    return role === "sender" ? { senderName: e.name } : { targetName: e.name };
  return {};
}
