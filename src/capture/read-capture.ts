/**
 * @module capture/read-capture — the one entry point for captures: detects pcap and pcapng by
 * magic and takes anything else as tcpdump text, then streams decoded packets. Damage becomes a
 * diagnostic (byte offset or line); every packet before it is still delivered.
 *
 * @example
 * const cap = readCapture("captures/node.pcap");
 * for await (const p of cap) console.log(p.index, p.ip?.src);
 * cap.diagnostics; // filled while reading
 */
import { basename } from "node:path";
import { StringDecoder } from "node:string_decoder";
import type { Diagnostic } from "../model/types.ts";
import { ByteWindow, type CaptureInput } from "./byte-window.ts";
import { decodeLink, isKnownLinkType } from "./decode.ts";
import type { Packet } from "./packet.ts";
import { isPcapMagic, scanPcap } from "./pcap.ts";
import { isPcapngMagic, scanPcapng } from "./pcapng.ts";
import { type RawRecord, rawTimeNs } from "./raw-record.ts";
import { parseTcpdumpLines } from "./tcpdump-text.ts";

export type CaptureFormat = "pcap" | "pcapng" | "tcpdump-text";

export interface ReadCaptureOptions {
  /** The file name used in diagnostics (default: the path given, or "capture"). */
  readonly file?: string;
  /** Called for every diagnostic as it happens (they are also collected in `diagnostics`). */
  readonly onDiagnostic?: (d: Diagnostic) => void;
}

/** Packets as an async iterable, plus what went wrong and what the input was. */
export interface CaptureStream extends AsyncIterable<Packet> {
  readonly diagnostics: Diagnostic[];
  /** Known once iteration has started. */
  readonly format: CaptureFormat | undefined;
}

/** Detects the format from the first bytes. */
export function detectFormat(head: Uint8Array): CaptureFormat {
  if (isPcapngMagic(head)) return "pcapng";
  if (isPcapMagic(head)) return "pcap";
  return "tcpdump-text";
}

/** Builds a Packet from a raw record (the record is reused by the reader; this copies). */
export function decodeRecord(r: RawRecord): Packet {
  const { frame, direction, ifindex } = decodeLink(r.buf, r.start, r.start + r.capLen, r.linkType);
  const dir = r.direction ?? direction;
  const iface = r.iface ?? (ifindex === undefined ? undefined : `ifindex ${ifindex}`);
  return {
    index: r.index,
    offset: r.offset,
    timeNs: rawTimeNs(r),
    linkType: r.linkType,
    length: r.origLen,
    capturedLength: r.capLen,
    ...(iface === undefined ? {} : { iface }),
    ...(dir === undefined ? {} : { direction: dir }),
    ...frame,
  };
}

/**
 * Reads a capture file (path) or its bytes. Streaming: constant memory whatever the size.
 * Packets carry their record's byte offset (binary) or text line (tcpdump text).
 */
export function readCapture(input: CaptureInput, opts: ReadCaptureOptions = {}): CaptureStream {
  const file = opts.file ?? (typeof input === "string" ? input : "capture");
  const diagnostics: Diagnostic[] = [];
  let format: CaptureFormat | undefined;
  const sink = (d: Diagnostic) => {
    diagnostics.push(d);
    opts.onDiagnostic?.(d);
  };
  async function* packets(): AsyncGenerator<Packet> {
    const win = await ByteWindow.open(input);
    try {
      await win.ensure(4);
      format = detectFormat(win.buf.subarray(win.pos, win.end));
      if (format === "tcpdump-text") {
        await win.ensure(512);
        const head = win.buf.subarray(win.pos, Math.min(win.end, win.pos + 512));
        // PowerShell's `>` writes UTF-16LE with a byte-order mark.
        const utf16 = head[0] === 0xff && head[1] === 0xfe;
        if (utf16) {
          yield* parseTcpdumpLines(textLines(win, "utf16le"), file, sink);
          return;
        }
        if (head.includes(0)) {
          const hex = [...head.subarray(0, 4)].map((x) => x.toString(16).padStart(2, "0")).join("");
          sink({
            code: "CAPTURE_UNKNOWN_FORMAT",
            severity: "error",
            message: `${file}: byte offset 0: magic 0x${hex} is neither pcap (a1b2c3d4, a1b23c4d, either byte order) nor pcapng (0a0d0d0a), and the file is binary, not tcpdump text`,
            source: { file, line: 0 },
          });
          return;
        }
        yield* parseTcpdumpLines(textLines(win), file, sink);
        return;
      }
      const batch: Packet[] = [];
      const warned = new Set<number>();
      const visit = (r: RawRecord) => {
        if (!isKnownLinkType(r.linkType) && !warned.has(r.linkType)) {
          warned.add(r.linkType);
          sink({
            code: "CAPTURE_UNKNOWN_LINKTYPE",
            severity: "warning",
            message: `${file}: link type ${r.linkType} (record ${r.index}, byte offset ${r.offset}) is not one podpath decodes; its packets are counted without addresses`,
            source: { file, line: r.index },
          });
        }
        batch.push(decodeRecord(r));
      };
      // The scanner calls back synchronously and reads the next chunk only once the packets of
      // the previous one have been taken (backpressure: at most two chunks' packets in memory).
      let wakeProducer: (() => void) | undefined;
      let wakeConsumer: (() => void) | undefined;
      win.beforeRead = () => {
        if (batch.length === 0) return Promise.resolve();
        wakeConsumer?.();
        return new Promise<void>((r) => {
          wakeProducer = r;
        });
      };
      let done = false;
      let failure: unknown;
      const scan =
        format === "pcap" ? scanPcap(win, file, visit, sink) : scanPcapng(win, file, visit, sink);
      scan.then(
        () => {
          done = true;
          wakeConsumer?.();
        },
        (e: unknown) => {
          failure = e ?? new Error("capture read failed");
          done = true;
          wakeConsumer?.();
        },
      );
      for (;;) {
        if (batch.length > 0) {
          const items = batch.splice(0, batch.length);
          const w = wakeProducer;
          wakeProducer = undefined;
          w?.();
          yield* items;
          continue;
        }
        if (failure !== undefined) throw failure;
        if (done) break;
        await new Promise<void>((r) => {
          wakeConsumer = r;
        });
        wakeConsumer = undefined;
      }
    } finally {
      await win.close();
    }
  }
  return {
    diagnostics,
    get format() {
      return format;
    },
    [Symbol.asyncIterator]: () => packets(),
  };
}

/** Splits the window's bytes into lines, streaming; keeps the file's own line numbering. */
async function* textLines(
  win: ByteWindow,
  encoding: "utf8" | "utf16le" = "utf8",
): AsyncGenerator<string> {
  let carry = "";
  const decoder = new StringDecoder(encoding);
  let first = true;
  for (;;) {
    if (win.available === 0 && !(await win.ensure(1))) break;
    let chunk = decoder.write(win.buf.subarray(win.pos, win.end));
    if (first && chunk.charCodeAt(0) === 0xfeff) chunk = chunk.slice(1);
    first = false;
    win.pos = win.end;
    const parts = (carry + chunk).split("\n");
    carry = parts.pop() ?? "";
    for (const l of parts) yield l.endsWith("\r") ? l.slice(0, -1) : l;
  }
  if (carry !== "") yield carry;
}

/** A display name for a capture path: the file name. */
export function captureName(path: string): string {
  return basename(path);
}
