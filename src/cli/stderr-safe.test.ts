import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { memoryIo } from "./io.ts";
import { startProgress } from "./progress.ts";

describe("stderr", () => {
  it("shows control characters of a message visibly, keeps its lines", () => {
    const io = memoryIo();
    io.err("podpath: cannot read snap\x1b]0;pwned\x07.tar.gz: no such file\nsecond line\n");
    assert.equal(
      io.stderr(),
      "podpath: cannot read snap\\x1b]0;pwned\\x07.tar.gz: no such file\nsecond line\n",
    );
  });

  it("draws the progress line with its own erase sequence, what it says made safe", () => {
    let now = 0;
    const written: string[] = [];
    const line = startProgress({ isTTY: true, write: (t) => written.push(t) }, "reading a\x1b[2J", {
      clock: { now: () => now, every: () => () => {} },
      afterMs: 0,
      everyMs: 0,
    });
    now = 2000;
    line.update("node\u202eevil");
    line.say("wrote x\x1b[31m\n");
    line.done();
    const all = written.join("");
    // the only raw ESC bytes are the line's own `\r ESC[2K`
    assert.equal(all.replace(/\r\x1b\[2K/g, "").includes("\x1b"), false);
    assert.match(all, /reading a\\x1b\[2J… node\\u202eevil/);
    assert.match(all, /wrote x\\x1b\[31m\n/);
  });
});
