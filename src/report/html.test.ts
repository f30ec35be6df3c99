import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Answer } from "../model/answer.ts";
import { escapeHtml, html, renderHtml } from "./html.ts";

const hostile = "<script>alert(1)</script>&\"'";

const answer: Answer = {
  schemaVersion: 1,
  tool: "podpath",
  question: "diagnose",
  snapshot: "snap/<x>",
  verdict: {
    state: "broken",
    summary: hostile,
    finding: "masq/exempt-destination",
    subject: "pod/default/app → 10.20.30.40:5432",
  },
  findings: [
    {
      id: "masq/exempt-destination",
      severity: "error",
      title: hostile,
      subject: "node/n1",
      explanation: "line one\nline two",
      evidence: [{ file: "nodes/n1/iptables-save.txt", line: 10, text: hostile }],
      next: [hostile],
    },
  ],
  paths: [
    {
      from: "pod/default/app",
      to: "10.20.30.40",
      port: 5432,
      protocol: "tcp",
      hops: [
        { at: "pod/default/app", label: hostile, source: "10.4.0.5", state: "ok" },
        { at: "node/n1", label: "kept", source: "10.4.0.5", state: "ok" },
        { at: "remote/dc1", label: "no route back", source: "10.4.0.5", state: "stops" },
      ],
      sourceOnWire: "10.4.0.5",
      verdict: hostile,
    },
  ],
  missing: [{ file: "captures/<name>.pcap", would_decide: hostile }],
  diagnostics: [],
};

describe("renderHtml", () => {
  const page = renderHtml(answer);
  it("escapes every value taken from the input", () => {
    assert.doesNotMatch(page, /<script>/);
    assert.match(page, /&lt;script&gt;alert\(1\)&lt;\/script&gt;&amp;&quot;&#39;/);
  });
  it("is one self-contained page: no script, no external resource", () => {
    assert.doesNotMatch(page, /<script|<link|src="http|href="http/);
  });
  it("draws each path as SVG with the stop marked", () => {
    assert.equal((page.match(/<svg /g) ?? []).length, 1);
    assert.match(page, /stops here/);
    assert.match(page, /src 10\.4\.0\.5/);
  });
});

describe("html", () => {
  it("escapes interpolations and joins arrays, passing nested html through", () => {
    const inner = html`<b>${"<i>"}</b>`;
    assert.equal(html`<p>${["a&", inner]}</p>`.value, "<p>a&amp;<b>&lt;i&gt;</b></p>");
    assert.equal(escapeHtml(`<"'&>`), "&lt;&quot;&#39;&amp;&gt;");
  });
});

describe("renderHtml on the seed example: the verdict, the summary and its path come first", () => {
  it("orders verdict, cause and fix, the verdict's path, then the findings", async () => {
    const { diagnose } = await import("../questions/diagnose.ts");
    const { loadSnapshot } = await import("../snapshot/load.ts");
    const { openSnapshot } = await import("../snapshot/source.ts");
    const { join } = await import("node:path");
    const a = await diagnose(
      loadSnapshot(openSnapshot(join(import.meta.dirname, "../../examples/snat-exception-list"))),
      {},
    );
    const page = renderHtml(a);
    const at = (needle: string) => {
      const i = page.indexOf(needle);
      assert.ok(i >= 0, needle);
      return i;
    };
    const verdict = at('<p class="verdict');
    const cause = at("<dt>cause</dt>");
    const fix = at("<dt>fix</dt>");
    const path = at("<h2>Path</h2>");
    const findings = at("<h2>Findings</h2>");
    assert.ok(verdict < cause && cause < fix && fix < path && path < findings);
    assert.match(page.slice(fix, path), /podpath plan masquerade/);
  });
});
