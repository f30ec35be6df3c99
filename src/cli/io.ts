/**
 * @module cli/io — the one object through which commands talk to the terminal. Commands receive
 * it and return an exit code; nothing below cli/ touches process, console or colour.
 */
import pc from "picocolors";
import { terminalSafe } from "../report/terminal-safe.ts";

export interface Io {
  /** Writes the answer (stdout). */
  readonly out: (text: string) => void;
  /**
   * Writes progress and diagnostics (stderr), control characters shown visibly (report/
   * terminal-safe): a file or object name in a message cannot drive the terminal.
   */
  readonly err: (text: string) => void;
  /** Writes to stderr as it is: only podpath's own terminal control (cli/progress's line). */
  readonly errRaw?: (text: string) => void;
  /**
   * With `-v` only: one step done (what was read, what was decided), on stderr with the time the
   * step took since the previous one. Nothing without `-v`.
   */
  readonly verbose: (text: string) => void;
  readonly stdoutIsTTY: boolean;
  readonly stderrIsTTY: boolean;
  /** The terminal's width when stdout is one (text wraps to it; report/wrap textWidth). */
  readonly stdoutColumns?: number;
  readonly color: boolean;
  readonly colors: ReturnType<typeof pc.createColors>;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** Aborted on SIGINT/SIGTERM, so long operations can clean up and stop. */
  readonly signal: AbortSignal;
}

/** Exit codes (DESIGN.md): a public contract. */
export const EXIT = {
  ok: 0,
  findings: 1,
  usage: 2,
  live: 3,
} as const;

export function decideColor(
  flag: boolean | undefined,
  env: Readonly<Record<string, string | undefined>>,
  isTTY: boolean,
): boolean {
  if (flag === false) return false;
  if (env["NO_COLOR"] !== undefined && env["NO_COLOR"] !== "") return false;
  if (env["FORCE_COLOR"] !== undefined && env["FORCE_COLOR"] !== "0") return true;
  return isTTY && env["TERM"] !== "dumb";
}

/** `verbose` for an Io: `podpath: TEXT (N ms)`, N the time since the previous step. */
export function stepClock(
  write: (text: string) => void,
  enabled: boolean,
  now: () => number = () => performance.now(),
): (text: string) => void {
  let last = now();
  return (text) => {
    if (!enabled) return;
    const t = now();
    write(`podpath: ${text} (${Math.round(t - last)} ms)\n`);
    last = t;
  };
}

export function processIo(signal: AbortSignal, colorFlag?: boolean, verbose = false): Io {
  const color = decideColor(colorFlag, process.env, Boolean(process.stdout.isTTY));
  const errRaw = (t: string) => process.stderr.write(t);
  const err = (t: string) => errRaw(terminalSafe(t, { keepLayout: true }));
  return {
    out: (t) => process.stdout.write(t),
    err,
    errRaw,
    verbose: stepClock(err, verbose),
    stdoutIsTTY: Boolean(process.stdout.isTTY),
    stderrIsTTY: Boolean(process.stderr.isTTY),
    ...(process.stdout.isTTY && process.stdout.columns
      ? { stdoutColumns: process.stdout.columns }
      : {}),
    color,
    colors: pc.createColors(color),
    env: process.env,
    cwd: process.cwd(),
    signal,
  };
}

/** An Io that records everything, for tests; `verbose` steps go to its stderr when asked. */
export function memoryIo(
  env: Record<string, string | undefined> = {},
  opts: { verbose?: boolean } = {},
): Io & {
  stdout: () => string;
  stderr: () => string;
} {
  let o = "";
  let e = "";
  const err = (t: string) => {
    e += terminalSafe(t, { keepLayout: true });
  };
  return {
    out: (t) => {
      o += t;
    },
    err,
    // as on a terminal: the progress line's own erase sequence passes, everything else is escaped
    errRaw: (t) => {
      e += t;
    },
    verbose: stepClock(err, opts.verbose === true),
    stdoutIsTTY: false,
    stderrIsTTY: false,
    color: false,
    colors: pc.createColors(false),
    env,
    cwd: process.cwd(),
    signal: new AbortController().signal,
    stdout: () => o,
    stderr: () => e,
  };
}

/**
 * A reader that stops early (`podpath capture read big.pcap | head -1`) closes stdout: end
 * quietly (exit 0, no stack trace) instead of failing on the next write. Call once at start.
 */
export function endQuietlyWhenStdoutCloses(
  stdout: NodeJS.WriteStream = process.stdout,
  exit: (code: number) => void = (code) => process.exit(code),
): void {
  stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE" || e.code === "ERR_STREAM_DESTROYED") exit(0);
    else throw e;
  });
}

/** A user mistake: printed as one line on stderr, exit 2, never a stack trace. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  readonly code = "ERR_USAGE";
}
