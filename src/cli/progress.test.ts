import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  count,
  type ProgressClock,
  progressStream,
  startProgress,
  withProgress,
} from "./progress.ts";

/** A clock whose time moves only when the test says; `every` timers fire as time passes. */
function fakeClock() {
  let t = 0;
  const timers: { ms: number; next: number; tick: () => void; on: boolean }[] = [];
  const clock: ProgressClock = {
    now: () => t,
    every: (ms, tick) => {
      const timer = { ms, next: t + ms, tick, on: true };
      timers.push(timer);
      return () => {
        timer.on = false;
      };
    },
  };
  const advance = (ms: number) => {
    const end = t + ms;
    for (;;) {
      const due = timers.filter((x) => x.on && x.next <= end).sort((a, b) => a.next - b.next)[0];
      if (!due) break;
      t = due.next;
      due.next += due.ms;
      due.tick();
    }
    t = end;
  };
  return { clock, advance, active: () => timers.filter((x) => x.on).length };
}

function fakeStream(isTTY: boolean) {
  const writes: string[] = [];
  return { isTTY, write: (s: string) => void writes.push(s), writes };
}

describe("progress on stderr", () => {
  it("says nothing for the first second, then what runs, how far and for how long", () => {
    const { clock, advance } = fakeClock();
    const tty = fakeStream(true);
    const p = startProgress(tty, "reading big.pcap", { clock });
    p.update("10 packets");
    advance(900);
    assert.deepEqual(tty.writes, [], "under a second: silent");
    advance(200);
    assert.equal(tty.writes.length, 1);
    assert.equal(tty.writes[0], "\r\x1b[2Kpodpath: reading big.pcap… 10 packets (1 s)");
    p.update("20 packets");
    assert.equal(tty.writes.length, 1, "redrawn at most every 250 ms");
    advance(300);
    p.update("30 packets");
    assert.match(tty.writes.at(-1)!, /… 30 packets \(1 s\)$/);
    advance(2000);
    assert.match(tty.writes.at(-1)!, /… 30 packets \(3 s\)$/, "the clock ticks without updates");
    p.done();
    assert.equal(tty.writes.at(-1), "\r\x1b[2K", "erased when done");
    const n = tty.writes.length;
    p.update("late");
    advance(5000);
    assert.equal(tty.writes.length, n, "nothing after done");
  });

  it("a step that blocks the timers is still reported at its next update", () => {
    // synchronous work: no timer fires, only time passes
    let t = 0;
    const tty = fakeStream(true);
    const p = startProgress(tty, "diagnose snap", {
      clock: { now: () => t, every: () => () => {} },
    });
    t = 400;
    p.update("read the snapshot");
    assert.deepEqual(tty.writes, []);
    t = 1500;
    p.update("asked every question");
    assert.deepEqual(tty.writes, ["\r\x1b[2Kpodpath: diagnose snap… asked every question (1 s)"]);
    p.done();
  });

  it("a run under a second leaves stderr untouched, and stops its timer", () => {
    const { clock, advance, active } = fakeClock();
    const tty = fakeStream(true);
    const p = startProgress(tty, "quick", { clock });
    advance(500);
    p.done();
    assert.deepEqual(tty.writes, []);
    assert.equal(active(), 0);
  });

  it("never writes to a pipe or a file", async () => {
    const { clock, advance, active } = fakeClock();
    const pipe = fakeStream(false);
    const p = startProgress(pipe, "reading", { clock });
    advance(10_000);
    p.update("1 packet");
    p.done();
    assert.deepEqual(pipe.writes, []);
    assert.equal(active(), 0, "no timer started");
  });

  it("withProgress erases the line however the work ends", async () => {
    const { clock, advance } = fakeClock();
    const tty = fakeStream(true);
    await assert.rejects(
      withProgress(
        tty,
        "failing",
        (p) => {
          advance(1500);
          p.update("x");
          throw new Error("boom");
        },
        { clock },
      ),
      /boom/,
    );
    assert.equal(tty.writes.at(-1), "\r\x1b[2K");
    const value = await withProgress(tty, "ok", () => 42, { clock });
    assert.equal(value, 42);
  });

  it("a message of its own goes above the line, which is redrawn; in a pipe only the message", () => {
    const { clock, advance } = fakeClock();
    const tty = fakeStream(true);
    const p = startProgress(tty, "lab run", { clock });
    p.say("building replica\n");
    assert.deepEqual(tty.writes, ["building replica\n"], "no line drawn yet: nothing to erase");
    advance(1000);
    p.say("nodes up\n");
    assert.deepEqual(tty.writes.slice(-3), [
      "\r\x1b[2K",
      "nodes up\n",
      "\r\x1b[2Kpodpath: lab run… (1 s)",
    ]);
    p.done();
    const pipe = fakeStream(false);
    const q = startProgress(pipe, "lab run", { clock });
    advance(5000);
    q.say("building replica\n");
    q.done();
    assert.deepEqual(pipe.writes, ["building replica\n"]);
  });

  it("an Io's stream is its stderr; counts read in groups of three", () => {
    const seen: string[] = [];
    const s = progressStream({ stderrIsTTY: true, err: (t) => void seen.push(t) });
    s.write("x");
    assert.deepEqual(seen, ["x"]);
    assert.equal(s.isTTY, true);
    assert.equal(count(1234567), "1 234 567");
    assert.equal(count(12), "12");
  });
});
