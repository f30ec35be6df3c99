/**
 * @module capture/test-helpers/forms — what reading tcpdump's text of a capture must give, form
 * by form (tests only): the same packets as reading the capture, with the names the printing
 * machine gave its addresses and services where tcpdump ran without `-n`, the time column the
 * flags chose, and the IP ID, interface, direction and frame length where the flags print them.
 */
import { formatIp } from "../../net/cidr.ts";
import type { Packet } from "../packet.ts";

/** The tcpdump printings of one capture that tests read back (`-r FILE` is added). */
export const FORMS: readonly (readonly string[])[] = [
  ["-n"],
  ["-nn"],
  [],
  ["-nt"],
  ["-ntt"],
  ["-nttt"],
  ["-ntttt"],
  ["-nttttt"],
  ["-ne"],
  ["-nv"],
  ["-nvv"],
  ["-nvvv"],
  ["-nA"],
  ["-nX"],
  ["-nXX"],
  ["-nq"],
  ["-netvv"],
  ["-n", "-#", "-tttt"],
  ["-nS"],
  ["-t"],
  ["-e"],
  ["-v"],
  ["-vv"],
  ["-q"],
  ["-etvv"],
  ["-A"],
  ["-ttt"],
  ["-e", "-ttttt"],
];

/** The capture's link type as it matters to the text: directions, interfaces, `-e` lengths. */
export type LinkKind = "sll2" | "sll" | "eth" | "other";

export interface FormContext {
  readonly flags: readonly string[];
  readonly link: LinkKind;
  /** Address (as formatIp writes it) → the name the printing machine resolves it to. */
  readonly names: Readonly<Record<string, string>>;
  /** Ports the printing machine names but podpath's service table does not know. */
  readonly services: Readonly<Record<string, string>>;
  /** LINUX_SLL2 interface index → the printing machine's interface name. */
  readonly ifnames: Readonly<Record<string, string>>;
  /**
   * Every ICMP error in the capture is one whose one-line form names the quoted packet (port
   * unreachable): the quoted packet is then compared without -v too.
   */
  readonly quotedAlwaysPrinted?: boolean;
}

interface Flags {
  numeric: boolean;
  times: number;
  link: boolean;
  verbose: boolean;
  quiet: boolean;
}

function flagsOf(flags: readonly string[]): Flags {
  const letters = flags.filter((f) => /^-[^-]/.test(f)).map((f) => f.slice(1));
  const count = (c: string) => letters.join("").split(c).length - 1;
  return {
    numeric: count("n") > 0,
    times: count("t"),
    link: count("e") > 0,
    verbose: count("v") > 0,
    quiet: count("q") > 0,
  };
}

const DAY_NS = 86_400_000_000_000n;

/** The packet as the text shows it: ends as names or addresses, ports as numbers or names. */
function view(p: Packet, side: "text" | "pcap", ctx: FormContext, f: Flags): unknown {
  const named = side === "pcap" && !f.numeric;
  const host = (family: 4 | 6, v: bigint | undefined, name: string | undefined) => {
    if (v === undefined) return name ?? "?";
    const a = formatIp({ family, value: v });
    return named ? (ctx.names[a] ?? a) : a;
  };
  const port = (n: number, service: string | undefined) =>
    service ?? (named ? (ctx.services[String(n)] ?? n) : n);
  const h = p.ip ?? p.named;
  const t = p.transport;
  const ends = h && {
    family: h.family,
    src: host(h.family, p.ip?.src ?? p.named?.src, p.named?.srcName),
    dst: host(h.family, p.ip?.dst ?? p.named?.dst, p.named?.dstName),
    protocol: h.protocol,
  };
  const arp = p.arp && {
    op: p.arp.op,
    sender: host(4, p.arp.senderIp, p.arp.senderName),
    ...(p.arp.op === 1 ? { target: host(4, p.arp.targetIp, p.arp.targetName) } : {}),
  };
  let transport: unknown;
  if (t?.kind === "tcp")
    transport = {
      tcp: [port(t.srcPort, t.srcService), port(t.dstPort, t.dstService)],
      flags: f.quiet ? "-" : t.flags,
    };
  else if (t?.kind === "udp")
    transport = { udp: [port(t.srcPort, t.srcService), port(t.dstPort, t.dstService)] };
  else if (t?.kind === "icmp") {
    const q = t.quoted ?? t.quotedNamed;
    transport = {
      icmp: t.type,
      code: t.type === 3 && t.version === 4 ? t.code : undefined,
      // The one-line form of some errors (time exceeded) does not print the quoted packet.
      quoted: (side === "text" || f.verbose || ctx.quotedAlwaysPrinted) &&
        q && {
          src: host(
            q.ip.family,
            t.quoted?.ip.src ?? t.quotedNamed?.ip.src,
            t.quotedNamed?.ip.srcName,
          ),
          dst: host(
            q.ip.family,
            t.quoted?.ip.dst ?? t.quotedNamed?.ip.dst,
            t.quotedNamed?.ip.dstName,
          ),
          dstPort: q.dstPort === undefined ? undefined : port(q.dstPort, t.quotedNamed?.dstService),
        },
    };
  } else if (t !== undefined) transport = { kind: t.kind };
  return { ends, arp, transport };
}

/**
 * Every way `txt` (read from tcpdump's text) differs from `bin` (read from the capture it was
 * printed from); empty when they agree.
 */
export function formDifferences(
  txt: readonly Packet[],
  bin: readonly Packet[],
  ctx: FormContext,
): string[] {
  const f = flagsOf(ctx.flags);
  const out: string[] = [];
  if (txt.length !== bin.length) out.push(`count: text ${txt.length}, capture ${bin.length}`);
  const first = bin[0]?.timeNs ?? 0n;
  for (let i = 0; i < Math.min(txt.length, bin.length); i++) {
    const x = txt[i]!;
    const y = bin[i]!;
    const at = `packet ${i + 1}`;
    const a = JSON.stringify(view(x, "text", ctx, f), big);
    const b = JSON.stringify(view(y, "pcap", ctx, f), big);
    if (a !== b) out.push(`${at}: text ${a} != capture ${b}`);
    if (x.index !== y.index) out.push(`${at}: index ${x.index} != ${y.index}`);
    const expected =
      f.times === 1
        ? 0n
        : f.times === 3 || f.times === 5
          ? y.timeNs - first
          : f.times === 0
            ? y.timeNs % DAY_NS
            : y.timeNs;
    if (x.timeNs !== expected) out.push(`${at}: time ${x.timeNs} != ${expected}`);
    const basis =
      f.times === 1 ? "none" : f.times === 3 || f.times === 5 ? "since-first" : undefined;
    if (x.timeBasis !== basis) out.push(`${at}: time basis ${x.timeBasis} != ${basis}`);
    const xh = x.ip ?? x.named;
    if (xh?.id !== undefined && xh.id !== y.ip?.id)
      out.push(`${at}: IP id ${xh.id} != ${y.ip?.id}`);
    if (f.verbose && y.ip?.family === 4 && xh?.id === undefined) out.push(`${at}: IP id not read`);
    if (f.verbose && xh !== undefined && xh.length !== y.ip?.length)
      out.push(`${at}: IP length ${xh.length} != ${y.ip?.length}`);
    // -e prints the frame length (LINKTYPE_RAW's `ip: ` has none).
    if ((f.link && ctx.link !== "other") || x.length !== undefined)
      if (x.length !== y.length) out.push(`${at}: length ${x.length} != ${y.length}`);
    const direction =
      ctx.link === "sll2" || (ctx.link === "sll" && f.link) ? y.direction : undefined;
    if (x.direction !== direction) out.push(`${at}: direction ${x.direction} != ${direction}`);
    const iface =
      ctx.link === "sll2" ? ctx.ifnames[y.iface?.replace(/^ifindex /, "") ?? ""] : undefined;
    if (x.iface !== iface) out.push(`${at}: interface ${x.iface} != ${iface}`);
  }
  return out;
}

/**
 * The IPv4 packets as tcpdump without flags would show them (names), for comparing a live text
 * with a capture taken beside it (their times and IPv6 neighbour noise differ).
 */
export function liveViews(
  packets: readonly Packet[],
  side: "text" | "pcap",
  ctx: Omit<FormContext, "flags" | "link">,
): string[] {
  const f = flagsOf([]);
  const c: FormContext = { ...ctx, flags: [], link: "sll2" };
  return packets
    .filter((p) => (p.ip ?? p.named)?.family === 4)
    .map((p) => `${p.direction} ${JSON.stringify(view(p, side, c, f), big)}`);
}

function big(_: string, v: unknown): unknown {
  return typeof v === "bigint" ? v.toString() : v;
}
