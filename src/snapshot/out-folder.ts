/**
 * @module snapshot/out-folder — the folder a run writes its snapshot into (`collect --out`,
 * `lab run --out`): created by the run itself or found empty, locked against a second run, and
 * written without ever following a symbolic link, even one planted inside while the run writes.
 * An explicit I/O module.
 *
 * On Linux every write walks from the folder down by open directory descriptors
 * (`/proc/self/fd/N/<name>`, opened with O_NOFOLLOW|O_DIRECTORY), so swapping a subfolder for a
 * link after it was checked changes nothing; files are created with O_CREAT|O_EXCL|O_NOFOLLOW.
 */
import {
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { resolve } from "node:path";

/** The lock a run holds in its folder while it writes: `pid starttime`. */
export const LOCK_FILE = ".podpath-lock";

export type OutFolderErrorCode =
  | "ERR_OUT_IS_FILE"
  | "ERR_OUT_NOT_EMPTY"
  | "ERR_OUT_LOCKED"
  | "ERR_OUT_UNSAFE"
  | "ERR_OUT_IO";

/** A folder that cannot be written as asked; the message is one sentence for the user. */
export class OutFolderError extends Error {
  override readonly name = "OutFolderError";
  readonly code: OutFolderErrorCode;
  constructor(code: OutFolderErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** A claimed folder: written through {@link writeBeneath}, released when the run ends. */
export interface OutFolder {
  readonly path: string;
  /** Removes the lock (only this run's own); the snapshot stays. Idempotent. */
  release(): void;
}

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_RDONLY, O_DIRECTORY } = constants;
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
const FILE_FLAGS = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;
const viaFd = existsSync("/proc/self/fd");

/** The kernel's start time of a process (field 22 of /proc/PID/stat), to tell pid reuse apart. */
function startTime(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? "";
  } catch {
    return "";
  }
}

/** Whether the run that wrote a lock (`pid starttime`) still runs. */
function holderAlive(content: string): boolean {
  const [pidText, start] = content.trim().split(/\s+/);
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const now = startTime(pid);
  return now === "" || start === undefined || start === "" || now === start;
}

const ownLock = () => `${process.pid} ${startTime(process.pid)}\n`;

/**
 * Claims `dir` for one run: creates it (parents too) or accepts it empty, then takes the lock
 * (O_EXCL). Refused, with a sentence saying why: `dir` names a file, or a symlink; the folder
 * holds anything (a snapshot, the partial snapshot of a killed run); another live run holds it.
 * A lock left by a run that was killed (its pid gone, or reused: start time differs) is taken over
 * when the folder holds nothing else.
 */
export function claimOutFolder(dir: string, flag = "--out"): OutFolder {
  const path = resolve(dir);
  let st: import("node:fs").Stats | undefined;
  try {
    st = statSync(path, { throwIfNoEntry: false });
    if (st === undefined) mkdirSync(path, { recursive: true, mode: 0o755 });
  } catch (e) {
    throw new OutFolderError(
      "ERR_OUT_IO",
      `${flag} ${dir}: cannot create the folder (${(e as NodeJS.ErrnoException).code ?? String(e)})`,
      { cause: e },
    );
  }
  if (st !== undefined && !st.isDirectory()) {
    throw new OutFolderError(
      "ERR_OUT_IS_FILE",
      `${flag} ${dir} is a file, not a folder; name a new or empty folder`,
    );
  }
  const fd = openDir(path, flag, dir);
  closeSync(fd);
  const lock = `${path}/${LOCK_FILE}`;
  const others = () => readdirSync(path).filter((n) => n !== LOCK_FILE);
  if (others().length > 0) throw notEmpty(path, flag, dir);
  if (!tryLock(lock)) {
    let held = "";
    try {
      held = readFileSync(lock, "utf8");
    } catch {}
    if (holderAlive(held)) {
      throw new OutFolderError(
        "ERR_OUT_LOCKED",
        `${flag} ${dir} is being written by another podpath run (pid ${held.trim().split(/\s+/)[0]}); wait for it, or name another folder`,
      );
    }
    // a killed run's lock: only this run removes it, and only if it is still the stale one
    try {
      if (readFileSync(lock, "utf8") === held) unlinkSync(lock);
    } catch {}
    if (!tryLock(lock)) {
      throw new OutFolderError(
        "ERR_OUT_LOCKED",
        `${flag} ${dir} was claimed by another podpath run at the same moment; name another folder`,
      );
    }
  }
  const mine = ownLock();
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    try {
      if (readFileSync(lock, "utf8") === mine) unlinkSync(lock);
    } catch {}
  };
  // between the emptiness check and the lock another run may have finished here
  if (others().length > 0) {
    release();
    throw notEmpty(path, flag, dir);
  }
  return { path, release };
}

function notEmpty(path: string, flag: string, dir: string): OutFolderError {
  const killed = existsSync(`${path}/${LOCK_FILE}`) ? " (a run that was killed left it)" : "";
  return new OutFolderError(
    "ERR_OUT_NOT_EMPTY",
    `${flag} ${dir} is not empty${killed}; name a new or empty folder so snapshots do not mix`,
  );
}

function tryLock(lock: string): boolean {
  try {
    const fd = openSync(lock, FILE_FLAGS, 0o644);
    try {
      writeSync(fd, ownLock());
    } finally {
      closeSync(fd);
    }
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw new OutFolderError("ERR_OUT_IO", `cannot lock ${lock}: ${(e as Error).message}`, {
      cause: e,
    });
  }
}

function openDir(path: string, flag: string, shown: string): number {
  try {
    return openSync(path, DIR_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new OutFolderError(
      code === "ELOOP" || code === "ENOTDIR" ? "ERR_OUT_UNSAFE" : "ERR_OUT_IO",
      code === "ELOOP" || code === "ENOTDIR"
        ? `${flag} ${shown} is a symbolic link or not a folder; podpath does not write through links`
        : `${flag} ${shown}: cannot open the folder (${code ?? String(e)})`,
      { cause: e },
    );
  }
}

/** The parts of a relative path; `..`, `.`, empty and absolute paths are refused. */
function partsOf(rel: string): string[] {
  const parts = rel.split("/");
  if (
    rel.startsWith("/") ||
    parts.some((p) => p === "" || p === "." || p === ".." || p.includes("\0"))
  ) {
    throw new OutFolderError(
      "ERR_OUT_UNSAFE",
      `refusing to write outside the snapshot: ${JSON.stringify(rel)}`,
    );
  }
  return parts;
}

/**
 * Opens (creating) the folders of `rel` beneath `root` one by one, never through a link, and
 * creates its file with O_EXCL|O_NOFOLLOW. Returns the new file's descriptor (the caller closes it).
 */
export function createBeneath(root: string, rel: string): number {
  const parts = partsOf(rel);
  const name = parts.pop() as string;
  const opened: number[] = [];
  try {
    let dirFd = openDir(resolve(root), "snapshot folder", root);
    opened.push(dirFd);
    let shown = "";
    for (const part of parts) {
      shown = shown === "" ? part : `${shown}/${part}`;
      const at = viaFd ? `/proc/self/fd/${dirFd}/${part}` : `${resolve(root)}/${shown}`;
      try {
        mkdirSync(at, { mode: 0o755 });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      }
      try {
        dirFd = openSync(at, DIR_FLAGS);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === "ELOOP" || code === "ENOTDIR") {
          throw new OutFolderError(
            "ERR_OUT_UNSAFE",
            `${shown} in the snapshot folder is not a folder (a link or a file put there meanwhile); podpath does not write through it`,
          );
        }
        if (code === "ENOENT") {
          throw new OutFolderError(
            "ERR_OUT_UNSAFE",
            `${shown} in the snapshot folder was moved or removed while podpath wrote into it`,
          );
        }
        throw e;
      }
      opened.push(dirFd);
    }
    const at = viaFd ? `/proc/self/fd/${dirFd}/${name}` : `${resolve(root)}/${rel}`;
    try {
      return openSync(at, FILE_FLAGS, 0o644);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "EEXIST" || code === "ELOOP") {
        throw new OutFolderError(
          "ERR_OUT_UNSAFE",
          `${rel} already exists in the snapshot folder (put there by something else); podpath does not overwrite it`,
        );
      }
      if (code === "ENOENT") {
        throw new OutFolderError(
          "ERR_OUT_UNSAFE",
          `the folder of ${rel} in the snapshot folder was removed while podpath wrote into it`,
        );
      }
      throw e;
    }
  } finally {
    for (const fd of opened) closeSync(fd);
  }
}

/** Writes a new file `rel` beneath `root` (see {@link createBeneath}). */
export function writeBeneath(root: string, rel: string, data: string | Uint8Array): void {
  const fd = createBeneath(root, rel);
  try {
    const buf = typeof data === "string" ? Buffer.from(data) : data;
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes `rel` beneath `root` (see {@link writeBeneath}), creating `root` itself first when it
 * does not exist: for callers that hand a folder of their own (library use, tests) rather than
 * one claimed with {@link claimOutFolder}.
 */
export function writeBeneathCreating(root: string, rel: string, data: string | Uint8Array): void {
  if (!existsSync(root)) mkdirSync(root, { recursive: true, mode: 0o755 });
  writeBeneath(root, rel, data);
}
