import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Answer } from "../model/answer.ts";
import { diagnose } from "../questions/diagnose.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { renderHtml } from "./html.ts";
import { renderMarkdown } from "./markdown.ts";
import { mdLines } from "./markdown-escape.ts";

const answerOf = async (dir: string): Promise<Answer> => diagnose(loadSnapshot(openSnapshot(dir)));

/** Where each string first occurs in `text`; all must. */
function positions(text: string, parts: readonly string[]): number[] {
  const at = parts.map((p) => text.indexOf(p));
  assert.ok(
    at.every((i) => i >= 0),
    JSON.stringify(parts.filter((_, i) => at[i]! < 0)),
  );
  return at;
}
const ascending = (xs: readonly number[]) => xs.every((x, i) => i === 0 || xs[i - 1]! < x);

describe("Markdown and HTML follow the same cause-first order as text", async () => {
  const seed = await answerOf("examples/snat-exception-list");
  const pools = await answerOf("src/cases/masquerade/fixtures/three-pools");

  it("Markdown: verdict, title, cause, fix, the verdict's path, then the findings by cause", () => {
    const md = renderMarkdown(seed);
    const at = positions(md, [
      "**BROKEN**",
      "# podpath diagnose",
      "**Cause:** A packet from pod 10.4.0.5",
      "**Fix:** narrow the exemption",
      "`podpath plan masquerade examples/snat-exception-list --dest 10.20.30.40`",
      "| remote/onprem-dc1 | sees 10.4.0.5",
      "## ERROR: Pod traffic to 10.20.30.40",
      "### ERROR: onprem-dc1 has no way back",
      "`masq/no-return-route` · remote/onprem-dc1 · follows from `masq/exempt-destination`",
      "### ERROR: The pod address 10.4.0.5 leaves",
      "## INFO: Requests to 10.20.30.40",
      "## Other paths",
    ]);
    assert.ok(ascending(at), JSON.stringify(at));
    // each explanation's first line, escaped as Markdown (report/markdown-escape)
    for (const f of seed.findings) {
      assert.ok(md.includes(mdLines(f.explanation.split("\n")[0]!)), f.id);
    }
  });

  it("Markdown: three pools open with the missing agent on pool legacy", () => {
    const md = renderMarkdown(pools);
    assert.match(
      md.split("\n")[0]!,
      /^\*\*BROKEN\*\* .*ip-masq-agent does not run on node pool legacy, so .*\(`masq\/agent-missing`\)$/,
    );
    assert.match(
      md,
      /\*\*Next:\*\* `kubectl -n kube-system get pods -l k8s-app=ip-masq-agent -o wide`/,
    );
  });

  it("HTML: the verdict from the root cause, findings by cause, consequences marked, every evidence line kept", () => {
    const page = renderHtml(pools);
    assert.match(
      page,
      /<strong>BROKEN<\/strong> [^<]*ip-masq-agent does not run on node pool legacy, so /,
    );
    const at = positions(page, [
      "<code>masq/agent-missing</code> · pool/legacy</p>",
      "<code>masq/exempt-destination</code> · node/gke-lab-legacy-1 · follows from <code>masq/agent-missing</code>",
      "<code>masq/no-return-route</code> · remote/onprem-dc1 · follows from <code>masq/exempt-destination</code>",
      "<code>masq/remote-allowlist-rejects</code>",
    ]);
    assert.ok(ascending(at), JSON.stringify(at));
    assert.equal(page.match(/class="finding [a-z]+ consequence"/g)?.length, 2);
    const seedPage = renderHtml(seed);
    for (const f of seed.findings) {
      for (const e of f.evidence)
        assert.ok(seedPage.includes(`${e.file}:${e.line}`), `${e.file}:${e.line}`);
    }
  });
});
