/**
 * @module snapshot/input-file — opening a file the user named (a snapshot's file, a dump given with
 * `--iptables`, a config given as FILE) without ever blocking on or reading a special file: a FIFO,
 * socket or device is refused with a message naming it, before anything is read (the open itself
 * does not wait for a FIFO's writer). File-system errors (no such file, a directory, a name too
 * long, no permission) become an {@link InputFileError} with a plain sentence, never a stack trace.
 */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats, statSync } from "node:fs";
import { decodeText } from "./decode.ts";

/** A named file that cannot be read as one: a user's mistake, said in one line (exit 2). */
export class InputFileError extends Error {
  override readonly name = "InputFileError";
  readonly code = "ERR_INPUT_FILE";
}

/**
 * The largest text file read whole (a JavaScript string holds at most about 2^29 characters);
 * bigger files are refused with the limit in the message. Cluster-sized object lists in a
 * snapshot are streamed instead (snapshot/json-list-stream).
 */
export const MAX_TEXT_INPUT_BYTES = 512 * 1024 * 1024;

/** Files at least this big are read through one buffer kept for the next. */
const SCRATCH_FROM = 1 << 20;
let scratch: Buffer | undefined;

/** What a file that is not a regular one is, in words. */
export function kindOf(st: Stats): string {
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a FIFO (named pipe)";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  if (st.isSymbolicLink()) return "a symbolic link";
  return "not a regular file";
}

/** A plain sentence for a file-system error code. */
export function reasonOf(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  switch (err.code) {
    case "ENOENT":
      return "no such file";
    case "EISDIR":
      return "is a directory";
    case "ENOTDIR":
      return "a part of the path is not a directory";
    case "ENAMETOOLONG":
      return "the name is too long";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "ELOOP":
      return "too many symbolic links";
    case "ERR_FS_FILE_TOO_LARGE":
      return "larger than 2 GiB";
    default:
      return err.code ? `${err.code}` : (err.message ?? String(e));
  }
}

/**
 * Opens `path` for reading when it is a regular file, with its size; throws
 * {@link InputFileError} otherwise (the file is closed again). `what` names it in the message
 * ("the iptables dump", "nodes/n1/sysctl.txt").
 */
export function openRegular(path: string, what = path): { fd: number; size: number } {
  let fd: number;
  try {
    // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    // a socket cannot be opened at all (ENXIO): say what it is
    let st: Stats | undefined;
    try {
      st = statSync(path, { throwIfNoEntry: false });
    } catch {
      st = undefined;
    }
    if (st !== undefined && !st.isFile() && !st.isDirectory()) {
      throw new InputFileError(`cannot read ${what}: ${kindOf(st)}, not a regular file`);
    }
    throw new InputFileError(`cannot read ${what}: ${reasonOf(e)}`);
  }
  let st: Stats;
  try {
    st = fstatSync(fd);
  } catch (e) {
    closeSync(fd);
    throw new InputFileError(`cannot read ${what}: ${reasonOf(e)}`);
  }
  if (!st.isFile()) {
    closeSync(fd);
    throw new InputFileError(
      `cannot read ${what}: ${st.isDirectory() ? "is a directory" : `${kindOf(st)}, not a regular file`}`,
    );
  }
  return { fd, size: st.size };
}

/**
 * A regular file's bytes, read to the size it had when opened. Big files are read into one
 * buffer kept for the next call, so the view returned is valid only until the next call
 * (`copy: true` returns memory of its own).
 */
function readOpened(fd: number, size: number, what: string, copy: boolean): Buffer {
  const big = !copy && size >= SCRATCH_FROM;
  let buf: Buffer;
  if (big) {
    if (scratch === undefined || scratch.length < size) scratch = Buffer.allocUnsafeSlow(size);
    buf = scratch;
  } else buf = Buffer.allocUnsafe(size);
  let off = 0;
  try {
    // a file that shrinks meanwhile is read to its end
    while (off < size) {
      const n = readSync(fd, buf, off, size - off, off);
      if (n === 0) break;
      off += n;
    }
  } catch (e) {
    throw new InputFileError(`cannot read ${what}: ${reasonOf(e)}`);
  }
  return buf.subarray(0, off);
}

/** A regular file's bytes (refusing special files and files over `maxBytes`). */
export function readRegularBytes(path: string, what = path, maxBytes?: number): Buffer {
  const { fd, size } = openRegular(path, what);
  try {
    if (maxBytes !== undefined && size > maxBytes) {
      throw new InputFileError(
        `cannot read ${what}: ${size} bytes, over the ${maxBytes}-byte limit for this input`,
      );
    }
    return readOpened(fd, size, what, true);
  } finally {
    closeSync(fd);
  }
}

/**
 * A regular file as text ({@link decodeText}: UTF-8, or UTF-16 with its byte-order mark). The big
 * ones are read through one buffer kept for the next call rather than into new memory each time
 * (a snapshot holds a dump per node, each up to tens of megabytes); the text is a copy.
 */
export function readRegularText(
  path: string,
  what = path,
  maxBytes = MAX_TEXT_INPUT_BYTES,
): string {
  const { fd, size } = openRegular(path, what);
  try {
    if (size > maxBytes) {
      throw new InputFileError(
        `cannot read ${what}: ${size} bytes, over the ${maxBytes}-byte limit for this input`,
      );
    }
    return decodeText(readOpened(fd, size, what, false));
  } finally {
    closeSync(fd);
  }
}
