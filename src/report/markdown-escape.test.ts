import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  codeFence,
  codeSpan,
  longestBacktickRun,
  mdCell,
  mdHtmlText,
  mdInline,
  mdLineStart,
  mdLines,
} from "./markdown-escape.ts";

/** Characters that open a Markdown construct, unescaped (not after an odd run of backslashes). */
function unescaped(md: string): string[] {
  const found: string[] = [];
  for (let i = 0; i < md.length; i++) {
    if (!"`*_[]<>|&~$".includes(md[i]!)) continue;
    let n = 0;
    while (i - n - 1 >= 0 && md[i - n - 1] === "\\") n++;
    if (n % 2 === 0) found.push(md[i]!);
  }
  return found;
}

const PAYLOADS = [
  "[click](javascript:alert(1))",
  "![x](http://evil/x.png)",
  '<img src=x onerror="alert(1)">',
  "</details><script>alert(1)</script>",
  "&lt;b&gt; &#x3C;",
  "**bold** _it_ ~~gone~~ `code` $x$",
  "| a | b |",
  "\\[still a link](x)",
];

describe("mdInline", () => {
  it("leaves no construct's punctuation unescaped", () => {
    for (const p of PAYLOADS) assert.deepEqual(unescaped(mdInline(p)), [], p);
  });

  it("shows newlines, carriage returns and escapes visibly: inline text is one line", () => {
    const md = mdInline("a\n# b\r\x1b[2J");
    assert.equal(md.includes("\n"), false);
    assert.equal(md, "a\\\\n# b\\\\r\\\\x1b\\[2J");
  });

  it("keeps plain words and addresses readable", () => {
    assert.equal(mdInline("node/gke-a-1 10.0.0.0/8"), "node/gke-a-1 10.0.0.0/8");
  });
});

describe("mdLineStart", () => {
  it("escapes every opener of a block", () => {
    assert.equal(mdLineStart("# h"), "\\# h");
    assert.equal(mdLineStart("> q"), "\\> q");
    assert.equal(mdLineStart("- x"), "\\- x");
    assert.equal(mdLineStart("+ x"), "\\+ x");
    assert.equal(mdLineStart("---"), "\\---");
    assert.equal(mdLineStart("==="), "\\===");
    assert.equal(mdLineStart("12. x"), "12\\. x");
    assert.equal(mdLineStart("3) x"), "3\\) x");
    assert.equal(mdLineStart("    indented code"), "indented code");
    assert.equal(mdLineStart("plain"), "plain");
  });
});

describe("mdLines", () => {
  it("keeps each line of prose as a line, none opening a block or a construct", () => {
    const md = mdLines("first\n# heading\n> quote\n\n1. item\n<img src=x onerror=alert(1)>");
    assert.equal(
      md,
      "first\\\n\\# heading\\\n\\> quote\n\n1\\. item\\\n\\<img src=x onerror=alert(1)\\>",
    );
    for (const line of md.split("\n")) assert.doesNotMatch(line, /^(#|>|-|\+|\d+\.|<| {4})/);
  });

  it("shows control characters, keeps no carriage return", () => {
    assert.equal(mdLines("a\r\x1b]0;t\x07"), "a\\\\r\\\\x1b\\]0;t\\\\x07");
  });
});

describe("mdCell", () => {
  it("leaves no pipe to end the cell", () => {
    assert.deepEqual(unescaped(mdCell("a | b || c")), []);
  });
});

describe("codeSpan and codeFence", () => {
  it("fence a span longer than every backtick run, of every length", () => {
    for (let n = 1; n <= 12; n++) {
      const s = `a${"`".repeat(n)}b`;
      const span = codeSpan(s);
      const fence = /^`+/.exec(span)![0].length;
      assert.ok(fence > n, `run ${n}`);
      assert.equal(span, `${"`".repeat(fence)} ${s} ${"`".repeat(fence)}`);
    }
    assert.equal(codeSpan("plain"), "`plain`");
    assert.equal(codeSpan("`"), "`` ` ``");
  });

  it("keep a code block closed whatever its lines hold", () => {
    for (let n = 0; n <= 12; n++) {
      const body = `x\n${"`".repeat(n)}\n~~~\n</details>\n${"`".repeat(n)}diff`;
      const md = codeFence(body, "diff");
      const fence = /^`+/.exec(md)![0];
      assert.ok(fence.length >= 3 && fence.length > longestBacktickRun(body));
      // the only lines that are the fence are the first (with its info) and the last
      const lines = md.split("\n");
      assert.equal(lines[0], `${fence}diff`);
      assert.equal(lines.at(-1), fence);
      assert.equal(
        lines.slice(1, -1).some((l) => l.startsWith(fence)),
        false,
      );
    }
  });

  it("show control characters inside code, keep its lines", () => {
    assert.equal(codeFence("a\x1b[2J\nb\r"), "```\na\\x1b[2J\nb\\r\n```");
    assert.equal(codeSpan("a\nb\x1b"), "`a b\\x1b`");
    assert.equal(codeSpan("a|b", true), "`a\\|b`");
  });
});

describe("mdHtmlText", () => {
  it("escapes text inside raw HTML, where backslashes do not", () => {
    assert.equal(mdHtmlText("</summary><img onerror=x>"), "&lt;/summary&gt;&lt;img onerror=x&gt;");
  });
});
