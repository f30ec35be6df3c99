import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Answer, Verdict } from "../model/answer.ts";
import { renderHtml } from "./html.ts";
import { renderJson } from "./json.ts";
import { renderMarkdown } from "./markdown.ts";
import { PLAIN, renderText, verdictLine } from "./text.ts";

const answer = (verdict: Verdict): Answer => ({
  schemaVersion: 1,
  tool: "podpath",
  question: "diagnose",
  snapshot: "snap",
  verdict,
  findings: [],
  paths: [],
  missing: [],
  diagnostics: [],
});

const broken: Verdict = {
  state: "broken",
  summary: "Pod traffic to 10.20.30.40 keeps its pod source address 10.4.0.5",
  finding: "masq/exempt-destination",
  subject: "pod/default/app → 10.20.30.40:5432",
};
const undecided: Verdict = {
  state: "undecided",
  summary: "The rules of node/n1 were read, but no pod address is known to trace through them",
  finding: "evidence/unplaced",
  subject: "node/n1",
};
const healthy: Verdict = { state: "healthy", summary: "no error finding in the evidence read" };

describe("the verdict line", () => {
  it("opens the text report", () => {
    assert.equal(
      renderText(answer(broken), PLAIN).split("\n")[0],
      "BROKEN  pod/default/app → 10.20.30.40:5432: Pod traffic to 10.20.30.40 keeps its pod source address 10.4.0.5 (masq/exempt-destination)",
    );
    assert.equal(
      renderText(answer(healthy)).split("\n")[0],
      "HEALTHY  no error finding in the evidence read",
    );
    assert.equal(verdictLine(undecided).split("  ")[0], "UNDECIDED");
  });

  it("colours only the state word", () => {
    const red = (s: string) => `<r>${s}</r>`;
    const p = { ...PLAIN, red, bold: (s: string) => `<b>${s}</b>` };
    assert.match(renderText(answer(broken), p), /^<r><b>BROKEN<\/b><\/r> {2}pod\/default/);
  });

  it("opens the Markdown report, escaped", () => {
    const md = renderMarkdown(answer(undecided)).split("\n");
    assert.equal(
      md[0],
      "**UNDECIDED** node/n1: The rules of node/n1 were read, but no pod address is known to trace through them (`evidence/unplaced`)",
    );
    assert.match(md[2] ?? "", /^# podpath diagnose/);
    assert.equal(
      renderMarkdown(answer({ ...healthy, summary: "a_b <c>" })).split("\n")[0],
      "**HEALTHY** a\\_b \\<c\\>",
    );
  });

  it("is the first element of the HTML page's body, escaped", () => {
    const page = renderHtml(answer({ ...broken, summary: "<script>x</script>" }));
    const body = page.slice(page.indexOf("<body>") + "<body>".length).trimStart();
    assert.match(body, /^<p class="verdict broken"><strong>BROKEN<\/strong> pod\/default\/app/);
    assert.match(
      body,
      /&lt;script&gt;x&lt;\/script&gt; \(<code>masq\/exempt-destination<\/code>\)/,
    );
  });

  it("is a JSON field after the snapshot, keys in a stable order, none undefined", () => {
    const json = JSON.parse(renderJson(answer(healthy))) as Record<string, unknown>;
    assert.deepEqual(Object.keys(json).slice(0, 6), [
      "schemaVersion",
      "tool",
      "question",
      "snapshot",
      "verdict",
      "findings",
    ]);
    assert.deepEqual(json["verdict"], healthy);
    assert.deepEqual(Object.keys(JSON.parse(renderJson(answer(broken))).verdict), [
      "state",
      "summary",
      "finding",
      "subject",
    ]);
  });
});
