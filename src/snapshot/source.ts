/**
 * @module snapshot/source — the one place that reads a snapshot from disk: a folder, or a
 * `.tar.gz` of one. Everything after this works on relative paths and file contents.
 */
import {
  closeSync,
  fstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  statSync,
} from "node:fs";
import { join, relative, sep } from "node:path";
import type { Diagnostic } from "../model/types.ts";
import { ARCHIVE_LIMITS, readTar } from "./tar.ts";

export interface SnapshotSource {
  /** How the user named it. */
  readonly name: string;
  /** Relative paths (forward slashes) of every regular file, sorted. */
  readonly paths: readonly string[];
  readText(rel: string): string;
  readBytes(rel: string): Uint8Array;
  /** A file's size in bytes, known without reading it (optional: the loader reads to learn it). */
  sizeOf?(rel: string): number;
  /** The file on disk, when the snapshot is a folder (captures are then streamed, not loaded). */
  diskPath(rel: string): string | undefined;
  readonly diagnostics: readonly Diagnostic[];
}

export class SnapshotOpenError extends Error {
  override readonly name = "SnapshotOpenError";
  readonly code = "ERR_SNAPSHOT_OPEN";
}

const MAX_DEPTH = 6;

/**
 * A file's bytes as text: UTF-8, a byte-order mark dropped, bad sequences as U+FFFD. (ASCII, which
 * every kernel dump is, takes TextDecoder's fast path; a kube-proxy node's iptables-save runs to
 * tens of megabytes.)
 */
export function decodeText(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}

/** Files at least this big are read through one buffer kept for the next. */
const SCRATCH_FROM = 1 << 20;
let scratch: Buffer | undefined;

/**
 * A file on disk as text ({@link decodeText}). A snapshot holds one dump per node, each up to
 * tens of megabytes: the big ones are read through one buffer, kept for the next, rather than
 * into new memory each time (which the system hands over page by page). The text is a copy;
 * the buffer is never seen outside.
 */
export function readTextFile(path: string): string {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    if (size < SCRATCH_FROM) return decodeText(readFileSync(fd));
    if (scratch === undefined || scratch.length < size) scratch = Buffer.allocUnsafeSlow(size);
    // read to the size it had when opened (a file that shrinks meanwhile, to its end)
    let off = 0;
    while (off < size) {
      const n = readSync(fd, scratch, off, size - off, off);
      if (n === 0) break;
      off += n;
    }
    return decodeText(scratch.subarray(0, off));
  } finally {
    closeSync(fd);
  }
}

function walk(root: string, dir: string, depth: number, out: string[]): void {
  if (depth > MAX_DEPTH) return;
  for (const ent of readdirSync(dir, { withFileTypes: true })) {
    const abs = join(dir, ent.name);
    if (ent.isDirectory()) walk(root, abs, depth + 1, out);
    else if (ent.isFile()) out.push(relative(root, abs).split(sep).join("/"));
  }
}

/**
 * Opens a snapshot. Throws {@link SnapshotOpenError} (a user mistake: the CLI prints one line) when
 * the path does not exist or is neither a folder nor a tar archive.
 */
export function openSnapshot(path: string): SnapshotSource {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch {
    throw new SnapshotOpenError(`${path}: no such file or folder`);
  }
  if (st.isDirectory()) {
    const paths: string[] = [];
    walk(path, path, 0, paths);
    paths.sort();
    return {
      name: path,
      paths,
      readText: (rel) => readTextFile(join(path, rel)),
      readBytes: (rel) => readFileSync(join(path, rel)),
      sizeOf: (rel) => statSync(join(path, rel)).size,
      diskPath: (rel) => join(path, rel),
      diagnostics: [],
    };
  }
  if (!/\.(tar\.gz|tgz|tar)$/.test(path)) {
    throw new SnapshotOpenError(`${path}: not a snapshot (expected a folder, or a .tar.gz of one)`);
  }
  // a FIFO or device named .tar.gz would block the read or never end
  if (!st.isFile()) {
    throw new SnapshotOpenError(`${path}: not a regular file (expected a .tar.gz archive)`);
  }
  if (st.size > ARCHIVE_LIMITS.maxUnpackedBytes) {
    throw new SnapshotOpenError(
      `${path}: ${st.size} bytes; archives over ${ARCHIVE_LIMITS.maxUnpackedBytes} bytes are not read (unpack it with tar -xzf and give the folder, which is read file by file)`,
    );
  }
  const { entries, diagnostics } = readTar(readFileSync(path), path);
  if (entries.length === 0 && diagnostics.length > 0) {
    // nothing could be taken out of it: say why, rather than "nothing in it is a snapshot"
    throw new SnapshotOpenError(diagnostics.map((d) => d.message).join("\n"));
  }
  // A tarball of "snap/" holds "snap/cluster/..."; strip one common top folder.
  const tops = new Set(entries.map((e) => e.path.split("/")[0]));
  const strip =
    tops.size === 1 && entries.every((e) => e.path.includes("/")) ? `${[...tops][0]}/` : "";
  const files = new Map(entries.map((e) => [e.path.slice(strip.length), e.data]));
  const get = (rel: string): Uint8Array => {
    const d = files.get(rel);
    if (!d) throw new SnapshotOpenError(`${path}: no ${rel} in the archive`);
    return d;
  };
  return {
    name: path,
    paths: [...files.keys()].sort(),
    readText: (rel) => decodeText(get(rel)),
    readBytes: get,
    sizeOf: (rel) => get(rel).length,
    diskPath: () => undefined,
    diagnostics,
  };
}
