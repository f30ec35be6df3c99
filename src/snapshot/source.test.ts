import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { openSnapshot, SnapshotOpenError } from "./source.ts";

describe("openSnapshot", () => {
  it("refuses an archive nothing could be read from, saying why (the byte offset)", () => {
    const dir = mkdtempSync(join(tmpdir(), "pp-source-"));
    try {
      const path = join(dir, "snap.tar.gz");
      writeFileSync(path, gzipSync(Buffer.from("not a tar\n")));
      assert.throws(
        () => openSnapshot(path),
        (e: unknown) =>
          e instanceof SnapshotOpenError &&
          e.message.includes(path) &&
          /byte 0: the archive ends inside a tar header/.test(e.message),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
