/**
 * @module lab/path-capture — the whole-path sandboxes' capture points: tcpdump -x in a namespace,
 * its IPv4 or IPv6 packets parsed from their bytes as they come (the headers a verdict is read
 * from, and for an ICMP or ICMPv6 destination-unreachable error, the packet it quotes). An
 * explicit I/O module.
 */
import type { ChildProcess } from "node:child_process";
import { formatIp, parseIp } from "../net/cidr.ts";
import type { Namespace } from "./netns.ts";

/** One captured packet's headers (and, for an ICMP(v6) error, the packet it quotes). */
export interface SandboxPacket {
  /** The protocol (IPv4) or the next header after the fixed header (IPv6: none else is sent). */
  readonly proto: number;
  readonly src: string;
  readonly dst: string;
  readonly sport?: number;
  readonly dport?: number;
  readonly rst?: boolean;
  readonly icmpType?: number;
  readonly icmpCode?: number;
  readonly inner?: {
    readonly proto: number;
    readonly src: string;
    readonly dst: string;
    readonly sport?: number;
    /** The quoted packet's ICMP(v6) type (8 or 128: the echo request a flow sends). */
    readonly icmpType?: number;
  };
}

const ip4 = (b: readonly number[], at: number) => b.slice(at, at + 4).join(".");
const u16 = (b: readonly number[], at: number) => ((b[at] ?? 0) << 8) | (b[at + 1] ?? 0);

/** An IPv6 address at `at`, as podpath prints it (RFC 5952). */
function ip6(b: readonly number[], at: number): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2)
    groups.push((((b[at + i] ?? 0) << 8) | (b[at + i + 1] ?? 0)).toString(16));
  return formatIp(parseIp(groups.join(":")));
}

/** A TCP or UDP header's ports at `l4` (and for TCP, whether RST is set). */
function ports(b: readonly number[], l4: number, proto: number) {
  return {
    sport: u16(b, l4),
    dport: u16(b, l4 + 2),
    ...(proto === 6 ? { rst: ((b[l4 + 13] ?? 0) & 4) !== 0 } : {}),
  };
}

/** Reads an IPv4 packet's headers from its bytes (tcpdump -x prints them from the IP header). */
export function parsePacket(b: readonly number[]): SandboxPacket | undefined {
  if (b.length < 20 || b[0]! >> 4 !== 4) return undefined;
  const ihl = (b[0]! & 15) * 4;
  const proto = b[9]!;
  const base = { proto, src: ip4(b, 12), dst: ip4(b, 16) };
  const l4 = ihl;
  if (proto === 6 || proto === 17) return { ...base, ...ports(b, l4, proto) };
  if (proto === 1) {
    const icmpType = b[l4]!;
    const icmpCode = b[l4 + 1]!;
    if (icmpType !== 3) return { ...base, icmpType, icmpCode };
    const q = l4 + 8;
    const qihl = ((b[q] ?? 0) & 15) * 4;
    const qproto = b[q + 9] ?? 0;
    return {
      ...base,
      icmpType,
      icmpCode,
      inner: {
        proto: qproto,
        src: ip4(b, q + 12),
        dst: ip4(b, q + 16),
        ...(qproto === 6 || qproto === 17 ? { sport: u16(b, q + qihl) } : {}),
        ...(qproto === 1 ? { icmpType: b[q + qihl] ?? -1 } : {}),
      },
    };
  }
  return base;
}

/** Reads an IPv6 packet's headers from its bytes (tcpdump -x prints them from the IP header). */
export function parsePacket6(b: readonly number[]): SandboxPacket | undefined {
  if (b.length < 40 || b[0]! >> 4 !== 6) return undefined;
  const proto = b[6]!;
  const base = { proto, src: ip6(b, 8), dst: ip6(b, 24) };
  const l4 = 40;
  if (proto === 6 || proto === 17) return { ...base, ...ports(b, l4, proto) };
  if (proto === 58) {
    const icmpType = b[l4]!;
    const icmpCode = b[l4 + 1]!;
    if (icmpType !== 1 || b.length < l4 + 8 + 40) return { ...base, icmpType, icmpCode };
    const q = l4 + 8;
    const qproto = b[q + 6] ?? 0;
    return {
      ...base,
      icmpType,
      icmpCode,
      inner: {
        proto: qproto,
        src: ip6(b, q + 8),
        dst: ip6(b, q + 24),
        ...(qproto === 6 || qproto === 17 ? { sport: u16(b, q + 40) } : {}),
        ...(qproto === 58 ? { icmpType: b[q + 40] ?? -1 } : {}),
      },
    };
  }
  return base;
}

/** Per family: the snapshot length, the parser, and a packet's length once its header is in. */
const FAMILY = {
  4: { snaplen: 200, parse: parsePacket, header: 4, length: (b: number[]) => u16(b, 2) },
  6: { snaplen: 300, parse: parsePacket6, header: 6, length: (b: number[]) => 40 + u16(b, 4) },
} as const;

export interface PathCapture {
  readonly packets: SandboxPacket[];
  readonly proc: ChildProcess;
}

/** tcpdump -x in a namespace, its packets parsed as they come; resolves once it listens. */
export async function startPathCapture(
  ns: Namespace,
  family: 4 | 6,
  args: readonly string[],
): Promise<PathCapture> {
  const fam = FAMILY[family];
  const proc = ns.spawn(["tcpdump", "-l", "-nn", "-x", "-s", String(fam.snaplen), ...args]);
  const packets: SandboxPacket[] = [];
  let buf = "";
  let bytes: number[] = [];
  const flush = () => {
    const p = fam.parse(bytes);
    if (p) packets.push(p);
    bytes = [];
  };
  proc.stdout?.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    const lines = buf.split("\n");
    buf = lines.pop() ?? "";
    for (const l of lines) {
      const m = /^\s+0x([0-9a-f]+):\s+(.*)$/.exec(l);
      if (!m) {
        flush();
        continue;
      }
      // a dump from offset 0 starts a packet: tcpdump first dumps the payload of an ICMPv6 code
      // it cannot name (policy-fail, reject-route) from the ICMPv6 header, then -x's own dump
      if (Number.parseInt(m[1]!, 16) === 0) flush();
      for (const w of m[2]!.trim().split(/\s+/)) {
        for (let i = 0; i + 1 < w.length; i += 2)
          bytes.push(Number.parseInt(w.slice(i, i + 2), 16));
      }
      // complete at its IP length, or at the snapshot length (less the link header)
      if (
        bytes.length >= fam.header &&
        bytes.length >= Math.min(fam.length(bytes), fam.snaplen - 14)
      )
        flush();
    }
  });
  let err = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`tcpdump did not start in ${ns.name}: ${err}`)),
      20_000,
    );
    proc.stderr?.setEncoding("utf8").on("data", (d: string) => {
      err += d;
      if (/listening on/.test(err)) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.on("exit", () => reject(new Error(`tcpdump exited in ${ns.name}: ${err}`)));
  });
  return { packets, proc };
}
