import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
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
