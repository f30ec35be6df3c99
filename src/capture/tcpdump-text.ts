/**
 * @module capture/tcpdump-text — tcpdump's printed output, as people paste it, back into packets:
 * with or without `-n` (host and service names are kept as names, see NamedIpHeader), every time
 * column (`-t` none, clock, `-tt` epoch, `-ttt` delta, `-tttt` date, `-ttttt` since the first),
 * `-#`, `-e` (Ethernet with VLAN tags, LINUX_SLL's direction, LINUX_SLL2's `ifindex`, NFLOG),
 * the interface and direction columns of `-i any`, `-v`…`-vvv` (header line + indented address
 * line; the IP ID is read), `-q`, `-A`/`-X`/`-XX` payload lines (skipped), ICMP errors with the
 * packet they quote, VXLAN/OTV/Geneve inner frames; tcpdump 4.99 and 5.x printers. tcpdump's own
 * messages and pasted shell prompts are skipped; a prompt holding the tcpdump command is read
 * for its flags (capture/tcpdump-command.ts).
 *
 * A packet's `line` is the text line where it starts. Clock times are nanoseconds since midnight
 * (`timeOfDayOnly`); dated times are read as UTC (tcpdump prints local time: capture with
 * `TZ=UTC` to make them exact). Lines that are not tcpdump output produce a diagnostic naming the
 * line and reading continues.
 */
import type { Diagnostic } from "../model/types.ts";
import type { Direction, Frame, Packet } from "./packet.ts";
import type { DiagnosticSink } from "./raw-record.ts";
import { readPrompt, type TcpdumpCommand } from "./tcpdump-command.ts";
import { type Cursor, ENCAP_MARKERS, parseFrame } from "./tcpdump-frame.ts";
import {
  type Head,
  isUntimedHead,
  looksLikePacket,
  NOISE,
  parseHead,
  type TimeKind,
} from "./tcpdump-line.ts";

/** `-i any` columns (LINUX_SLL2): interface name, then the packet type (print-sll.c). */
const IFACE_DIR = /^(\S+) +(In|Out|B|M|P) +(?=\S)/;
/** LINUX_SLL `-e`: the packet type alone, before the link address and ethertype. */
const SLL_DIR = /^(In|Out|B|M|P) +(?=(?:\S+(?: \(oui [^)]*\))? )?ethertype )/;
const DIRECTIONS: Readonly<Record<string, Direction>> = {
  In: "in",
  Out: "out",
  B: "broadcast",
  M: "multicast",
  P: "otherhost",
};
const MAX_CONTINUATION = 10_000;
const MAX_UNPARSED_REPORTS = 20;
/** Relative times not yet known to be deltas (-ttt) or offsets (-ttttt) are held this long. */
const MAX_RELATIVE_PENDING = 64;

interface Block {
  line: number;
  head: string;
  number?: number;
  timeNs: bigint;
  kind: TimeKind;
  cont: string[];
  /** `-A` bytes have begun: every line up to the next packet is payload, not tcpdump's text. */
  payload: boolean;
}

/** What the text so far (or the pasted command) says about how tcpdump printed it. */
interface Mode {
  /** Packets start without a time (-t). */
  untimed: boolean;
  /** Packets are followed by their bytes as text (-A). */
  ascii: boolean;
  /** How relative times read: -ttt deltas or -ttttt offsets; undefined until known. */
  relative: "delta" | "since-first" | undefined;
}

function modeOf(cmd: TcpdumpCommand | undefined): Mode {
  return {
    untimed: cmd?.timeFlags === 1,
    ascii: cmd?.ascii === true,
    relative: cmd?.timeFlags === 3 ? "delta" : cmd?.timeFlags === 5 ? "since-first" : undefined,
  };
}

/**
 * Relative times (-ttt deltas, -ttttt offsets): packets are held until a decrease shows deltas or
 * enough show offsets, then released with times since the first packet.
 */
class RelativeTimes {
  /** The reading mode; `relative` is decided here. */
  mode: Mode;
  pending: Packet[] = [];
  private lastRelative = -1n;
  private deltaSum = 0n;
  /** Offsets were assumed: too few packets to see a decrease. */
  assumedOffsets = false;

  constructor(mode: Mode) {
    this.mode = mode;
  }

  /** A new tcpdump command: its mode, and times counted afresh. */
  restart(mode: Mode): void {
    this.mode = mode;
    this.lastRelative = -1n;
    this.deltaSum = 0n;
  }

  private settle(p: Packet): Packet {
    if (p.timeBasis !== "since-first" || this.mode.relative !== "delta") return p;
    this.deltaSum += p.timeNs;
    return { ...p, timeNs: this.deltaSum };
  }

  /** The packets `p` lets go (undefined: the end or a prompt, everything held goes). */
  *release(p: Packet | undefined): Generator<Packet> {
    const mode = this.mode;
    if (p !== undefined && p.timeBasis === "since-first" && mode.relative === undefined) {
      if (this.lastRelative >= 0n && p.timeNs < this.lastRelative) mode.relative = "delta";
      this.lastRelative = p.timeNs;
      this.pending.push(p);
      if (mode.relative === undefined && this.pending.length < MAX_RELATIVE_PENDING) return;
    }
    if (this.pending.length > 0) {
      if (mode.relative === undefined) {
        mode.relative = "since-first";
        this.assumedOffsets = this.pending.length < MAX_RELATIVE_PENDING;
      }
      const held = this.pending;
      this.pending = [];
      for (const q of held) yield this.settle(q);
      if (p !== undefined && held[held.length - 1] === p) return;
    }
    if (p !== undefined) yield this.settle(p);
  }
}

/** A line without a time that starts a packet: after -t, or the first line of a fresh paste. */
function startsUntimedPacket(
  text: string,
  indented: boolean,
  mode: Mode,
  fresh: boolean,
  cur: Block | undefined,
): boolean {
  const mayStartUntimed =
    (mode.untimed || (fresh && cur === undefined)) && !(cur !== undefined && expectsInner(cur));
  return (
    mayStartUntimed &&
    (isUntimedHead(text) ||
      (mode.untimed &&
        !mode.ascii &&
        !indented &&
        looksLikePacket(text) &&
        !NOISE.test(text) &&
        readPrompt(text) === undefined))
  );
}

function newBlock(head: Head | undefined, text: string, line: number): Block {
  return {
    line,
    head: head === undefined ? text : head.rest,
    ...(head?.number === undefined ? {} : { number: head.number }),
    timeNs: head?.timeNs ?? 0n,
    kind: head?.kind ?? "none",
    cont: [],
    payload: false,
  };
}

/**
 * Parses tcpdump text, line by line, into packets. `lines` may be any (async) iterable of lines
 * without their newline; `file` names the input in diagnostics.
 */
export async function* parseTcpdumpLines(
  lines: AsyncIterable<string> | Iterable<string>,
  file: string,
  diag: DiagnosticSink,
): AsyncGenerator<Packet> {
  const counts: TextCounts = { lineNo: 0, index: 0, unparsed: 0, named: 0, firstNamedLine: 0 };
  let cur: Block | undefined;
  const times = new RelativeTimes(modeOf(undefined));
  /** No packet yet since the start or the last prompt: the next may start without a time. */
  let fresh = true;
  const bases = new Map<string, number>();
  const finish = (b: Block): Packet => {
    counts.index++;
    const p = blockToPacket(b, b.number ?? counts.index, file, diag);
    if (isNamedPacket(p)) {
      counts.named++;
      if (counts.firstNamedLine === 0) counts.firstNamedLine = b.line;
    }
    return absoluteSequence(p, bases);
  };
  for await (const raw of lines) {
    const lineNo = ++counts.lineNo;
    const mode = times.mode;
    // A paste often keeps the ^C that stopped tcpdump in front of its summary line.
    const text = raw.startsWith("^C") ? raw.slice(2) : raw;
    const indented = text.startsWith(" ") || text.startsWith("\t");
    const head = parseHead(text);
    const untimedHead = head === undefined && startsUntimedPacket(text, indented, mode, fresh, cur);
    if (head !== undefined || untimedHead) {
      if (cur !== undefined) {
        const p = finish(cur);
        // The common case without a generator per packet: nothing held, no relative time.
        if (times.pending.length === 0 && p.timeBasis !== "since-first") yield p;
        else yield* times.release(p);
      }
      if (head === undefined || (head.kind === "none" && fresh)) mode.untimed = true;
      fresh = false;
      cur = newBlock(head, text, lineNo);
      continue;
    }
    if (NOISE.test(text)) continue;
    if (!indented) {
      // A -A payload line may look like a prompt; only one that runs tcpdump ends the packet.
      const prompt = cur?.payload && !text.includes("tcpdump") ? undefined : readPrompt(text);
      if (prompt !== undefined && !(mode.ascii && cur !== undefined && !prompt.command)) {
        if (cur !== undefined) yield* times.release(finish(cur));
        yield* times.release(undefined);
        cur = undefined;
        fresh = true;
        if (prompt.command !== undefined) {
          times.restart(modeOf(prompt.command));
          diag(commandNote(prompt.command, file, lineNo, text));
        }
        continue;
      }
    }
    if (cur?.payload) continue;
    if (cur !== undefined && (indented || expectsInner(cur))) {
      if (cur.cont.length < MAX_CONTINUATION) cur.cont.push(text);
      continue;
    }
    // -A: the packet's bytes follow its text; its network header starts them at column 0.
    if (cur !== undefined && (mode.ascii || startsAsciiPayload(cur, text))) {
      mode.ascii = true;
      cur.payload = true;
      continue;
    }
    reportUnparsed(counts, file, text, diag);
  }
  if (cur !== undefined) yield* times.release(finish(cur));
  yield* times.release(undefined);
  reportSummary(counts, times.assumedOffsets, file, diag);
}

/** What reading tcpdump text counts, for the summary diagnostics. */
interface TextCounts {
  lineNo: number;
  /** Packets read. */
  index: number;
  /** Lines that are not tcpdump output. */
  unparsed: number;
  /** Packets that name hosts or services (printed without -n), and the first one's line. */
  named: number;
  firstNamedLine: number;
}

/** A line that is not tcpdump output: reported, up to MAX_UNPARSED_REPORTS of them. */
function reportUnparsed(counts: TextCounts, file: string, text: string, diag: DiagnosticSink) {
  counts.unparsed++;
  if (counts.unparsed <= MAX_UNPARSED_REPORTS) {
    const line = counts.lineNo;
    diag({
      code: "TCPDUMP_UNPARSED",
      severity: "warning",
      message: `${file}:${line}: not a line tcpdump prints (expected a packet line starting with a time or a -# number, or an indented continuation): ${JSON.stringify(text.slice(0, 80))}`,
      source: { file, line, text: text.slice(0, 200) },
    });
  }
}

/** The notes at the end: assumed offsets, names instead of numbers, more lines not read, no packet at all. */
function reportSummary(
  counts: TextCounts,
  assumedOffsets: boolean,
  file: string,
  diag: DiagnosticSink,
): void {
  const { named, firstNamedLine, unparsed, index, lineNo } = counts;
  if (assumedOffsets) {
    diag({
      code: "TCPDUMP_RELATIVE_TIMES",
      severity: "info",
      message: `${file}: times are relative (tcpdump -ttt or -ttttt) and never decrease, so they are read as time since the first packet (-ttttt); paste the tcpdump command line with the output to make it certain`,
      source: { file, line: 1 },
    });
  }
  if (named > 0) {
    diag({
      code: "TCPDUMP_NAMES",
      severity: "info",
      message: `${file}:${firstNamedLine}: ${named} packet${named === 1 ? "" : "s"} name hosts or services instead of numbering them (tcpdump printed without -n): read as IP packets with those names, but conversations and host matching need addresses; print with tcpdump -nn to include them`,
      source: { file, line: firstNamedLine },
    });
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
      message: `${file}: none of its ${lineNo} lines is tcpdump output; expected a pcap or pcapng file (tcpdump -w) or tcpdump text`,
      source: { file, line: 1 },
    });
  }
}

function commandNote(cmd: TcpdumpCommand, file: string, line: number, text: string): Diagnostic {
  const notes = [
    cmd.numeric === 0 ? "without -n: hosts and ports may be printed as names" : undefined,
    cmd.iface === undefined ? undefined : `interface ${cmd.iface}`,
    cmd.file === undefined ? undefined : `reading ${cmd.file}`,
    cmd.filter === undefined ? undefined : `filter "${cmd.filter}"`,
  ].filter((x) => x !== undefined);
  return {
    code: "TCPDUMP_COMMAND",
    severity: "info",
    message: `${file}:${line}: the output below was printed by \`${cmd.text}\`${notes.length === 0 ? "" : ` (${notes.join("; ")})`}`,
    source: { file, line, text: text.slice(0, 200) },
  };
}

function isNamedPacket(p: Packet): boolean {
  return (
    p.named !== undefined || p.arp?.senderName !== undefined || p.arp?.targetName !== undefined
  );
}

/**
 * Whether `text`, an unindented line after a packet's lines that is not tcpdump's, starts `-A`
 * output: the packet's bytes as text, from its network header (IPv4 0x45… `E`…`O`, IPv6 0x6…
 * `` ` ``…`o`, ARP 0x0001 `..`).
 */
function startsAsciiPayload(b: Block, text: string): boolean {
  if (/\bIP6 |ethertype IPv6 /.test(b.head)) return /^[`a-o]/.test(text);
  if (/\bIP |ethertype IPv4 /.test(b.head)) return /^[E-O]/.test(text);
  if (/\bARP\b/.test(b.head)) return text.startsWith("..");
  return false;
}

/**
 * tcpdump prints sequence numbers relative to the first it saw for a flow direction (the SYN's,
 * absolute) unless run with -S; this restores the absolute numbers so retransmissions compare
 * the same way as in a binary capture. Bases are remembered per flow direction. A number close
 * above the base is taken as already absolute (-S); a random ISN makes the two cases distinct.
 */
function absoluteSequence(p: Packet, bases: Map<string, number>): Packet {
  const t = p.transport;
  if (t?.kind !== "tcp" || t.seq === undefined) return p;
  const h = p.ip ?? p.named;
  if (h === undefined) return p;
  const src = p.ip?.src ?? p.named?.src ?? p.named?.srcName;
  const dst = p.ip?.dst ?? p.named?.dst ?? p.named?.dstName;
  const dir = `${src}.${t.srcService ?? t.srcPort}>${dst}.${t.dstService ?? t.dstPort}`;
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

function blockToPacket(b: Block, index: number, file: string, diag: DiagnosticSink): Packet {
  let rest = b.head.trimStart();
  let iface: string | undefined;
  let direction: Direction | undefined;
  const id = IFACE_DIR.exec(rest);
  if (id && !/^IP6?$|^ARP,?$/.test(id[1]!)) {
    iface = id[1]!;
    direction = DIRECTIONS[id[2]!];
    rest = rest.slice(id[0].length);
  } else {
    const sll = SLL_DIR.exec(rest);
    if (sll) {
      direction = DIRECTIONS[sll[1]!];
      rest = rest.slice(sll[0].length);
    }
  }
  const ctx: Cursor = { lines: b.cont, at: 0 };
  const { frame, length } = parseFrame(rest, ctx, 0);
  if (frame.ip === undefined && frame.named === undefined && frame.arp === undefined) {
    diag({
      code: "TCPDUMP_UNDECODED",
      severity: "info",
      message: `${file}:${b.line}: packet ${index} has no IP or ARP header podpath can read; it is counted without addresses`,
      source: { file, line: b.line, text: b.head.slice(0, 200) },
    });
  }
  return {
    index,
    line: b.line,
    timeNs: b.timeNs,
    ...timeFields(b.kind),
    ...(iface === undefined ? {} : { iface }),
    ...(direction === undefined ? {} : { direction }),
    ...(length === undefined ? {} : { length }),
    ...(frame satisfies Frame),
  };
}

function timeFields(kind: TimeKind): Pick<Packet, "timeOfDayOnly" | "timeBasis"> {
  switch (kind) {
    case "clock":
      return { timeOfDayOnly: true };
    case "relative":
      return { timeOfDayOnly: true, timeBasis: "since-first" };
    case "none":
      return { timeOfDayOnly: true, timeBasis: "none" };
    case "date":
    case "epoch":
      return {};
  }
}
