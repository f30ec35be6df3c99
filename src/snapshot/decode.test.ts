import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeText, encodingOf } from "./decode.ts";

const text = '*nat\n-A POSTROUTING -m comment --comment "é ünïcode ✓" -j MASQUERADE\nCOMMIT\n';

function utf16(s: string, order: "le" | "be"): Buffer {
  const le = Buffer.from(s, "utf16le");
  if (order === "be") le.swap16();
  return Buffer.concat([Buffer.from(order === "le" ? [0xff, 0xfe] : [0xfe, 0xff]), le]);
}

describe("decodeText", () => {
  it("reads UTF-16 LE and BE after their byte-order mark, which is dropped", () => {
    assert.equal(decodeText(utf16(text, "le")), text);
    assert.equal(decodeText(utf16(text, "be")), text);
    assert.equal(encodingOf(utf16(text, "be")).encoding, "utf-16be");
  });

  it("drops a UTF-8 byte-order mark, and only the first", () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    assert.equal(decodeText(Buffer.concat([bom, Buffer.from(text)])), text);
    assert.equal(decodeText(Buffer.concat([bom, bom, Buffer.from("a")])), "\ufeffa");
  });

  it("ASCII and UTF-8 read as they are; a bad sequence is U+FFFD, never a throw", () => {
    assert.equal(decodeText(Buffer.from("plain ascii\n")), "plain ascii\n");
    assert.equal(decodeText(Buffer.from(text)), text);
    assert.equal(decodeText(Buffer.from([0x61, 0xff, 0x62])), "a\ufffdb");
    assert.equal(decodeText(new Uint8Array(0)), "");
  });

  it("a view into a larger buffer decodes only its own bytes", () => {
    const big = Buffer.from("xxhello worldyy");
    assert.equal(decodeText(big.subarray(2, 13)), "hello world");
  });
});
