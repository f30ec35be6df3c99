import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Answer } from "../model/answer.ts";
import type { Finding } from "../model/types.ts";
import { diagnose } from "../questions/diagnose.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { PLAIN, renderFinding, renderText } from "./text.ts";

const answerOf = async (dir: string): Promise<Answer> => diagnose(loadSnapshot(openSnapshot(dir)));

/** Lines allowed past the width: the verdict (one line, for `head -1`), commands, single words. */
function overWidth(text: string, width: number): string[] {
  return text
    .split("\n")
    .slice(1)
    .filter((l) => l.length > width)
    .filter((l) => !/^\s*(\$ |kubectl |iptables-save |tcpdump |podpath |show |compare )/.test(l))
    .filter((l) => l.replace(/^[\s│·✗↺?↳]*/, "").includes(" "));
}

describe("diagnose as text, the seed example", async () => {
  const answer = await answerOf("examples/snat-exception-list");
  const text = renderText(answer, PLAIN);
  const lines = text.split("\n");
  const at = (re: RegExp) => lines.findIndex((l) => re.test(l));

  it("opens with verdict, cause, what follows, fix and the verdict's path, in one screen", () => {
    assert.match(lines[0]!, /^BROKEN {2}pod\/default\/billing-default → 10\.20\.30\.40:5432: /);
    assert.equal(at(/^cause /), 1);
    const order = [
      /^cause /,
      /^then /,
      /^fix /,
      /^\s+\$ podpath plan masquerade/,
      /^pod\/default\/billing-default → /,
      /^ {2}⇒ /,
    ];
    const found = order.map(at);
    assert.ok(
      found.every((i) => i > 0),
      JSON.stringify(found),
    );
    assert.deepEqual(
      [...found].sort((a, b) => a - b),
      found,
      "in this order",
    );
    const pathEnd = found.at(-1)!;
    // the summary ends with the path's verdict (it may wrap one more line)
    assert.ok(pathEnd < 22, `summary block: ${pathEnd + 2} lines`);
    assert.ok(at(/^(ERROR|WARN|INFO) /) > pathEnd, "details after the summary");
  });

  it("orders findings by cause: each consequence right under the cause it follows from", () => {
    const exempt = at(/^ERROR {2}Pod traffic to 10\.20\.30\.40 keeps/);
    const route = at(/^↳ {2}ERROR {2}onprem-dc1 has no way back/);
    const wire = at(/^↳ {2}ERROR {2}The pod address 10\.4\.0\.5 leaves toward/);
    const node = at(/^INFO {3}Requests to 10\.20\.30\.40 leave with the node address/);
    assert.ok(
      exempt > 0 && exempt < route && route < wire && wire < node,
      `${exempt} ${route} ${wire} ${node}`,
    );
    assert.match(
      lines[route + 1]!,
      /masq\/no-return-route · remote\/onprem-dc1 · follows from masq\/exempt-destination/,
    );
  });

  it("never cuts evidence: the deciding rule's -j RETURN is on the page, nothing ends in …", () => {
    assert.doesNotMatch(text, /…\n/);
    const rule = at(/^ {9}nodes\/gke-lab-default-0\/iptables-save\.txt:10 {2}-A IP-MASQ-AGENT/);
    assert.ok(rule > 0);
    const shownRule = lines
      .slice(rule, rule + 4)
      .join(" ")
      .replace(/\s+/g, " ");
    const exempt = answer.findings.find((f) => f.id === "masq/exempt-destination")!;
    const ruleText = exempt.evidence[0]!.text!.trim();
    assert.match(ruleText, /-j RETURN$/);
    assert.ok(shownRule.includes(ruleText), shownRule);
    assert.deepEqual(overWidth(text, 100), []);
  });

  it("wraps to a narrower terminal without losing a word", () => {
    const narrow = renderText(answer, PLAIN, 72);
    assert.deepEqual(overWidth(narrow, 72), []);
    const words = (t: string) =>
      t
        .split(/\s+/)
        .filter((w) => /^[\w./:-]{3,}$/.test(w))
        .sort();
    assert.deepEqual(words(narrow), words(text));
  });

  it("keeps every finding's words; a per-capture list repeated under another finding is said once", () => {
    for (const f of answer.findings) assert.ok(text.includes(f.title), f.title);
    const perCapture = "Source address toward 10.20.30.40, as each capture saw it:";
    assert.equal(answer.findings.filter((f) => f.explanation.includes(perCapture)).length, 2);
    assert.equal(text.split(perCapture).length - 1, 1);
    assert.match(text, /\(5 lines as shown above under masq\/wire-pod-source\)/);
  });
});

describe("diagnose as text, three pools", () => {
  it("the first line names the missing agent on pool legacy", async () => {
    const text = renderText(await answerOf("src/cases/masquerade/fixtures/three-pools"));
    assert.match(
      text.split("\n")[0]!,
      /^BROKEN {2}pod\/default\/billing-legacy → 10\.20\.30\.40:5432: ip-masq-agent does not run on node pool legacy, .*\(masq\/agent-missing\)$/,
    );
  });
});

describe("a finding's evidence in a group", () => {
  const f = (file: string): Finding => ({
    id: "vpn/first-silent-hop",
    severity: "error",
    title: "t",
    subject: "client/laptop",
    explanation: "e",
    evidence: [
      { file, line: 14, text: "2 packets transmitted, 0 received" },
      { file, line: 4, text: "64 bytes" },
    ],
    next: [],
  });

  it("evidence already shown in the group is cited again without its text", () => {
    const shown = new Set(["probes/laptop.txt:14"]);
    const out = renderFinding(f("probes/laptop.txt"), PLAIN, { shownEvidence: shown });
    assert.match(out, /probes\/laptop\.txt:4 {2}64 bytes/);
    assert.doesNotMatch(out, /0 received/);
    assert.match(out, /also probes\/laptop\.txt:14 \(shown above\)/);
    assert.ok(shown.has("probes/laptop.txt:4"), "what it shows is shown for the next");
  });
});

describe("a finding that names many nodes", () => {
  it("says how many, in which pool, the first two and the last; JSON keeps them all", () => {
    const names = Array.from({ length: 100 }, (_, i) => `gke-prod-a-1f2e-${i}`);
    const f: Finding = {
      id: "masq/agent-missing",
      severity: "error",
      title: "ip-masq-agent does not run on node pool a",
      subject: "pool/a",
      explanation: `The DaemonSet kube-system/ip-masq-agent does not place its pod on ${names.join(", ")}: node gke-prod-a-1f2e-0 matches none of the 1 required node affinity term(s).`,
      evidence: [{ file: "cluster/ip-masq-agent.yaml", line: 41 }],
      next: [],
    };
    const out = renderFinding(f, PLAIN);
    assert.match(
      out.replace(/\s+/g, " "),
      /does not place its pod on 100 nodes in pool a: gke-prod-a-1f2e-0, gke-prod-a-1f2e-1, … gke-prod-a-1f2e-99 \(-o json lists all\): node gke-prod-a-1f2e-0 matches/,
    );
    assert.ok(out.split("\n").length < 10, out);
    assert.ok(f.explanation.includes("gke-prod-a-1f2e-57"), "the finding itself is untouched");
  });
});
