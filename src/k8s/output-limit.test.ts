import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { realSystem } from "../live/probe.ts";
import { boundedSink, byteSize, EXEC_OUTPUT_LIMIT_BYTES, truncationWhy } from "./output-limit.ts";

describe("boundedSink", () => {
  it("keeps the first limit bytes and calls onOverflow once at the first byte past them", async () => {
    let calls = 0;
    const sink = boundedSink(10, () => calls++);
    for (const part of ["abcd", "efgh", "ijkl", "mnop"]) {
      await new Promise<void>((resolve) => sink.stream.write(Buffer.from(part), () => resolve()));
    }
    assert.equal(sink.bytes().toString(), "abcdefghij");
    assert.equal(sink.overflowed, true);
    assert.equal(calls, 1);
  });

  it("keeps everything up to the limit exactly, without calling onOverflow", async () => {
    const sink = boundedSink(8, () => assert.fail("not past the limit"));
    await new Promise<void>((resolve) =>
      sink.stream.write(Buffer.from("12345678"), () => resolve()),
    );
    assert.equal(sink.bytes().toString(), "12345678");
    assert.equal(sink.overflowed, false);
  });
});

describe("the output limit's words", () => {
  it("is 64 MiB and names the stream and the limit", () => {
    assert.equal(byteSize(EXEC_OUTPUT_LIMIT_BYTES), "64 MiB");
    assert.match(
      truncationWhy({ stream: "stderr", limitBytes: 64 * 1024 }),
      /^printed more than 64 KiB on stderr /,
    );
  });
});

describe("a local child process (probe's realSystem)", () => {
  it("stops reading an endless stdout at the limit and ends the process", async () => {
    // `yes` never ends by itself: only the limit (not the 10-minute deadline) ends it here
    const r = await realSystem(process.env, { maxOutputBytes: 100_000 }).exec(["yes"], 600_000);
    assert.ok(r.truncated, "truncated");
    assert.deepEqual(r.truncated, { stream: "stdout", limitBytes: 100_000 });
    const [kept, note] = [r.output.slice(0, 100_000), r.output.slice(100_000)];
    assert.equal(kept, "y\n".repeat(50_000));
    assert.match(note, /^\npodpath: yes printed more than 100000 bytes on stdout/);
  });

  it("bounds stderr too", async () => {
    const r = await realSystem(process.env, { maxOutputBytes: 4096 }).exec(
      ["sh", "-c", "yes 1>&2"],
      600_000,
    );
    assert.deepEqual(r.truncated, { stream: "stderr", limitBytes: 4096 });
  });

  it("leaves output under the limit as it is", async () => {
    const r = await realSystem(process.env, { maxOutputBytes: 4096 }).exec(
      ["sh", "-c", "printf 'one\\ntwo\\n'"],
      60_000,
    );
    assert.deepEqual(r, { code: 0, output: "one\ntwo\n" });
  });
});
