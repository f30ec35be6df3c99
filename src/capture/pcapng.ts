/**
 * @module capture/pcapng — the pcapng container (tcpdump --pcapng, Wireshark): section header,
 * interface descriptions with per-interface link type, name and timestamp resolution, enhanced,
 * simple and obsolete packet blocks, several sections of either byte order. Other blocks are
 * skipped by their length. Streaming in constant memory.
 */
import type { ByteWindow } from "./byte-window.ts";
import type { Direction } from "./packet.ts";
import { type DiagnosticSink, MAX_RECORD, newRawRecord, type RecordVisitor } from "./raw-record.ts";

export const PCAPNG_SHB = 0x0a0d0d0a;
const BYTE_ORDER_MAGIC = 0x1a2b3c4d;
const BLOCK = { idb: 1, opb: 2, spb: 3, epb: 6 } as const;

export function isPcapngMagic(b: Uint8Array): boolean {
  return b.length >= 4 && b[0] === 0x0a && b[1] === 0x0d && b[2] === 0x0d && b[3] === 0x0a;
}

export interface PcapngInterface {
  readonly linkType: number;
  readonly snapLen: number;
  readonly name?: string;
  /** Timestamp units per second (if_tsresol; default 10^6). */
  readonly unitsPerSecond: bigint;
}

/** pcapng §4.2 if_tsresol: high bit clear → 10^-v seconds, set → 2^-v seconds. */
function tsresolUnits(v: number): bigint {
  return v & 0x80 ? 1n << BigInt(v & 0x7f) : 10n ** BigInt(v);
}

/**
 * Reads every packet block of a pcapng file from `win`. Block lengths that are zero, not a
 * multiple of 4 or larger than the rest of the file stop reading with a diagnostic naming the
 * byte offset (a reader that trusted them could loop or run away); packets before stay delivered.
 */
export async function scanPcapng(
  win: ByteWindow,
  file: string,
  visit: RecordVisitor,
  diag: DiagnosticSink,
): Promise<PcapngInterface[]> {
  let le = true;
  let ifaces: PcapngInterface[] = [];
  const all: PcapngInterface[] = [];
  const rec = newRawRecord();
  rec.tsSplit = false;
  let index = 0;
  let sawSection = false;
  const fail = (code: string, message: string) =>
    diag({
      code,
      severity: "error",
      message: `${file}: ${message}`,
      source: { file, line: index + 1 },
    });
  // Readers in the current section's byte order over the window's current buffer; defined once,
  // not per block (this loop runs once per packet).
  const u32 = (o: number) => (le ? win.buf.readUInt32LE(o) : win.buf.readUInt32BE(o));
  const u16 = (o: number) => (le ? win.buf.readUInt16LE(o) : win.buf.readUInt16BE(o));
  for (;;) {
    if (win.available < 12 && !(await win.ensure(12))) {
      if (win.available > 0)
        fail(
          "PCAPNG_TRUNCATED",
          `block at byte offset ${win.offset} is cut off: a block header needs 12 bytes, the file has ${win.available}`,
        );
      return all;
    }
    let b = win.buf;
    let p = win.pos;
    const blockOffset = win.offset;
    const typeRaw = b.readUInt32LE(p);
    if (typeRaw === PCAPNG_SHB) {
      // The byte-order magic decides how this section (including this block's length) reads.
      const bom = b.readUInt32LE(p + 8);
      if (bom === BYTE_ORDER_MAGIC) le = true;
      else if (b.readUInt32BE(p + 8) === BYTE_ORDER_MAGIC) le = false;
      else {
        fail(
          "PCAPNG_BAD_MAGIC",
          `section header at byte offset ${blockOffset} has byte-order magic 0x${bom.toString(16)}; expected 0x1a2b3c4d`,
        );
        return all;
      }
      ifaces = [];
      sawSection = true;
    } else if (!sawSection) {
      fail("PCAPNG_BAD_MAGIC", `expected a section header block at byte offset ${blockOffset}`);
      return all;
    }
    const type = u32(p);
    const len = u32(p + 4);
    if (len < 12 || len % 4 !== 0 || len > MAX_RECORD) {
      fail(
        "PCAPNG_BAD_LENGTH",
        `block of type 0x${type.toString(16)} at byte offset ${blockOffset} has length ${len}; expected a multiple of 4 between 12 and ${MAX_RECORD}. Reading stops here`,
      );
      return all;
    }
    if (win.available < len && !(await win.ensure(len))) {
      fail(
        "PCAPNG_TRUNCATED",
        `block of type 0x${type.toString(16)} at byte offset ${blockOffset} is cut off: expected ${len} bytes, the file has ${win.available}`,
      );
      return all;
    }
    b = win.buf;
    p = win.pos;
    const bodyEnd = p + len - 4;
    if (u32(bodyEnd) !== len) {
      fail(
        "PCAPNG_BAD_LENGTH",
        `block at byte offset ${blockOffset}: trailing length ${u32(bodyEnd)} differs from leading length ${len}. Reading stops here`,
      );
      return all;
    }
    win.pos = p + len;
    if (type === BLOCK.idb) {
      if (len < 20) {
        fail("PCAPNG_BAD_BLOCK", `interface block at byte offset ${blockOffset} is too short`);
        return all;
      }
      let name: string | undefined;
      let units = 1_000_000n;
      for (const [code, start, olen] of options(p + 16, bodyEnd, u16)) {
        if (code === 2) name = b.toString("utf8", start, start + olen).replace(/\0+$/, "");
        else if (code === 9 && olen >= 1) units = tsresolUnits(b[start]!);
      }
      const iface: PcapngInterface = {
        linkType: u16(p + 8),
        snapLen: u32(p + 12),
        unitsPerSecond: units,
        ...(name === undefined ? {} : { name }),
      };
      ifaces.push(iface);
      all.push(iface);
      continue;
    }
    if (type !== BLOCK.epb && type !== BLOCK.spb && type !== BLOCK.opb) continue;
    let ifId = 0;
    let capLen: number;
    let origLen: number;
    let dataStart: number;
    let direction: Direction | undefined;
    if (type === BLOCK.spb) {
      if (len < 16) {
        fail("PCAPNG_BAD_BLOCK", `simple packet block at byte offset ${blockOffset} is too short`);
        return all;
      }
      origLen = u32(p + 8);
      dataStart = p + 12;
      const snap = ifaces[0]?.snapLen ?? 0;
      capLen = Math.min(origLen, bodyEnd - dataStart, snap === 0 ? origLen : snap);
      rec.tsHigh = 0;
      rec.tsLow = 0;
    } else {
      // EPB: interface id (4); obsolete packet block: interface id (2) + drops (2). Both 28 bytes.
      const epb = type === BLOCK.epb;
      if (len < 32) {
        fail("PCAPNG_BAD_BLOCK", `packet block at byte offset ${blockOffset} is too short`);
        return all;
      }
      ifId = epb ? u32(p + 8) : u16(p + 8);
      rec.tsHigh = u32(p + 12);
      rec.tsLow = u32(p + 16);
      capLen = u32(p + 20);
      origLen = u32(p + 24);
      dataStart = p + 28;
      if (dataStart + capLen > bodyEnd) {
        fail(
          "PCAPNG_BAD_LENGTH",
          `packet block at byte offset ${blockOffset} claims ${capLen} captured bytes but holds ${bodyEnd - dataStart}. Reading stops here`,
        );
        return all;
      }
      // epb_flags (pcapng §4.3.1): bits 0-1 are the direction, 01 inbound, 10 outbound. Options
      // are walked inline: most packet blocks have none, and this runs once per packet.
      let o = dataStart + ((capLen + 3) & ~3);
      while (o + 4 <= bodyEnd) {
        const code = u16(o);
        const olen = u16(o + 2);
        if (code === 0 || o + 4 + olen > bodyEnd) break;
        if (code === 2 && olen >= 4) {
          const d = u32(o + 4) & 3;
          direction = d === 1 ? "in" : d === 2 ? "out" : undefined;
        }
        o += 4 + ((olen + 3) & ~3);
      }
    }
    const iface = ifaces[ifId];
    if (iface === undefined) {
      fail(
        "PCAPNG_BAD_BLOCK",
        `packet block at byte offset ${blockOffset} names interface ${ifId}, but the section describes ${ifaces.length}`,
      );
      continue;
    }
    index++;
    rec.index = index;
    rec.offset = blockOffset;
    rec.buf = b;
    rec.start = dataStart;
    rec.capLen = capLen;
    rec.origLen = origLen;
    rec.linkType = iface.linkType;
    rec.unitsPerSecond = iface.unitsPerSecond;
    rec.iface = iface.name;
    rec.direction = direction;
    visit(rec);
  }
}

/** pcapng §3.5 options: code(2) length(2) value padded to 32 bits; opt_endofopt (0) ends them. */
function* options(
  start: number,
  end: number,
  u16: (o: number) => number,
): Generator<[number, number, number]> {
  let o = start;
  while (o + 4 <= end) {
    const code = u16(o);
    const len = u16(o + 2);
    if (code === 0) return;
    if (o + 4 + len > end) return;
    yield [code, o + 4, len];
    o += 4 + ((len + 3) & ~3);
  }
}
