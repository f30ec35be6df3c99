/**
 * @module capture/tcpdump-icmp — ICMP and ICMPv6 as tcpdump prints them: the message type (and
 * the unreachable code) from its words, echo id and sequence, and for errors the packet they
 * quote, from the nested `-v` lines or from the one-line form (`10.0.0.9 udp port 53
 * unreachable`, `host db.corp unreachable`), names (no `-n`) included.
 * Used by capture/tcpdump-frame.ts.
 */
import type { Frame, IcmpHeader, NamedQuotedHeader, QuotedHeader, Transport } from "./packet.ts";
import { type PrintedEnd, readEnd, readPort } from "./tcpdump-endpoint.ts";

/** Where the frame parser keeps the lines after a packet's first. */
export interface Cursor {
  readonly lines: readonly string[];
  at: number;
}

/** Parses a nested frame (the `-v` quoted packet); supplied by capture/tcpdump-frame.ts. */
export type NestedFrameParser = (text: string, ctx: Cursor, depth: number) => Frame;

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
  [/ port \S+ unreachable/, 3],
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

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * Reads the ICMP text after `ICMP ` / `ICMP6, `. `errorDst` is the error's own destination:
 * the one-line form leaves out the quoted packet's source because it is that address.
 */
export function parseIcmp(
  r: string,
  version: 4 | 6,
  errorDst: PrintedEnd,
  ctx: Cursor,
  depth: number,
  nested: NestedFrameParser,
): { transport: Transport; protocol: number } {
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
  const icmp: Mutable<IcmpHeader> = { kind: "icmp", version, type };
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
    const q = quotedFromLines(ctx, depth, nested) ?? quotedFromText(r, version, errorDst);
    if (q?.quoted !== undefined) icmp.quoted = q.quoted;
    if (q?.quotedNamed !== undefined) icmp.quotedNamed = q.quotedNamed;
  }
  return { protocol, transport: icmp };
}

interface Quoted {
  quoted?: QuotedHeader;
  quotedNamed?: NamedQuotedHeader;
}

/**
 * `-v` prints the quoted packet as a nested `IP (...)` block on the following lines (with `-e`
 * the `IP` is left out: the block starts with its header group).
 */
function quotedFromLines(
  ctx: Cursor,
  depth: number,
  nested: NestedFrameParser,
): Quoted | undefined {
  for (let i = ctx.at; i < ctx.lines.length && i < ctx.at + 4; i++) {
    const t = ctx.lines[i]!.trimStart();
    if (/^(?:IP6? |\((?:tos|hlim|flowlabel|class) )/.test(t)) {
      const sub: Cursor = { lines: ctx.lines, at: i + 1 };
      const frame = nested(t, sub, depth + 1);
      if (frame.ip === undefined && frame.named === undefined) return undefined;
      ctx.at = sub.at;
      const tr = frame.transport;
      const ports =
        tr !== undefined && (tr.kind === "tcp" || tr.kind === "udp")
          ? { srcPort: tr.srcPort, dstPort: tr.dstPort }
          : {};
      if (frame.ip !== undefined) return { quoted: { ip: frame.ip, ...ports } };
      const services =
        tr !== undefined && (tr.kind === "tcp" || tr.kind === "udp")
          ? {
              ...(tr.srcService === undefined ? {} : { srcService: tr.srcService }),
              ...(tr.dstService === undefined ? {} : { dstService: tr.dstService }),
            }
          : {};
      return { quotedNamed: { ip: frame.named!, ...ports, ...services } };
    }
  }
  return undefined;
}

/**
 * The one-line form names only the original destination (and port): `10.0.0.9 udp port 53
 * unreachable`, `host db.corp unreachable`; the original source is the error's destination.
 */
function quotedFromText(r: string, version: 4 | 6, src: PrintedEnd): Quoted | undefined {
  const port = /^(\S+) (tcp|udp) port (\S+) unreachable/.exec(r);
  const host = /^(?:host|net) (\S+) unreachable/.exec(r);
  const proto = /^(\S+) protocol (\d+) unreachable/.exec(r);
  const text = port?.[1] ?? host?.[1] ?? proto?.[1];
  if (text === undefined) return undefined;
  const dst = readEnd(text, false);
  if (dst === undefined || (dst.ip !== undefined && dst.ip.family !== version)) return undefined;
  if (src.ip !== undefined && src.ip.family !== version) return undefined;
  const protocol = port ? (port[2] === "tcp" ? 6 : 17) : proto ? Number(proto[2]) : 0;
  let dstPort: { dstPort?: number; dstService?: string } = {};
  if (port) {
    const end = readPort(port[3]!);
    if (end === undefined) return undefined;
    dstPort =
      end.service === undefined
        ? { dstPort: end.port }
        : { dstPort: end.port, dstService: end.service };
  }
  if (src.ip !== undefined && dst.ip !== undefined && dstPort.dstService === undefined) {
    return {
      quoted: {
        ip: { family: version, src: src.ip.value, dst: dst.ip.value, protocol },
        ...dstPort,
      },
    };
  }
  return {
    quotedNamed: {
      ip: {
        family: version,
        ...(src.ip === undefined ? { srcName: src.name! } : { src: src.ip.value }),
        ...(dst.ip === undefined ? { dstName: dst.name! } : { dst: dst.ip.value }),
        protocol,
      },
      ...dstPort,
    },
  };
}
