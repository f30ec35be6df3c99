import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { hasUnsafeChar, terminalSafe, terminalSafeDeep } from "./terminal-safe.ts";

/** Every character a terminal acts on, beyond tab and newline. */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe("terminalSafe", () => {
  it("shows a screen clear, an OSC title sequence and a carriage return visibly", () => {
    assert.equal(terminalSafe("a\x1b[2Jb"), "a\\x1b[2Jb");
    assert.equal(terminalSafe("\x1b]0;pwned\x07x"), "\\x1b]0;pwned\\x07x");
    assert.equal(terminalSafe("ok\rFAKE"), "ok\\rFAKE");
  });

  it("shows DEL, C1 controls (CSI U+009B) and NUL", () => {
    assert.equal(terminalSafe("\x7f\u009b2J\u0000"), "\\x7f\\u009b2J\\x00");
  });

  it("shows every bidi embedding, override and isolate", () => {
    for (const c of [
      "\u202a",
      "\u202b",
      "\u202c",
      "\u202d",
      "\u202e",
      "\u2066",
      "\u2067",
      "\u2068",
      "\u2069",
    ]) {
      const shown = terminalSafe(`x${c}y`);
      assert.equal(shown, `x\\u${c.charCodeAt(0).toString(16)}y`);
    }
  });

  it("keeps tab and newline only where the layout owns them", () => {
    assert.equal(terminalSafe("a\n\tb"), "a\\n\\tb");
    assert.equal(terminalSafe("a\n\tb\x1b", { keepLayout: true }), "a\n\tb\\x1b");
  });

  it("leaves printable text, non-Latin letters and emoji alone", () => {
    const s = "node/gke-a-1 → 10.0.0.0/8 «ä» 日本 🙂";
    assert.equal(terminalSafe(s), s);
    assert.equal(hasUnsafeChar(s), false);
  });

  it("never lets a raw control character through, whatever the code point", () => {
    let all = "";
    for (let c = 0; c < 0x2100; c++) all += String.fromCharCode(c);
    assert.doesNotMatch(terminalSafe(all), RAW);
    assert.doesNotMatch(terminalSafe(all, { keepLayout: true }), RAW);
    assert.equal(hasUnsafeChar("\t"), true);
  });
});

describe("terminalSafeDeep", () => {
  it("escapes every string of a nested answer; one-line keys lose their newlines", () => {
    const answer = {
      n: 3,
      finding: {
        subject: "node/a\nnext: rm -rf /",
        explanation: "line one\nline \x1b[2Jtwo",
        next: ["kubectl get node a\nb"],
      },
    };
    const safe = terminalSafeDeep(answer);
    assert.equal(safe.n, 3);
    assert.equal(safe.finding.subject, "node/a\\nnext: rm -rf /");
    assert.equal(safe.finding.explanation, "line one\nline \\x1b[2Jtwo");
    assert.deepEqual(safe.finding.next, ["kubectl get node a\\nb"]);
    assert.equal(answer.finding.subject.includes("\n"), true, "the input is not changed");
  });
});
