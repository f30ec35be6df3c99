/**
 * @module capture/tcpdump-text — tcpdump's printed output (what people paste) back into packets:
 * the default one-line form, `-n`, `-v`/`-vv` (header line + indented address line), `-e`
 * (MAC/SLL/NFLOG header, VLAN tags), `-q`, `-t`/`-tt`/`-tttt` (µs or ns), `-#`, the interface
 * and `In`/`Out` columns of `-i any`, ICMP echo and error lines (with the quoted packet of `-v`),
 * VXLAN/OTV/Geneve inner frames on the following lines; tcpdump 4.99 and 5.x printers.
 *
 * A packet's `line` is the text line where it starts. Times without a date are nanoseconds since
 * midnight (`timeOfDayOnly`); dated times are read as UTC (tcpdump prints local time: capture with
 * `TZ=UTC` to make them exact). Lines that are not tcpdump output produce a diagnostic naming the
 * line and reading continues.
 */
import type { Diagnostic } from "../model/types.ts";
import type { Direction, Packet } from "./packet.ts";
import type { DiagnosticSink } from "./raw-record.ts";
import { type Cursor, ENCAP_MARKERS, MAC, parseFrame } from "./tcpdump-frame.ts";

const NUMBERED = /^ *(\d+) {2}(?=\S)/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))? /;
const TIME_OF_DAY = /^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))? /;
const EPOCH = /^(\d{1,12})\.(\d{6}|\d{9}) /;
const NOISE =
  /^(reading from file |listening on |tcpdump: |Warning: interface names |\d+ packets? (captured|received by filter|dropped by kernel)|dropped privs|\$ |# |\s*$)/;
/** `-i any` columns: interface name, then the packet type (print-sll.c sll_pkttype_values). */
const IFACE_DIR = /^(\S+) +(In|Out|B|M|P) +(?=\S)/;
const DIRECTIONS: Readonly<Record<string, Direction>> = {
  In: "in",
  Out: "out",
  B: "broadcast",
  M: "multicast",
  P: "otherhost",
};
const MAX_CONTINUATION = 10_000;
const MAX_UNPARSED_REPORTS = 20;

interface Block {
  line: number;
  head: string;
  number?: number;
  timeNs: bigint;
  timeOfDayOnly: boolean;
  cont: string[];
}

/** Parses one head line's prefix: packet number and timestamp. */
function parseHead(
  text: string,
): { number?: number; timeNs?: bigint; timeOfDayOnly: boolean; rest: string } | undefined {
  let rest = text;
  let number: number | undefined;
  const n = NUMBERED.exec(rest);
  if (n) {
    number = Number(n[1]);
    rest = rest.slice(n[0].length);
  }
  let m = DATE_TIME.exec(rest);
  if (m) {
    const ms = Date.UTC(
      Number(m[1]),
      Number(m[2]) - 1,
      Number(m[3]),
      Number(m[4]),
      Number(m[5]),
      Number(m[6]),
    );
    if (Number.isNaN(ms)) return undefined;
    const t = BigInt(ms) * 1_000_000n + fracNs(m[7]);
    return {
      ...(number === undefined ? {} : { number }),
      timeNs: t,
      timeOfDayOnly: false,
      rest: rest.slice(m[0].length),
    };
  }
  m = TIME_OF_DAY.exec(rest);
  if (m) {
    const s = Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]);
    const t = BigInt(s) * 1_000_000_000n + fracNs(m[4]);
    return {
      ...(number === undefined ? {} : { number }),
      timeNs: t,
      timeOfDayOnly: true,
      rest: rest.slice(m[0].length),
    };
  }
  m = EPOCH.exec(rest);
  if (m) {
    const t = BigInt(m[1]!) * 1_000_000_000n + fracNs(m[2]);
    return {
      ...(number === undefined ? {} : { number }),
      timeNs: t,
      timeOfDayOnly: false,
      rest: rest.slice(m[0].length),
    };
  }
  if (number !== undefined) return { number, timeOfDayOnly: false, rest };
  return undefined;
}

function fracNs(digits: string | undefined): bigint {
  if (digits === undefined) return 0n;
  return BigInt(digits.padEnd(9, "0"));
}

/** A line with no timestamp that still starts a packet (`-t`): a protocol keyword or MAC. */
const UNTIMED_HEAD = new RegExp(`^(?:IP6? |ARP, |${MAC} > )`);

/**
 * Parses tcpdump text, line by line, into packets. `lines` may be any (async) iterable of lines
 * without their newline; `file` names the input in diagnostics.
 */
export async function* parseTcpdumpLines(
  lines: AsyncIterable<string> | Iterable<string>,
  file: string,
  diag: DiagnosticSink,
): AsyncGenerator<Packet> {
  let lineNo = 0;
  let cur: Block | undefined;
  let index = 0;
  let unparsed = 0;
  let untimed = false;
  const report = (line: number, text: string) => {
    unparsed++;
    if (unparsed <= MAX_UNPARSED_REPORTS) {
      diag({
        code: "TCPDUMP_UNPARSED",
        severity: "warning",
        message: `${file}:${line}: not a line tcpdump prints (expected a packet line starting with a time or a -# number, or an indented continuation): ${JSON.stringify(text.slice(0, 80))}`,
        source: { file, line, text: text.slice(0, 200) },
      });
    }
  };
  const bases = new Map<string, number>();
  const finish = (b: Block): Packet | undefined => {
    index++;
    const p = blockToPacket(b, b.number ?? index, file, diag);
    return p === undefined ? undefined : absoluteSequence(p, bases);
  };
  for await (const raw of lines) {
    lineNo++;
    const text = raw;
    const head = /^\s/.test(text) && !NUMBERED.test(text) ? undefined : parseHead(text);
    const startsPacket =
      head !== undefined ||
      (untimed && UNTIMED_HEAD.test(text) && !(cur !== undefined && expectsInner(cur)));
    if (startsPacket) {
      if (cur !== undefined) {
        const p = finish(cur);
        if (p !== undefined) yield p;
      }
      if (head === undefined) {
        cur = { line: lineNo, head: text, timeNs: 0n, timeOfDayOnly: true, cont: [] };
      } else {
        if (head.timeNs === undefined && index === 0) untimed = true;
        cur = {
          line: lineNo,
          head: head.rest,
          ...(head.number === undefined ? {} : { number: head.number }),
          timeNs: head.timeNs ?? 0n,
          timeOfDayOnly: head.timeNs === undefined ? true : head.timeOfDayOnly,
          cont: [],
        };
      }
      continue;
    }
    if (index === 0 && cur === undefined && UNTIMED_HEAD.test(text)) {
      untimed = true;
      cur = { line: lineNo, head: text, timeNs: 0n, timeOfDayOnly: true, cont: [] };
      continue;
    }
    if (NOISE.test(text)) continue;
    if (cur !== undefined && (/^\s/.test(text) || expectsInner(cur))) {
      if (cur.cont.length < MAX_CONTINUATION) cur.cont.push(text);
      continue;
    }
    report(lineNo, text);
  }
  if (cur !== undefined) {
    const p = finish(cur);
    if (p !== undefined) yield p;
  }
  if (unparsed > MAX_UNPARSED_REPORTS) {
    diag({
      code: "TCPDUMP_UNPARSED",
      severity: "warning",
      message: `${file}: ${unparsed - MAX_UNPARSED_REPORTS} more lines were not tcpdump output`,
      source: { file, line: lineNo },
    });
  }
  if (index === 0 && unparsed > 0) {
    // not one packet line: this is no capture (an empty file is one, of nothing)
    diag({
      code: "TCPDUMP_NOT_TEXT",
      severity: "error",
      message: `${file}: none of its ${lineNo} lines is tcpdump output; expected a pcap or pcapng file (tcpdump -w) or tcpdump -n text`,
      source: { file, line: 1 },
    });
  }
}

/**
 * tcpdump prints sequence numbers relative to the first it saw for a flow direction (the SYN's,
 * absolute) unless run with -S; this restores the absolute numbers so retransmissions compare
 * the same way as in a binary capture. Bases are remembered per flow direction. A number close
 * above the base is taken as already absolute (-S); a random ISN makes the two cases distinct.
 */
function absoluteSequence(p: Packet, bases: Map<string, number>): Packet {
  const t = p.transport;
  if (p.ip === undefined || t?.kind !== "tcp" || t.seq === undefined) return p;
  const dir = `${p.ip.src}.${t.srcPort}>${p.ip.dst}.${t.dstPort}`;
  const base = bases.get(dir);
  if (base === undefined || ((t.flags ?? 0) & 0x02) !== 0) {
    if (bases.size > 100_000) bases.clear();
    bases.set(dir, t.seq);
    return p;
  }
  // Printed with -S (absolute): the number is already near the base, and large.
  if (t.seq >= 1 << 24 && (t.seq - base) >>> 0 < 1 << 24) return p;
  return { ...p, transport: { ...t, seq: (base + t.seq) >>> 0 } };
}

/** Whether the block's last printed line announces an inner frame on the next line. */
function expectsInner(b: Block): boolean {
  const last = b.cont.length > 0 ? b.cont[b.cont.length - 1]! : b.head;
  return (
    ENCAP_MARKERS.test(last) &&
    /(?:vni (?:0x)?[0-9a-f]+|instance \d+)(?:, options \[.*\])?$/.test(last)
  );
}

function blockToPacket(
  b: Block,
  index: number,
  file: string,
  diag: DiagnosticSink,
): Packet | undefined {
  let rest = b.head;
  let iface: string | undefined;
  let direction: Direction | undefined;
  const id = IFACE_DIR.exec(rest);
  if (id && !/^IP6?$|^ARP,?$/.test(id[1]!)) {
    iface = id[1]!;
    direction = DIRECTIONS[id[2]!];
    rest = rest.slice(id[0].length);
  }
  const ctx: Cursor = { lines: b.cont, at: 0 };
  const { frame, length } = parseFrame(rest, ctx, 0);
  if (frame.ip === undefined && frame.arp === undefined) {
    const d: Diagnostic = {
      code: "TCPDUMP_UNDECODED",
      severity: "info",
      message: `${file}:${b.line}: packet ${index} has no IP or ARP header podpath can read; it is counted without addresses`,
      source: { file, line: b.line, text: b.head.slice(0, 200) },
    };
    diag(d);
  }
  return {
    index,
    line: b.line,
    timeNs: b.timeNs,
    ...(b.timeOfDayOnly ? { timeOfDayOnly: true } : {}),
    ...(iface === undefined ? {} : { iface }),
    ...(direction === undefined ? {} : { direction }),
    ...(length === undefined ? {} : { length }),
    ...frame,
  };
}
