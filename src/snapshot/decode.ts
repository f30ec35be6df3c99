/**
 * @module snapshot/decode — a file's bytes as text, whatever wrote it: UTF-8 (with or without a
 * byte-order mark), or UTF-16 with its byte-order mark (what Windows PowerShell's `>` and
 * `Out-File` write). Every reader of a snapshot, and every file named on the command line, is
 * decoded here, so a pasted dump saved from PowerShell is read, not silently found empty.
 */
import { isAscii } from "node:buffer";

/** The encoding a byte-order mark names, and the mark's length. */
export type TextEncoding = "utf-8" | "utf-16le" | "utf-16be";

/** The encoding of `bytes` by its byte-order mark (UTF-8 when there is none). */
export function encodingOf(bytes: Uint8Array): { encoding: TextEncoding; bom: number } {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)
    return { encoding: "utf-8", bom: 3 };
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return { encoding: "utf-16le", bom: 2 };
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return { encoding: "utf-16be", bom: 2 };
  return { encoding: "utf-8", bom: 0 };
}

/**
 * A file's bytes as text: UTF-8 or, after its byte-order mark, UTF-16 LE/BE; the mark dropped, bad
 * sequences as U+FFFD. ASCII, which every kernel dump is, is copied byte for byte into a one-byte
 * string (a kube-proxy node's iptables-save runs to tens of megabytes: this is several times
 * faster than a UTF-8 decoder, and the string takes half the memory of a two-byte one).
 */
export function decodeText(bytes: Uint8Array): string {
  const { encoding, bom } = encodingOf(bytes);
  const body = bom === 0 ? bytes : bytes.subarray(bom);
  if (encoding === "utf-8" && isAscii(body)) {
    return Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("latin1");
  }
  // ignoreBOM: the mark is already cut off; a second one would be content
  return new TextDecoder(encoding, { ignoreBOM: true }).decode(body);
}
