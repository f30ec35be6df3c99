/**
 * @module snapshot/tar — reads the regular files out of a (gzipped) tar archive, so a snapshot can
 * be handed over as one `.tar.gz`. Written here because a snapshot only needs ustar/pax/GNU
 * regular files and names; npm's tar packages bring writers, streams and platform handling we do
 * not need. Bad archives become diagnostics naming the byte offset, and files before the damage
 * are kept.
 */
import { constants, gunzipSync } from "node:zlib";
import type { Diagnostic } from "../model/types.ts";

export interface TarEntry {
  readonly path: string;
  readonly data: Uint8Array;
}

/** What an archive may unpack to, so a gzip bomb costs a bounded moment, not the machine. */
export interface ArchiveLimits {
  /** Bytes the whole archive may unpack to. */
  readonly maxUnpackedBytes: number;
  /** Unpacked bytes per packed byte, once past `ratioFrom` (zeros pack a thousandfold). */
  readonly maxRatio: number;
  readonly ratioFrom: number;
  /** Regular files the archive may hold. */
  readonly maxEntries: number;
}

/**
 * 1 GiB unpacked (a snapshot of a 5,000-node cluster's dumps stays well under it; bigger ones are
 * handed over as a folder, which is read file by file); 200 unpacked bytes per packed byte past
 * 64 MiB (kube-proxy dumps, the most repetitive real evidence, pack about 20-fold); 100,000 files.
 */
export const ARCHIVE_LIMITS: ArchiveLimits = {
  maxUnpackedBytes: 1 << 30,
  maxRatio: 200,
  ratioFrom: 64 << 20,
  maxEntries: 100_000,
};

/** The unpacked size a packed archive of `packed` bytes may reach under `limits`. */
export function unpackedBudget(packed: number, limits: ArchiveLimits = ARCHIVE_LIMITS): number {
  return Math.min(limits.maxUnpackedBytes, Math.max(limits.ratioFrom, packed * limits.maxRatio));
}

const BLOCK = 512;

function cString(buf: Uint8Array, start: number, len: number): string {
  let end = start;
  while (end < start + len && buf[end] !== 0) end++;
  return new TextDecoder().decode(buf.subarray(start, end));
}

function octal(buf: Uint8Array, start: number, len: number): number | undefined {
  // GNU base-256 for large sizes: high bit of the first byte set
  if ((buf[start]! & 0x80) !== 0) {
    let v = 0;
    for (let i = start + 1; i < start + len; i++) v = v * 256 + buf[i]!;
    return v;
  }
  const text = cString(buf, start, len).trim();
  if (text === "") return 0;
  if (!/^[0-7]+$/.test(text)) return undefined;
  return Number.parseInt(text, 8);
}

/** Parses pax extended header records (`LEN key=value\n`) for `path`. */
function paxPath(data: Uint8Array): string | undefined {
  const text = new TextDecoder().decode(data);
  for (const rec of text.split("\n")) {
    const m = /^\d+ path=(.*)$/.exec(rec);
    if (m) return m[1];
  }
  return undefined;
}

/**
 * Decompresses as much of a damaged gzip stream as inflates cleanly. A sync flush returns the
 * output of a stream cut short instead of failing; damage inside the stream fails at the damaged
 * block, and inflating is monotone in the prefix length, so the longest prefix that inflates is
 * found by bisection (the error path only: about log2(size) inflations).
 */
function gunzipPrefix(bytes: Uint8Array, budget: number): { data: Uint8Array; at: number } {
  const inflate = (n: number): Uint8Array | undefined => {
    try {
      return gunzipSync(bytes.subarray(0, n), {
        finishFlush: constants.Z_SYNC_FLUSH,
        maxOutputLength: budget,
      });
    } catch {
      return undefined;
    }
  };
  const whole = inflate(bytes.length);
  if (whole) return { data: whole, at: bytes.length };
  let lo = 10; // the gzip header
  let hi = bytes.length;
  let best: Uint8Array = new Uint8Array(0);
  while (lo < hi) {
    const mid = Math.floor((lo + hi + 1) / 2);
    const out = inflate(mid);
    if (out) {
      best = out;
      lo = mid;
    } else hi = mid - 1;
  }
  return { data: best, at: lo };
}

/**
 * Lists the regular files of a tar archive (gzip detected by magic). Never throws on bad input.
 * @example readTar(fs.readFileSync("snap.tar.gz"), "snap.tar.gz").entries.map((e) => e.path)
 */
export function readTar(
  bytes: Uint8Array,
  file: string,
  limits: ArchiveLimits = ARCHIVE_LIMITS,
): { entries: TarEntry[]; diagnostics: Diagnostic[] } {
  const diagnostics: Diagnostic[] = [];
  let buf = bytes;
  const budget = unpackedBudget(bytes.length, limits);
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
    try {
      // one attempt, stopped by zlib itself at the budget
      buf = gunzipSync(bytes, { maxOutputLength: budget });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE") {
        diagnostics.push({
          code: "ARCHIVE_TOO_LARGE",
          severity: "error",
          message: `${file}: unpacks to more than ${budget} bytes from ${bytes.length} (the limit: ${limits.maxUnpackedBytes} bytes, and ${limits.maxRatio} unpacked bytes per packed byte past ${limits.ratioFrom}); stopped there, nothing read. A real snapshot this big: unpack it (tar -xzf) and give the folder`,
          source: { file, line: 0 },
        });
        return { entries: [], diagnostics };
      }
      // keep what inflates before the damage: the files in it are still read below
      const kept = gunzipPrefix(bytes, budget);
      buf = kept.data;
      diagnostics.push({
        code: "ARCHIVE_GZIP",
        severity: "error",
        message: `${file}: byte ${kept.at}: the gzip stream is damaged (${(e as Error).message}); expected a .tar.gz written by tar -czf; the ${buf.length} bytes unpacked before the damage are read`,
        source: { file, line: 0 },
      });
    }
  }
  const entries: TarEntry[] = [];
  let off = 0;
  let longName: string | undefined;
  let stopped = false;
  while (off + BLOCK <= buf.length) {
    const header = buf.subarray(off, off + BLOCK);
    if (header.every((b) => b === 0)) {
      stopped = true; // end-of-archive marker
      break;
    }
    const size = octal(header, 124, 12);
    const magicOk = cString(header, 257, 6).startsWith("ustar") || cString(header, 257, 8) === "";
    if (size === undefined || !magicOk) {
      diagnostics.push({
        code: "ARCHIVE_HEADER",
        severity: "error",
        message: `${file}: byte ${off}: not a tar header (expected a ustar header with an octal size); files after it are not read`,
        source: { file, line: 0 },
      });
      stopped = true;
      break;
    }
    const type = String.fromCharCode(header[156] || 48);
    const dataStart = off + BLOCK;
    const dataEnd = dataStart + size;
    if (dataEnd > buf.length) {
      diagnostics.push({
        code: "ARCHIVE_TRUNCATED",
        severity: "error",
        message: `${file}: byte ${off}: the archive ends inside ${JSON.stringify(cString(header, 0, 100))} (expected ${size} bytes of data)`,
        source: { file, line: 0 },
      });
      stopped = true;
      break;
    }
    const data = buf.subarray(dataStart, dataEnd);
    const prefix = cString(header, 345, 155);
    const name = cString(header, 0, 100);
    let path = longName ?? (prefix ? `${prefix}/${name}` : name);
    if (type === "L") longName = cString(data, 0, data.length);
    else if (type === "x") longName = paxPath(data);
    else {
      longName = undefined;
      if (type === "0" || type === "7") {
        if (entries.length >= limits.maxEntries) {
          diagnostics.push({
            code: "ARCHIVE_TOO_MANY_FILES",
            severity: "error",
            message: `${file}: byte ${off}: more than ${limits.maxEntries} files; the first ${limits.maxEntries} are read`,
            source: { file, line: 0 },
          });
          stopped = true;
          break;
        }
        path = path.replace(/^\.\//, "");
        entries.push({ path, data });
      }
    }
    off = dataStart + Math.ceil(size / BLOCK) * BLOCK;
  }
  if (!stopped && off < buf.length && buf.subarray(off).some((b) => b !== 0)) {
    diagnostics.push({
      code: "ARCHIVE_TRUNCATED",
      severity: "error",
      message: `${file}: byte ${off}: the archive ends inside a tar header (expected ${BLOCK} bytes, the file has ${buf.length - off})`,
      source: { file, line: 0 },
    });
  }
  return { entries, diagnostics };
}
