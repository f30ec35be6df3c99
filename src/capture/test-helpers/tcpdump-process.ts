/**
 * @module capture/test-helpers/tcpdump-process — waiting on a tcpdump (or other) child process the
 * capture tests started: until its output says something, and until it has stopped after SIGINT.
 */
import type { ChildProcess } from "node:child_process";

/** Resolves once `re` matches what the child wrote so far (stdout and stderr together). */
export function waitFor(child: ChildProcess, re: RegExp, ms = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`timeout waiting for ${re}: ${seen}`)), ms);
    const on = (d: Buffer) => {
      seen += d.toString();
      if (re.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", on);
    child.stderr?.on("data", on);
  });
}

/**
 * Stops the child with SIGINT (tcpdump then flushes and prints its counts) and resolves once it
 * has closed, so the output still in the pipe when it exits has been read.
 */
export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null && child.stdout?.readableEnded !== false) return;
  // "close", not "exit": the output still in the pipe when the process exits is read first
  const closed = new Promise<void>((r) => child.once("close", () => r()));
  if (child.exitCode === null) child.kill("SIGINT");
  await closed;
}
