/**
 * @module k8s/output-limit — the size bound on what a command podpath runs may print: a pod exec
 * through the API server (`collect --pod`, `--node-state`, captures) and a local child process
 * (`probe`) are read up to EXEC_OUTPUT_LIMIT_BYTES per stream; past it podpath stops reading,
 * ends the command and says so (a collect failure naming the command and the limit: exit 3).
 */
import { Writable } from "node:stream";

/**
 * 64 MiB per stream (stdout, stderr): far above any node's `iptables-save` (a 10k-service
 * kube-proxy dump is about 20 MiB) yet a bound a hostile or broken pod cannot push memory past.
 */
export const EXEC_OUTPUT_LIMIT_BYTES = 64 * 1024 * 1024;

/** Which stream passed the limit, and the limit it passed. */
export interface OutputTruncation {
  readonly stream: "stdout" | "stderr";
  readonly limitBytes: number;
}

/** A stream that keeps up to `limitBytes` of what is written to it, then drops the rest. */
export interface BoundedSink {
  readonly stream: Writable;
  /** What was kept: at most `limitBytes`. */
  bytes(): Buffer;
  /** Whether more than `limitBytes` arrived. */
  readonly overflowed: boolean;
}

/**
 * A sink for one stream of a command: keeps the first `limitBytes`, and on the first byte past
 * them calls `onOverflow` once (the caller ends the command) and keeps nothing more.
 *
 * @example
 * const out = boundedSink(1024, () => socket.terminate());
 * child.stdout.pipe(out.stream);
 */
export function boundedSink(limitBytes: number, onOverflow: () => void): BoundedSink {
  const chunks: Buffer[] = [];
  let size = 0;
  let overflowed = false;
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      if (!overflowed) {
        const room = limitBytes - size;
        if (b.length <= room) {
          chunks.push(Buffer.from(b));
          size += b.length;
        } else {
          if (room > 0) chunks.push(Buffer.from(b.subarray(0, room)));
          size = limitBytes;
          overflowed = true;
          onOverflow();
        }
      }
      cb();
    },
  });
  return {
    stream,
    bytes: () => Buffer.concat(chunks, size),
    get overflowed() {
      return overflowed;
    },
  };
}

/** `n` bytes in words: `64 MiB`, `512 KiB`, `100 bytes`. */
export function byteSize(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / 1024 / 1024} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

/** The sentence for a command whose output passed the limit. */
export function truncationWhy(t: OutputTruncation): string {
  return `printed more than ${byteSize(t.limitBytes)} on ${t.stream} (podpath's limit per stream); reading stopped there and the command was ended, so its output was not kept`;
}
