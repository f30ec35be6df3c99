import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fillWords, PIPE_WIDTH, paintedWords, textWidth, visibleLength, wrap } from "./wrap.ts";

describe("the width text is wrapped to", () => {
  it("is the terminal's on a TTY, 100 in a file or a pipe", () => {
    assert.equal(textWidth(true, 132), 132);
    assert.equal(textWidth(false, 132), PIPE_WIDTH);
    assert.equal(textWidth(true, undefined), PIPE_WIDTH);
    assert.equal(textWidth(true, 12), 40, "never narrower than 40");
  });
});

describe("filling words to a width", () => {
  const rule =
    '-A IP-MASQ-AGENT -d 10.0.0.0/8 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN';

  it("keeps every word, in order, each line within the width", () => {
    const lines = fillWords(paintedWords(rule), "    at:10  ", "           ", 50);
    assert.ok(lines.length > 1);
    for (const l of lines) assert.ok(l.length <= 50, l);
    assert.equal(lines.map((l) => l.trim()).join(" "), `at:10  ${rule}`);
    assert.match(lines.at(-1)!, /-j RETURN$/);
    assert.ok(lines.slice(1).every((l) => l.startsWith("           ") && l[11] !== " "));
  });

  it("never cuts a word longer than the width: it stands alone, whole", () => {
    const long = "x".repeat(70);
    const lines = fillWords(paintedWords(`a ${long} b`), "", "  ", 40);
    assert.deepEqual(lines, ["a", `  ${long}`, "  b"]);
    assert.ok(!lines.join("").includes("…"));
  });

  it("measures coloured prefixes and words without their escapes", () => {
    const red = (s: string) => `\x1b[31m${s}\x1b[39m`;
    assert.equal(visibleLength(red("ERROR  ")), 7);
    const plain = fillWords(paintedWords("one two three four five six"), "ERROR  ", "       ", 20);
    const painted = fillWords(
      paintedWords("one two three four five six", red),
      red("ERROR  "),
      "       ",
      20,
    );
    assert.deepEqual(
      painted.map(visibleLength),
      plain.map((l) => l.length),
    );
  });

  it("wraps prose by paragraph, a list item hanging under its text", () => {
    const text = `intro line\n- ${"word ".repeat(12).trim()}`;
    const out = wrap(text, "  ", 30).split("\n");
    assert.equal(out[0], "  intro line");
    assert.match(out[1]!, /^ {2}- word/);
    assert.match(out[2]!, /^ {4}word/);
  });
});
