/**
 * @module capture/tcpdump-frame — one packet as tcpdump prints it, from the link header on:
 * `-e` headers (Ethernet with VLAN tags, SLL, NFLOG), `IP`/`IP6` with the `-v` header group,
 * addresses and ports, and the protocol text (TCP flags and numbers, UDP, ICMP/ICMPv6 with the
 * packet an error quotes, ESP, ARP), with tunnels' inner frames on the following lines.
 * Used by capture/tcpdump-text.ts, which groups lines into packets.
 */
import { type Family, tryParseIp } from "../net/cidr.ts";
import type {
  ArpMessage,
  Frame,
  IcmpHeader,
  IpHeader,
  QuotedHeader,
  Transport,
  Tunnel,
} from "./packet.ts";
import { parseTcpFlags } from "./packet.ts";

export const MAC = "[0-9a-f]{2}(?::[0-9a-f]{2}){5}";
const ETHER_HEADER = new RegExp(
  `^(?:(?:In|Out|B|M|P) +)?(?:(${MAC}) > (${MAC})|(?:ifindex \\d+ )?(?:${MAC}|\\S*)) ?,? ?(?:ethertype (\\S+) \\(0x([0-9a-f]{4})\\)|802\\.3), length (\\d+): `,
);
const VLAN = /^vlan (\d+), p \d+,(?: (?:ethertype (\S+) \(0x([0-9a-f]{4})\),)?)? ?/;
const NFLOG_HEADER = /^version \d+, resource ID \d+, family (\S+) \(\d+\), length (\d+): /;
export const ENCAP_MARKERS =
  /(?:VXLAN, flags \[[^\]]*\] \(0x[0-9a-f]+\), vni (\d+)|OTV, flags \[[^\]]*\] \(0x[0-9a-f]+\), overlay \d+, instance (\d+)|Geneve, Flags \[[^\]]*\], vni 0x([0-9a-f]+))/;

export interface Cursor {
  readonly lines: readonly string[];
  at: number;
}

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
  // -e link headers
  const eh = ETHER_HEADER.exec(rest);
  if (eh) {
    length = Number(eh[5]);
    rest = rest.slice(eh[0].length);
    if (eh[3] !== undefined) family = ETHERTYPE_FAMILY[eh[3]];
    isArp = eh[3] === "ARP";
    for (let i = 0; i < 8; i++) {
      const v = VLAN.exec(rest);
      if (!v) break;
      rest = rest.slice(v[0].length);
      if (v[2] !== undefined) {
        family = ETHERTYPE_FAMILY[v[2]];
        isArp = v[2] === "ARP";
      }
    }
  } else {
    const nf = NFLOG_HEADER.exec(rest);
    if (nf) {
      length = Number(nf[2]);
      family = nf[1] === "IPv6" ? 6 : 4;
      rest = rest.slice(nf[0].length);
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

interface HeaderInfo {
  ttl?: number;
  protocol?: number;
  length?: number;
  fragmentOffset?: number;
}

/** The `-v` IP header group: `tos 0x0, ttl 64, id 1, offset 0, flags [DF], proto TCP (6), length 60`. */
function parseHeaderInfo(s: string): HeaderInfo {
  const h: HeaderInfo = {};
  const ttl = /\b(?:ttl|hlim) (\d+)/.exec(s);
  if (ttl) h.ttl = Number(ttl[1]);
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

/** `a.b.c.d[.port]` or `x::y[.port]` → address (and port). Names (no -n) do not parse. */
function parseEndpoint(s: string): { ip: ReturnType<typeof tryParseIp>; port?: number } {
  const whole = tryParseIp(s);
  if (whole) return { ip: whole };
  const dot = s.lastIndexOf(".");
  if (dot < 0) return { ip: undefined };
  const ip = tryParseIp(s.slice(0, dot));
  const portText = s.slice(dot + 1);
  if (ip === undefined || !/^\d{1,5}$/.test(portText)) return { ip: undefined };
  return { ip, port: Number(portText) };
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
  const a = parseEndpoint(m[1]!);
  const b = parseEndpoint(m[2]!);
  if (a.ip === undefined || b.ip === undefined || a.ip.family !== b.ip.family) return {};
  if (family !== undefined && a.ip.family !== family) return {};
  const rest = m[3] ?? "";
  const fam = a.ip.family;
  const later = h.fragmentOffset !== undefined && h.fragmentOffset > 0;
  const parsed = parseTransport(rest, fam, a.port, b.port, h, ctx, depth);
  const { tunnel, protocol } = parsed;
  let transport = parsed.transport;
  // An error's one-line form omits the original source: it is the error's own destination.
  if (
    transport?.kind === "icmp" &&
    transport.quoted !== undefined &&
    transport.quoted.ip.src === 0n
  )
    transport = {
      ...transport,
      quoted: { ...transport.quoted, ip: { ...transport.quoted.ip, src: b.ip.value } },
    };
  const ip: IpHeader = {
    family: fam,
    src: a.ip.value,
    dst: b.ip.value,
    protocol: h.protocol ?? protocol ?? 0,
    ...(h.ttl === undefined ? {} : { ttl: h.ttl }),
    ...(h.length === undefined ? {} : { length: h.length }),
    ...(later ? { isLaterFragment: true } : {}),
  };
  if (transport === undefined) return { ip };
  return tunnel === undefined ? { ip, transport } : { ip, transport, tunnel };
}

const ICMP4_TYPES: ReadonlyArray<[RegExp, number]> = [
  [/^echo request\b/, 8],
  [/^echo reply\b/, 0],
  [/\bunreachable\b/, 3],
  [/^time exceeded\b/, 11],
  [/^redirect\b/, 5],
  [/^source quench\b/, 4],
  [/^parameter problem\b/, 12],
  [/^time stamp request\b/, 13],
  [/^time stamp reply\b/, 14],
  [/^router advertisement\b/, 9],
  [/^router solicitation\b/, 10],
];
const ICMP4_UNREACH_CODES: ReadonlyArray<[RegExp, number]> = [
  [/^net \S+ unreachable/, 0],
  [/^host \S+ unreachable/, 1],
  [/protocol \d+ unreachable/, 2],
  [/ port \d+ unreachable/, 3],
  [/unreachable - need to frag/, 4],
  [/unreachable - admin prohibited|unreachable - prohibited/, 13],
];
const ICMP6_TYPES: ReadonlyArray<[RegExp, number]> = [
  [/^echo request\b/, 128],
  [/^echo reply\b/, 129],
  [/^destination unreachable\b/, 1],
  [/^packet too big\b/, 2],
  [/^time exceeded\b/, 3],
  [/^parameter problem\b/, 4],
  [/^router solicitation\b/, 133],
  [/^router advertisement\b/, 134],
  [/^neighbor solicitation\b/, 135],
  [/^neighbor advertisement\b/, 136],
  [/^redirect\b/, 137],
  [/^multicast listener query\b/, 130],
  [/^multicast listener report v2\b/, 143],
  [/^multicast listener report\b/, 131],
  [/^multicast listener done\b/, 132],
];

function parseTransport(
  rest: string,
  family: Family,
  srcPort: number | undefined,
  dstPort: number | undefined,
  h: HeaderInfo,
  ctx: Cursor,
  depth: number,
): { transport?: Transport; tunnel?: Tunnel; protocol?: number } {
  // 5.x `-v` may open with a checksum note; the protocol text follows it.
  // Before the protocol text: IPv6 extension headers (`HBH (rtalert: 0x0000) (padn) `,
  // `frag (0|1448) `) and checksum notes (`[icmp6 sum ok] `, 5.x `[no cksum] `).
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
  if (srcPort !== undefined && dstPort !== undefined) {
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
          srcPort,
          dstPort,
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
      srcPort,
      dstPort,
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
  if (r.startsWith("ICMP ") && family === 4) return parseIcmp(r.slice(5), 4, ctx, depth);
  if (r.startsWith("ICMP6, ") && family === 6) return parseIcmp(r.slice(7), 6, ctx, depth);
  if (h.protocol !== undefined)
    return { protocol: h.protocol, transport: { kind: "other", protocol: h.protocol } };
  const other = /^ip-proto-(\d+)/.exec(r);
  if (other)
    return { protocol: Number(other[1]), transport: { kind: "other", protocol: Number(other[1]) } };
  return {};
}

function parseIcmp(
  r: string,
  version: 4 | 6,
  ctx: Cursor,
  depth: number,
): { transport?: Transport; protocol: number } {
  const protocol = version === 4 ? 1 : 58;
  const table = version === 4 ? ICMP4_TYPES : ICMP6_TYPES;
  let type: number | undefined;
  for (const [re, t] of table) {
    if (re.test(r)) {
      type = t;
      break;
    }
  }
  if (type === undefined) return { protocol, transport: { kind: "other", protocol } };
  const icmp: { -readonly [K in keyof IcmpHeader]: IcmpHeader[K] } = {
    kind: "icmp",
    version,
    type,
  };
  const echo = /^echo (?:request|reply), id (\d+), seq (\d+)/.exec(r);
  if (echo) {
    icmp.id = Number(echo[1]);
    icmp.seq = Number(echo[2]);
  }
  if (version === 4 && type === 3) {
    for (const [re, c] of ICMP4_UNREACH_CODES) {
      if (re.test(r)) {
        icmp.code = c;
        break;
      }
    }
  }
  const isError = version === 4 ? [3, 4, 5, 11, 12].includes(type) : type >= 1 && type <= 4;
  if (isError) {
    const quoted = quotedFromLines(ctx, depth) ?? quotedFromText(r, version);
    if (quoted) icmp.quoted = quoted;
  }
  return { protocol, transport: icmp };
}

/** `-v` prints the quoted packet as a nested `IP (...)` block on the following lines. */
function quotedFromLines(ctx: Cursor, depth: number): QuotedHeader | undefined {
  for (let i = ctx.at; i < ctx.lines.length && i < ctx.at + 4; i++) {
    const t = ctx.lines[i]!.trimStart();
    if (/^IP6? /.test(t)) {
      const sub: Cursor = { lines: ctx.lines, at: i + 1 };
      const { frame } = parseFrame(t, sub, depth + 1);
      if (frame.ip === undefined) return undefined;
      ctx.at = sub.at;
      const tr = frame.transport;
      if (tr !== undefined && (tr.kind === "tcp" || tr.kind === "udp"))
        return { ip: frame.ip, srcPort: tr.srcPort, dstPort: tr.dstPort };
      return { ip: frame.ip };
    }
  }
  return undefined;
}

/**
 * The one-line form names only the original destination (and port): `10.0.0.9 udp port 53
 * unreachable`, `host 10.0.0.9 unreachable`. The original source is the error's destination,
 * which the caller knows; here only what the text says is kept.
 */
function quotedFromText(r: string, version: 4 | 6): QuotedHeader | undefined {
  const port = /^(\S+) (tcp|udp) port (\d+) unreachable/.exec(r);
  const host = /^(?:host|net) (\S+) unreachable/.exec(r);
  const proto = /^(\S+) protocol (\d+) unreachable/.exec(r);
  const text = port?.[1] ?? host?.[1] ?? proto?.[1];
  const ip = text === undefined ? undefined : tryParseIp(text);
  if (ip === undefined || ip.family !== version) return undefined;
  const protocol = port ? (port[2] === "tcp" ? 6 : 17) : proto ? Number(proto[2]) : 0;
  // The original source is not printed; 0 marks it unknown (the caller fills it in).
  return {
    ip: { family: ip.family, src: 0n, dst: ip.value, protocol },
    ...(port ? { dstPort: Number(port[3]) } : {}),
  };
}

function parseArp(text: string): ArpMessage {
  // -v names the hardware and protocol address formats first.
  const r = text.replace(/^\S+ \(len \d+\), \S+ \(len \d+\), /, "");
  const req = /^Request who-has (\S+?)(?: \(\S+\))? tell (\S+?),/.exec(r);
  if (req) {
    const t = tryParseIp(req[1]!);
    const s = tryParseIp(req[2]!);
    return { op: 1, ...(s ? { senderIp: s.value } : {}), ...(t ? { targetIp: t.value } : {}) };
  }
  const rep = /^Reply (\S+) is-at/.exec(r);
  if (rep) {
    const s = tryParseIp(rep[1]!);
    return { op: 2, ...(s ? { senderIp: s.value } : {}) };
  }
  return { op: 0 };
}
