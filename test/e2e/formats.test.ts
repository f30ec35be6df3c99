/**
 * End to end: every question answers in text, JSON, Markdown and HTML through the built CLI
 * (dist/cli/main.js). JSON opens with the envelope (schemaVersion, tool, question); HTML is one
 * standalone page (one <html>, no script, nothing fetched, its tags balanced) with input escaped;
 * Markdown escapes input (a file name with `|`, backticks and `<`). Not here: probe (it sends
 * packets), collect (a cluster), lab run (root; see lab tests).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const EXAMPLE = "examples/snat-exception-list";
const FIXED = "examples/snat-exception-list-allowlisted";
const VPN_LAB = "src/cases/vpn/testdata/vpn-lab";
const VPN_POD = "vpn/vpn-openvpn-6d9c7b5f4-x2x7k";
const PCAP = "src/capture/fixtures/captured/any-sll2.pcap";
const CM = "src/agents/ip-masq-agent/fixtures/configmap-onprem.yaml";

function podpath(args: readonly string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 60_000,
    env: { ...process.env, NO_COLOR: "1" },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** One standalone page: one html element, no script, nothing fetched, balanced block tags. */
function assertPage(page: string, what: string): void {
  assert.ok(page.startsWith("<!doctype html>"), `${what}: no doctype`);
  assert.equal(page.match(/<html\b/g)?.length, 1, `${what}: <html> count`);
  assert.equal(page.match(/<\/html>/g)?.length, 1, `${what}: </html> count`);
  assert.doesNotMatch(page, /<script|<link\b|<img\b|<iframe|\b(src|href)=/i, what);
  for (const tag of ["body", "section", "table", "ul", "details", "pre", "dl"]) {
    const open = page.match(new RegExp(`<${tag}[ >]`, "g"))?.length ?? 0;
    const close = page.match(new RegExp(`</${tag}>`, "g"))?.length ?? 0;
    assert.equal(open, close, `${what}: <${tag}> ${open} opened, ${close} closed`);
  }
}

const QUESTIONS: readonly (readonly [string, readonly string[]])[] = [
  ["diagnose", ["diagnose", EXAMPLE]],
  ["plan masquerade", ["plan", "masquerade", EXAMPLE]],
  ["plan vpn", ["plan", "vpn", `${VPN_LAB}/baseline-ns`, "--pod", VPN_POD]],
  ["verify", ["verify", EXAMPLE, FIXED]],
  ["verify", ["verify", `${VPN_LAB}/forwarding-off`, `${VPN_LAB}/fixed`]],
  ["capture read", ["capture", "read", PCAP]],
  ["capture flows", ["capture", "flows", PCAP]],
  ["capture talkers", ["capture", "flows", PCAP, "--host", "10.99.0.2", "--talkers"]],
  [
    "admission-check",
    [
      "admission",
      "check",
      "src/agents/pod-security/fixtures/manifests/vpn-namespace-baseline.yaml",
    ],
  ],
  ["ipmasq config", ["ipmasq", "config", CM]],
  ["ipmasq rules", ["ipmasq", "rules", CM]],
];

describe("every question in every format (built CLI)", () => {
  before(() =>
    assert.ok(existsSync(CLI), "dist/cli/main.js is missing: npx tsc -p tsconfig.build.json"),
  );

  for (const [question, args] of QUESTIONS) {
    const what = `podpath ${args.join(" ")}`;
    it(`${what}: text, json, md and html answer the same way`, () => {
      const runs = Object.fromEntries(
        (["text", "json", "md", "html"] as const).map((f) => [f, podpath([...args, "-o", f])]),
      );
      const codes = new Set(Object.values(runs).map((r) => r.status));
      assert.equal(codes.size, 1, `${what}: exit codes differ by format`);
      assert.ok([0, 1].includes(runs["text"]!.status ?? -1), `${what}: ${runs["text"]!.stderr}`);
      for (const [f, r] of Object.entries(runs)) {
        assert.notEqual(r.stdout.trim(), "", `${what} -o ${f}: nothing written`);
        assert.doesNotMatch(r.stderr, /\n\s+at .+:\d+:\d+/, `${what} -o ${f}: stack trace`);
      }
      // ipmasq's JSON is the agent's own; every other answer opens with the envelope
      if (!question.startsWith("ipmasq")) {
        const json = JSON.parse(runs["json"]!.stdout) as Record<string, unknown>;
        assert.deepEqual(Object.keys(json).slice(0, 3), ["schemaVersion", "tool", "question"]);
        assert.equal(json["question"], question);
        assert.equal(json["schemaVersion"], 1);
      }
      assertPage(runs["html"]!.stdout, `${what} -o html`);
      assert.ok(!runs["md"]!.stdout.startsWith("<!doctype"), `${what} -o md is not Markdown`);
    });
  }

  it("verify writes text by default, the same as -o text", () => {
    const dflt = podpath(["verify", EXAMPLE, FIXED]);
    assert.equal(dflt.stdout, podpath(["verify", EXAMPLE, FIXED, "-o", "text"]).stdout);
    assert.match(dflt.stdout, /^Change record: ip-masq-agent non-masquerade list\n/);
  });
});

describe("input is escaped in Markdown and HTML (built CLI)", () => {
  let dir = "";
  let hostile = "";
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "podpath-e2e-formats-"));
    hostile = join(dir, "a|b`c`<i>x.pcap");
    copyFileSync(join(ROOT, PCAP), hostile);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("capture read: a file name with | ` < is escaped", () => {
    const md = podpath(["capture", "read", hostile, "-o", "md"]);
    assert.equal(md.status, 0, md.stderr);
    const title = md.stdout.split("\n")[0]!;
    assert.ok(title.includes("a\\|b\\`c\\`\\<i\\>x.pcap"), title);
    const html = podpath(["capture", "read", hostile, "-o", "html"]);
    assertPage(html.stdout, "capture read -o html");
    assert.ok(html.stdout.includes("a|b`c`&lt;i&gt;x.pcap"), "escaped in HTML");
    assert.doesNotMatch(html.stdout, /<i>x/);
  });

  it("capture flows: the same name in the Markdown paragraph and the HTML page", () => {
    const md = podpath(["capture", "flows", hostile, "-o", "md"]);
    assert.ok(md.stdout.includes("a\\|b\\`c\\`\\<i\\>x.pcap: "), md.stdout.slice(0, 300));
    const html = podpath(["capture", "flows", hostile, "-o", "html"]);
    assertPage(html.stdout, "capture flows -o html");
    assert.doesNotMatch(html.stdout, /<i>x/);
  });
});
