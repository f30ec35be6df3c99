/**
 * @module capture/pcap — the classic pcap container (tcpdump -w): microsecond and nanosecond
 * magic in both byte orders, link type with libpcap's upper FCS bits masked off, streaming
 * record by record in constant memory.
 */
import type { ByteWindow } from "./byte-window.ts";
import { type DiagnosticSink, MAX_RECORD, newRawRecord, type RecordVisitor } from "./raw-record.ts";

export const PCAP_MAGIC = {
  micro: 0xa1b2c3d4,
  nano: 0xa1b23c4d,
} as const;

/** Whether the first four bytes are a pcap magic in either byte order. */
export function isPcapMagic(b: Uint8Array): boolean {
  if (b.length < 4) return false;
  const be = ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
  const le = ((b[3]! << 24) | (b[2]! << 16) | (b[1]! << 8) | b[0]!) >>> 0;
  return (
    be === PCAP_MAGIC.micro ||
    be === PCAP_MAGIC.nano ||
    le === PCAP_MAGIC.micro ||
    le === PCAP_MAGIC.nano
  );
}

export interface PcapHeader {
  readonly littleEndian: boolean;
  readonly nanosecond: boolean;
  readonly versionMajor: number;
  readonly versionMinor: number;
  readonly snapLen: number;
  readonly linkType: number;
}

/**
 * Reads the records of a pcap file from `win` (positioned at the file start), calling `visit` for
 * each. Damage (truncation, impossible lengths) is reported to `diag` with its byte offset and
 * reading stops there; every record before it has been visited. Returns the header, or undefined
 * when even the header is unreadable.
 */
export async function scanPcap(
  win: ByteWindow,
  file: string,
  visit: RecordVisitor,
  diag: DiagnosticSink,
): Promise<PcapHeader | undefined> {
  if (!(await win.ensure(24))) {
    diag({
      code: "PCAP_TRUNCATED",
      severity: "error",
      message: `${file}: the pcap file header needs 24 bytes, the file has ${win.available}`,
      source: { file, line: 0 },
    });
    return undefined;
  }
  const b = win.buf;
  const magicBE = b.readUInt32BE(win.pos);
  const le = magicBE !== PCAP_MAGIC.micro && magicBE !== PCAP_MAGIC.nano;
  const u32 = le ? (o: number) => b.readUInt32LE(o) : (o: number) => b.readUInt32BE(o);
  const u16 = le ? (o: number) => b.readUInt16LE(o) : (o: number) => b.readUInt16BE(o);
  const magic = u32(win.pos);
  const header: PcapHeader = {
    littleEndian: le,
    nanosecond: magic === PCAP_MAGIC.nano,
    versionMajor: u16(win.pos + 4),
    versionMinor: u16(win.pos + 6),
    snapLen: u32(win.pos + 16),
    // libpcap pcap-common.h: LT_LINKTYPE(x) = x & 0xFFFF; upper bits carry the FCS length.
    linkType: u32(win.pos + 20) & 0xffff,
  };
  win.pos += 24;
  const rec = newRawRecord();
  rec.tsSplit = true;
  rec.unitsPerSecond = header.nanosecond ? 1_000_000_000n : 1_000_000n;
  rec.linkType = header.linkType;
  // libpcap accepts caplen up to max(snaplen, 256 KiB) (sf-pcap.c); beyond that the record
  // header is garbage and nothing after it can be trusted.
  const maxCap = Math.min(MAX_RECORD, Math.max(header.snapLen, 262144));
  let index = 0;
  for (;;) {
    if (win.available < 16 && !(await win.ensure(16))) {
      if (win.available > 0) {
        diag({
          code: "PCAP_TRUNCATED",
          severity: "error",
          message: `${file}: record ${index + 1} at byte offset ${win.offset} is cut off: its 16-byte header has only ${win.available} bytes`,
          source: { file, line: index + 1 },
        });
      }
      return header;
    }
    const buf = win.buf;
    const p = win.pos;
    const capLen = le ? buf.readUInt32LE(p + 8) : buf.readUInt32BE(p + 8);
    if (capLen > maxCap) {
      diag({
        code: "PCAP_BAD_LENGTH",
        severity: "error",
        message: `${file}: record ${index + 1} at byte offset ${win.offset} claims ${capLen} captured bytes, more than the snapshot length ${header.snapLen} allows; expected at most ${maxCap}. Reading stops here`,
        source: { file, line: index + 1 },
      });
      return header;
    }
    if (win.available < 16 + capLen && !(await win.ensure(16 + capLen))) {
      diag({
        code: "PCAP_TRUNCATED",
        severity: "error",
        message: `${file}: record ${index + 1} at byte offset ${win.offset} is cut off: expected ${capLen} packet bytes, the file has ${win.available - 16}`,
        source: { file, line: index + 1 },
      });
      return header;
    }
    const q = win.pos;
    const wb = win.buf;
    index++;
    rec.index = index;
    rec.offset = win.base + q;
    rec.buf = wb;
    rec.start = q + 16;
    rec.capLen = capLen;
    if (le) {
      rec.tsHigh = wb.readUInt32LE(q);
      rec.tsLow = wb.readUInt32LE(q + 4);
      rec.origLen = wb.readUInt32LE(q + 12);
    } else {
      rec.tsHigh = wb.readUInt32BE(q);
      rec.tsLow = wb.readUInt32BE(q + 4);
      rec.origLen = wb.readUInt32BE(q + 12);
    }
    win.pos = q + 16 + capLen;
    visit(rec);
  }
}
