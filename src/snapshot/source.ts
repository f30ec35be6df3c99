/**
 * @module snapshot/source — the one place that reads a snapshot from disk: a folder, or a
 * `.tar.gz` of one. Everything after this works on relative paths and file contents.
 */
import { readdirSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import type { Diagnostic } from "../model/types.ts";
import { decodeText } from "./decode.ts";
import { readRegularBytes, readRegularText, reasonOf } from "./input-file.ts";
import { ARCHIVE_LIMITS, readTar } from "./tar.ts";

export { decodeText } from "./decode.ts";

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
 * A file on disk as text ({@link decodeText}); FIFOs, sockets and devices are refused
 * ({@link InputFileError}), never opened for reading.
 */
export function readTextFile(path: string): string {
  return readRegularText(path);
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
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new SnapshotOpenError(
      `${path}: ${code === "ENOENT" ? "no such file or folder" : reasonOf(e)}`,
    );
  }
  if (st.isDirectory()) {
    const paths: string[] = [];
    walk(path, path, 0, paths);
    paths.sort();
    return {
      name: path,
      paths,
      readText: (rel) => readRegularText(join(path, rel), rel),
      readBytes: (rel) => readRegularBytes(join(path, rel), rel),
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
  let packed: Buffer;
  try {
    packed = readRegularBytes(path);
  } catch (e) {
    throw new SnapshotOpenError((e as Error).message);
  }
  const { entries, diagnostics } = readTar(packed, path);
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
