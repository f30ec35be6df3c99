import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { readTar } from "./tar.ts";

describe("readTar", () => {
  it("reads what the real tar writes (gzip, nested folders, a long name)", () => {
    const dir = mkdtempSync(join(tmpdir(), "pp-tar-"));
    try {
      const long = `${"d".repeat(90)}/${"f".repeat(60)}.txt`;
      mkdirSync(join(dir, "snap/nodes/n1"), { recursive: true });
      mkdirSync(join(dir, "snap", "d".repeat(90)), { recursive: true });
      writeFileSync(join(dir, "snap/nodes/n1/iptables-save.txt"), "*nat\nCOMMIT\n");
      writeFileSync(join(dir, "snap", long), "x");
      execFileSync("tar", ["-czf", join(dir, "s.tar.gz"), "-C", dir, "snap"]);
      const r = readTar(readFileSync(join(dir, "s.tar.gz")), "s.tar.gz");
      assert.deepEqual(r.diagnostics, []);
      const paths = r.entries.map((e) => e.path).sort();
      assert.deepEqual(paths, [`snap/${long}`, "snap/nodes/n1/iptables-save.txt"].sort());
      const ipt = r.entries.find((e) => e.path.endsWith("iptables-save.txt"))!;
      assert.equal(new TextDecoder().decode(ipt.data), "*nat\nCOMMIT\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("reports a truncated archive and keeps the files before the damage", () => {
    const dir = mkdtempSync(join(tmpdir(), "pp-tar-"));
    try {
      writeFileSync(join(dir, "a.txt"), "a".repeat(100));
      writeFileSync(join(dir, "b.txt"), "b".repeat(5000));
      execFileSync("tar", ["-cf", join(dir, "s.tar"), "-C", dir, "a.txt", "b.txt"]);
      const whole = readFileSync(join(dir, "s.tar"));
      const r = readTar(whole.subarray(0, 512 * 3 + 100), "s.tar");
      assert.deepEqual(
        r.entries.map((e) => e.path),
        ["a.txt"],
      );
      assert.equal(r.diagnostics[0]?.code, "ARCHIVE_TRUNCATED");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("a .tar.gz cut in half: the gzip damage is named and the files before the cut are kept", () => {
    const dir = mkdtempSync(join(tmpdir(), "pp-tar-"));
    try {
      // incompressible contents, so half the archive really holds only the first files
      writeFileSync(join(dir, "a.txt"), randomBytes(20_000));
      writeFileSync(join(dir, "b.txt"), randomBytes(20_000));
      writeFileSync(join(dir, "c.txt"), randomBytes(20_000));
      execFileSync("tar", ["-czf", join(dir, "s.tar.gz"), "-C", dir, "a.txt", "b.txt", "c.txt"]);
      const whole = readFileSync(join(dir, "s.tar.gz"));
      const r = readTar(whole.subarray(0, Math.floor(whole.length / 2)), "s.tar.gz");
      assert.deepEqual(
        r.entries.map((e) => e.path),
        ["a.txt"],
      );
      assert.deepEqual(Buffer.from(r.entries[0]!.data), readFileSync(join(dir, "a.txt")));
      assert.deepEqual(
        r.diagnostics.map((d) => d.code),
        ["ARCHIVE_GZIP", "ARCHIVE_TRUNCATED"],
      );
      assert.match(
        r.diagnostics[1]!.message,
        /s\.tar\.gz: byte \d+: the archive ends inside "b\.txt"/,
      );
      // damage inside the stream (not a cut): the files before it are kept too
      const flipped = Buffer.from(whole);
      for (let i = Math.floor(whole.length * 0.6); i < whole.length * 0.6 + 64; i++)
        flipped[i]! ^= 0xff;
      const f = readTar(flipped, "s.tar.gz");
      assert.ok(f.entries.some((e) => e.path === "a.txt"));
      assert.equal(f.diagnostics[0]?.code, "ARCHIVE_GZIP");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("never throws on random bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 3000 }), (bytes) => {
        const r = readTar(bytes, "x.tar");
        assert.ok(Array.isArray(r.entries));
      }),
      { numRuns: 300 },
    );
  });
});
