/**
 * @module cli/progress — one line on stderr saying what a long operation is doing, for a person
 * watching a terminal: nothing for the first second (most runs end before), then
 * `podpath: reading big.pcap… 1.2 M packets (12 s)`, redrawn in place, erased when done. Nothing
 * at all when stderr is not a terminal (a pipe, a file, CI): the answer's streams stay clean. The
 * clock is injected, so tests drive time without waiting.
 */

import { terminalSafe } from "../report/terminal-safe.ts";

/** Where progress goes: stderr, or a fake terminal in tests. */
export interface ProgressStream {
  readonly isTTY: boolean;
  readonly write: (text: string) => void;
}

/** Time and timers; the real one uses performance.now and setInterval. */
export interface ProgressClock {
  readonly now: () => number;
  /** Calls `tick` every `ms` until the returned function is called. */
  readonly every: (ms: number, tick: () => void) => () => void;
}

export const realClock: ProgressClock = {
  now: () => performance.now(),
  every: (ms, tick) => {
    const t = setInterval(tick, ms);
    t.unref();
    return () => clearInterval(t);
  },
};

export interface ProgressOptions {
  readonly clock?: ProgressClock;
  /** Silent until the operation has run this long. */
  readonly afterMs?: number;
  /** The line is redrawn at most this often. */
  readonly everyMs?: number;
}

export interface ProgressLine {
  /** What is being done now (`12 034 packets`); drawn when over the delay, at most every everyMs. */
  readonly update: (detail: string) => void;
  /** Erases the line (when one was drawn); further updates are ignored. */
  readonly done: () => void;
  /** Writes a message of its own (a log line) to the stream, the progress line redrawn below it. */
  readonly say: (text: string) => void;
}

/** Starts reporting `label` on `stream`; a no-op unless the stream is a terminal. */
export function startProgress(
  stream: ProgressStream,
  label: string,
  opts: ProgressOptions = {},
): ProgressLine {
  if (!stream.isTTY) return { update: () => {}, done: () => {}, say: stream.write };
  const clock = opts.clock ?? realClock;
  const afterMs = opts.afterMs ?? 1000;
  const everyMs = opts.everyMs ?? 250;
  const start = clock.now();
  let detail = "";
  let drawnAt: number | undefined;
  let finished = false;
  let drawn = false;
  const draw = (force: boolean) => {
    const t = clock.now();
    if (finished || t - start < afterMs) return;
    if (!force && drawnAt !== undefined && t - drawnAt < everyMs) return;
    const seconds = Math.floor((t - start) / 1000);
    const said = terminalSafe(`${label}…${detail ? ` ${detail}` : ""}`);
    stream.write(`\r\x1b[2Kpodpath: ${said} (${seconds} s)`);
    drawnAt = t;
    drawn = true;
  };
  const erase = () => {
    if (drawn) stream.write("\r\x1b[2K");
    drawn = false;
  };
  const stop = clock.every(Math.min(afterMs, 1000), () => draw(true));
  return {
    update: (d) => {
      detail = d;
      draw(false);
    },
    done: () => {
      if (finished) return;
      finished = true;
      stop();
      erase();
    },
    say: (text) => {
      erase();
      stream.write(terminalSafe(text, { keepLayout: true }));
      if (!finished && drawnAt !== undefined) draw(true);
    },
  };
}

/** Runs `work` with progress for `label`, erased however the work ends. */
export async function withProgress<T>(
  stream: ProgressStream,
  label: string,
  work: (progress: ProgressLine) => Promise<T> | T,
  opts: ProgressOptions = {},
): Promise<T> {
  const progress = startProgress(stream, label, opts);
  try {
    return await work(progress);
  } finally {
    progress.done();
  }
}

/** The progress stream of an Io: its stderr, a terminal or not. */
export function progressStream(io: {
  readonly stderrIsTTY: boolean;
  readonly err: (text: string) => void;
  readonly errRaw?: (text: string) => void;
}): ProgressStream {
  // the line's own \r and erase sequences go as they are; what it says is made safe above
  return { isTTY: io.stderrIsTTY, write: io.errRaw ?? io.err };
}

/** `1234567` → `1 234 567`. */
export function count(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, " ");
}
