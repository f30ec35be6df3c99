import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PathView } from "../model/answer.ts";
import type { Document } from "./document.ts";
import { code, codeBlock, fields, list, paragraph, section, strong, table } from "./document.ts";
import { renderDocumentHtml } from "./document-html.ts";
import { codeFence, codeSpan, renderDocumentMarkdown } from "./document-markdown.ts";
import { renderDocumentText } from "./document-text.ts";

const HOSTILE = "a|b `tick` <script>alert(1)</script> & *x* _y_";

const path: PathView = {
  from: "pod/default/<app>",
  to: "10.20.30.40",
  port: 5432,
  hops: [
    { at: "pod/default/<app>", label: "sends", source: "10.4.0.5", state: "ok" },
    { at: "node/n1", label: "RETURN <exempt>", state: "stops" },
  ],
  verdict: "stops at <node>",
};

const doc: Document = {
  question: "test",
  title: `Report on ${HOSTILE}`,
  blocks: [
    paragraph(["Proof: ", code("tcp 10.4.0.5 → 10.20.30.40:5432"), " ", strong("FIXED")]),
    section(HOSTILE, [
      list(["one", ["two ", code("a`b")]]),
      table(["col", "other"], [[HOSTILE, code("x|y")]]),
      codeBlock("```\ninside\n", "diff"),
      fields([
        ["key", "value"],
        ["", "more"],
      ]),
    ]),
    { kind: "path", path },
    { kind: "section", title: "folded", collapsed: true, blocks: [paragraph(HOSTILE)] },
  ],
};

describe("renderDocumentText", () => {
  it("wraps prose at 100 columns and never splits a code span", () => {
    const long = `${"word ".repeat(40)}`;
    const cmd = "kubectl apply -f some/long/file/name.yaml --server-side --force-conflicts";
    const out = renderDocumentText({
      question: "t",
      blocks: [paragraph([long, code(cmd)])],
    });
    for (const l of out.split("\n")) assert.ok(l.length <= 100 || l === cmd, l);
    assert.ok(out.split("\n").includes(cmd), out);
  });

  it("indents a section's content two columns and puts blank lines around sections", () => {
    const out = renderDocumentText(doc);
    const lines = out.split("\n");
    assert.equal(lines[0], `Report on ${HOSTILE}`);
    assert.equal(lines[1], "");
    assert.equal(lines[2], "Proof: tcp 10.4.0.5 → 10.20.30.40:5432 FIXED");
    assert.equal(lines[3], "");
    assert.equal(lines[4], HOSTILE);
    assert.equal(lines[5], "  - one");
    assert.equal(lines[6], "  - two a`b");
    assert.ok(lines.includes("  inside"), out);
    assert.ok(lines.includes("  key  value"), out);
    assert.ok(lines.includes("       more"), out);
    assert.ok(out.endsWith("\n") && !out.endsWith("\n\n"));
  });

  it("draws a plain list without bullets, indented as if it had them", () => {
    const out = renderDocumentText({
      question: "t",
      blocks: [section("tcp a → b", [list(["no reply"], false)])],
    });
    assert.equal(out, "tcp a → b\n    no reply\n");
  });
});

describe("renderDocumentMarkdown", () => {
  const md = renderDocumentMarkdown(doc);

  it("escapes every text from input: pipes, backticks, angle brackets", () => {
    assert.ok(md.startsWith("# Report on a\\|b \\`tick\\` \\<script\\>"), md);
    assert.doesNotMatch(md, /<script>/);
    assert.match(md, /^## a\\\|b /m);
    // the table row: a pipe in text and in a code span never opens a cell
    const row = md.split("\n").find((l) => l.startsWith("| a"));
    assert.ok(row, md);
    assert.equal(row.split(/(?<!\\)\|/).length, 4, row);
  });

  it("fences code with more backticks than any run inside", () => {
    assert.equal(codeSpan("a`b"), "`` a`b ``");
    assert.equal(codeSpan("plain"), "`plain`");
    assert.equal(codeFence("```\nx\n", "diff"), "````diff\n```\nx\n````");
    assert.match(md, /^````diff\n```\ninside\n````$/m);
  });

  it("keeps a paragraph a paragraph when it starts like a heading, list or quote", () => {
    const out = renderDocumentMarkdown({
      question: "t",
      blocks: ["# not a heading", "- not an item", "+ 10.4.0.0/14", "1. not numbered", "> no"].map(
        (t) => paragraph(t),
      ),
    });
    assert.equal(
      out,
      "\\# not a heading\n\n\\- not an item\n\n\\+ 10.4.0.0/14\n\n1\\. not numbered\n\n\\> no\n",
    );
  });

  it("folds a collapsed section in <details>", () => {
    assert.match(md, /<details><summary>folded<\/summary>\n\na\\\|b/);
    assert.match(md, /\n\n<\/details>\n$/);
  });
});

describe("renderDocumentHtml", () => {
  const page = renderDocumentHtml(doc);

  it("is one standalone page: one <html>, no script, no network", () => {
    assert.equal(page.match(/<html\b/g)?.length, 1);
    assert.equal(page.match(/<\/html>/g)?.length, 1);
    assert.doesNotMatch(page, /<script/i);
    assert.doesNotMatch(page, /\b(src|href)=/);
    assert.ok(page.startsWith("<!doctype html>"));
  });

  it("escapes input everywhere: title, cells, code, paths", () => {
    assert.match(page, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.match(page, /<title>Report on a\|b `tick` &lt;script&gt;/);
    assert.match(page, /pod\/default\/&lt;app&gt;/);
    assert.match(page, /<pre><code class="language-diff">```\ninside<\/code><\/pre>/);
    assert.match(page, /<details><summary>folded<\/summary>/);
  });

  it("balances its sections, tables, lists and details", () => {
    for (const tag of ["section", "table", "ul", "details", "pre", "dl"]) {
      const open = page.match(new RegExp(`<${tag}[ >]`, "g"))?.length ?? 0;
      const close = page.match(new RegExp(`</${tag}>`, "g"))?.length ?? 0;
      assert.equal(open, close, tag);
    }
  });
});
