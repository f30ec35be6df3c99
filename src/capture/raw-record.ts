/**
 * @module capture/raw-record — one captured record as a container reader hands it over, still
 * undecoded: where its bytes are in the reader's buffer, its timestamp parts, link type and
 * interface. Both pcap and pcapng readers fill the same reused object, so a fast scan allocates
 * nothing per packet.
 */
import type { Diagnostic } from "../model/types.ts";
import type { Direction } from "./packet.ts";

export interface RawRecord {
  /** 1-based record number (what `tcpdump -#` prints). */
  index: number;
  /** Byte offset of the record (pcap record header, pcapng block) in the file. */
  offset: number;
  /** The buffer holding the packet bytes: `buf[start .. start+capLen)`. Valid only during the visit. */
  buf: Buffer;
  start: number;
  capLen: number;
  origLen: number;
  /** Timestamp = tsHigh * 2^32 + tsLow units (pcapng), or tsHigh seconds + tsLow units (pcap). */
  tsHigh: number;
  tsLow: number;
  /** True for pcap (seconds + fraction), false for pcapng (one 64-bit count). */
  tsSplit: boolean;
  /** Timestamp units per second (10^6, 10^9, or a power of two for pcapng). */
  unitsPerSecond: bigint;
  linkType: number;
  /** pcapng interface name (if_name), when the capture carries it. */
  iface: string | undefined;
  /** pcapng epb_flags inbound/outbound, when present. */
  direction: Direction | undefined;
}

export function newRawRecord(): RawRecord {
  return {
    index: 0,
    offset: 0,
    buf: Buffer.alloc(0),
    start: 0,
    capLen: 0,
    origLen: 0,
    tsHigh: 0,
    tsLow: 0,
    tsSplit: true,
    unitsPerSecond: 1_000_000n,
    linkType: 1,
    iface: undefined,
    direction: undefined,
  };
}

const NS = 1_000_000_000n;

/** The record's time in nanoseconds since the epoch. */
export function rawTimeNs(r: RawRecord): bigint {
  if (r.tsSplit) {
    const frac = BigInt(r.tsLow);
    const fracNs = r.unitsPerSecond === NS ? frac : (frac * NS) / r.unitsPerSecond;
    return BigInt(r.tsHigh) * NS + fracNs;
  }
  const units = (BigInt(r.tsHigh) << 32n) | BigInt(r.tsLow);
  return r.unitsPerSecond === NS ? units : (units * NS) / r.unitsPerSecond;
}

/** Called for every record; the record object is reused, so copy what you keep. */
export type RecordVisitor = (r: RawRecord) => void;
export type DiagnosticSink = (d: Diagnostic) => void;

/** Largest record podpath accepts: far above any real snapshot length (libpcap: 256 KiB). */
export const MAX_RECORD = 64 * 1024 * 1024;
