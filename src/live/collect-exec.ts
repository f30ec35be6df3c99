/**
 * @module live/collect-exec — runs the fixed read commands in one pod and writes what they print
 * into the snapshot (`<dir>/<artifact>.txt`); a command that fails is reported and the others
 * still run. Output is read up to a limit per stream (k8s/output-limit, 64 MiB unless
 * `maxOutputBytes` says less); a command past it is reported with the limit and writes no file.
 */
import type { ClusterSource, PodExecOptions } from "../k8s/cluster.ts";
import { type OutputTruncation, truncationWhy } from "../k8s/output-limit.ts";
import { type ReadCommand, SYSCTL_PROC_FALLBACK, sysctlFromProc } from "./collect-commands.ts";

export interface ExecTarget {
  readonly namespace: string;
  readonly pod: string;
  readonly container?: string;
}

export interface CommandFailure {
  readonly command: string;
  readonly why: string;
  /** An optional tool that is not there: normal, recorded as not available, not as a failure. */
  readonly notAvailable?: boolean;
}

/** A command that could not start (missing binary) rather than one that ran and failed. */
function didNotStart(r: { code: number | undefined; message?: string }): boolean {
  return (
    r.code === 127 ||
    r.code === 126 ||
    (r.code === undefined && /not found|no such file/i.test(r.message ?? ""))
  );
}

function firstLine(s: string | undefined): string {
  return (s ?? "").trim().split("\n")[0]?.slice(0, 300) ?? "";
}

/** What one command's run means for the snapshot: a file to write, or why there is none. */
export function judge(
  c: ReadCommand,
  r: {
    code: number | undefined;
    stdout: Buffer;
    stderr: string;
    message?: string;
    timedOut: boolean;
    truncated?: OutputTruncation | undefined;
  },
  timeoutMs: number,
): { data: Buffer } | { why: string; notAvailable?: true } {
  // a cut output is never written: a rule or a route missing from it would read as absent
  if (r.truncated) return { why: truncationWhy(r.truncated) };
  if (r.timedOut) return { why: `no answer within ${timeoutMs} ms` };
  // sysctl exits non-zero when one of several keys is unknown, yet prints the others
  if (r.code === 0 || (c.artifact === "sysctl" && r.code !== undefined && r.stdout.length > 0)) {
    return { data: r.stdout };
  }
  if (didNotStart(r)) {
    if (c.optional) return { why: `${c.argv[0]} is not installed`, notAvailable: true };
    return { why: `${c.argv[0]} is not in the image` };
  }
  if (r.code !== undefined) {
    const err = firstLine(r.stderr);
    if (c.unavailableWhen?.test(r.stderr)) {
      return { why: `${c.unavailableWhy ?? "not available"}: ${err}`, notAvailable: true };
    }
    return { why: `exited ${r.code}${err ? `: ${err}` : ""}` };
  }
  return { why: firstLine(r.message) || "did not run" };
}

/** Runs `commands` in the target, writing `${dir}/${artifact}.txt`; returns the failures. */
export async function runReadCommands(
  src: ClusterSource,
  target: ExecTarget,
  commands: readonly ReadCommand[],
  dir: string,
  write: (rel: string, data: string | Uint8Array) => Promise<void>,
  opts: {
    timeoutMs: number;
    signal?: AbortSignal | undefined;
    maxOutputBytes?: number | undefined;
  },
): Promise<CommandFailure[]> {
  const failures: CommandFailure[] = [];
  const base = execOptions(target, opts);
  for (const c of commands) {
    let r = await src.exec(target.namespace, target.pod, c.argv, base);
    let text = r.stdout;
    if (didNotStart(r) && c.fallback) {
      const fb = await src.exec(target.namespace, target.pod, c.fallback, base);
      if (fb.code === 0 || fb.truncated) {
        r = fb;
        const isProc = c.fallback.every((x, i) => x === SYSCTL_PROC_FALLBACK[i]);
        text = isProc ? Buffer.from(sysctlFromProc(fb.stdout.toString("utf8"))) : fb.stdout;
      }
    }
    const verdict = judge(c, { ...r, stdout: text }, opts.timeoutMs);
    if ("data" in verdict) await write(`${dir}/${c.artifact}.txt`, verdict.data);
    else failures.push(failureOf(c, verdict));
  }
  return failures;
}

/** The exec options for `target`: its container, the deadline, the signal, the output limit. */
export function execOptions(
  target: { readonly container?: string | undefined },
  opts: {
    timeoutMs: number;
    signal?: AbortSignal | undefined;
    maxOutputBytes?: number | undefined;
  },
): PodExecOptions {
  return {
    timeoutMs: opts.timeoutMs,
    ...(target.container === undefined ? {} : { container: target.container }),
    ...(opts.signal === undefined ? {} : { signal: opts.signal }),
    ...(opts.maxOutputBytes === undefined ? {} : { maxOutputBytes: opts.maxOutputBytes }),
  };
}

/** The failure record of a command judged as giving no file. */
export function failureOf(c: ReadCommand, v: { why: string; notAvailable?: true }): CommandFailure {
  return {
    command: c.argv.join(" "),
    why: v.why,
    ...(v.notAvailable ? { notAvailable: true } : {}),
  };
}
