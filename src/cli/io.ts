/**
 * @module cli/io — the one object through which commands talk to the terminal. Commands receive
 * it and return an exit code; nothing below cli/ touches process, console or colour.
 */
import pc from "picocolors";

export interface Io {
  /** Writes the answer (stdout). */
  readonly out: (text: string) => void;
  /** Writes progress and diagnostics (stderr). */
  readonly err: (text: string) => void;
  readonly stdoutIsTTY: boolean;
  readonly stderrIsTTY: boolean;
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

export function processIo(signal: AbortSignal, colorFlag?: boolean): Io {
  const color = decideColor(colorFlag, process.env, Boolean(process.stdout.isTTY));
  return {
    out: (t) => process.stdout.write(t),
    err: (t) => process.stderr.write(t),
    stdoutIsTTY: Boolean(process.stdout.isTTY),
    stderrIsTTY: Boolean(process.stderr.isTTY),
    color,
    colors: pc.createColors(color),
    env: process.env,
    cwd: process.cwd(),
    signal,
  };
}

/** An Io that records everything, for tests. */
export function memoryIo(env: Record<string, string | undefined> = {}): Io & {
  stdout: () => string;
  stderr: () => string;
} {
  let o = "";
  let e = "";
  return {
    out: (t) => {
      o += t;
    },
    err: (t) => {
      e += t;
    },
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

/** A user mistake: printed as one line on stderr, exit 2, never a stack trace. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  readonly code = "ERR_USAGE";
}
