/**
 * @module capture/byte-window — a sliding window over a file or an in-memory byte array, read in
 * large chunks, so record readers parse straight from one reused buffer in constant memory.
 *
 * Hand-written rather than a Node stream: streams hand out chunks of their own size (64 KiB by
 * default, 2.5x slower here than 1 MiB reads) and a record split across two chunks would need a
 * copy per record; the window compacts once per chunk and grows only for a record larger than
 * itself.
 */
import { type FileHandle, open } from "node:fs/promises";

/** Default read size: 1 MiB reads are where Node's file reading reaches disk-cache speed. */
export const DEFAULT_CHUNK = 1 << 20;

/** A file path or the capture's bytes. */
export type CaptureInput = string | Uint8Array;

export class ByteWindow {
  /** The buffer; valid bytes are `buf[pos..end)`. */
  buf: Buffer;
  pos = 0;
  end = 0;
  /** File offset of `buf[0]`. */
  base = 0;
  /** No more bytes will come after `end`. */
  eof = false;
  /** Awaited before every read from the file: lets a consumer hold the reader back. */
  beforeRead: (() => Promise<void>) | undefined;
  private readonly fh: FileHandle | undefined;
  private readonly chunk: number;

  private constructor(buf: Buffer, fh: FileHandle | undefined, chunk: number) {
    this.buf = buf;
    this.fh = fh;
    this.chunk = chunk;
    if (fh === undefined) {
      this.end = buf.length;
      this.eof = true;
    }
  }

  static async open(input: CaptureInput, chunk = DEFAULT_CHUNK): Promise<ByteWindow> {
    if (typeof input !== "string") {
      const b = Buffer.from(input.buffer, input.byteOffset, input.byteLength);
      return new ByteWindow(b, undefined, chunk);
    }
    const fh = await open(input, "r");
    return new ByteWindow(Buffer.allocUnsafe(chunk * 2), fh, chunk);
  }

  /** File offset of `pos`. */
  get offset(): number {
    return this.base + this.pos;
  }

  get available(): number {
    return this.end - this.pos;
  }

  /**
   * Makes at least `n` bytes available from `pos` (fewer only at end of input). Returns whether
   * `n` bytes are available. Reads in whole chunks; grows the buffer only for `n` beyond it.
   */
  async ensure(n: number): Promise<boolean> {
    while (this.end - this.pos < n && !this.eof) {
      const fh = this.fh!;
      if (this.beforeRead !== undefined) await this.beforeRead();
      if (this.pos > 0) {
        // Compact: move the unread tail to the front (one copy per chunk, not per record).
        this.buf.copy(this.buf, 0, this.pos, this.end);
        this.base += this.pos;
        this.end -= this.pos;
        this.pos = 0;
      }
      const need = Math.max(n, this.chunk);
      if (this.buf.length - this.end < Math.min(need, this.chunk)) {
        const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, n + this.chunk));
        this.buf.copy(grown, 0, 0, this.end);
        this.buf = grown;
      }
      const room = this.buf.length - this.end;
      const { bytesRead } = await fh.read(this.buf, this.end, room, null);
      if (bytesRead === 0) this.eof = true;
      this.end += bytesRead;
    }
    return this.end - this.pos >= n;
  }

  async close(): Promise<void> {
    await this.fh?.close();
  }
}
