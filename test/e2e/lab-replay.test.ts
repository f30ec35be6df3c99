/**
 * End-to-end: `podpath lab replay` on the example node's rules, as text and JSON, and its
 * usage errors (exit 2, naming the file and what was expected).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { kernelSkip } from "../../src/lab/kernel-guard.ts";

const ROOT = join(import.meta.dirname, "../..");
const EXAMPLE = "examples/snat-exception-list/nodes/gke-lab-default-0/iptables-save.txt";

function podpath(args: readonly string[]) {
  return spawnSync(process.execPath, ["--import", "tsx", join(ROOT, "src/cli/main.ts"), ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 60_000,
  });
}

describe("lab replay (end to end)", { skip: kernelSkip() }, () => {
  it("prints the kernel's source next to the evaluator's, agreeing on the exempt destination", () => {
    const r = podpath([
      "lab",
      "replay",
      "--iptables",
      EXAMPLE,
      "--flow",
      "10.4.0.5->10.20.30.40:5432",
    ]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^kernel +source 10\.4\.0\.5:\d+ on the wire/m);
    assert.match(r.stdout, /^evaluator +keep: unchanged 10\.4\.0\.5$/m);
    assert.match(r.stdout, /^verdict +agree$/m);
  });

  it("writes JSON with the deciding rule's file and line", () => {
    const r = podpath([
      "lab",
      "replay",
      "--iptables",
      EXAMPLE,
      "--flow",
      "10.4.0.5->8.8.8.8:53",
      "--proto",
      "udp",
      "--node-ip",
      "10.128.0.9",
      "-o",
      "json",
    ]);
    assert.equal(r.status, 0, r.stderr);
    const j = JSON.parse(r.stdout) as {
      schemaVersion: number;
      kernel: { source: string };
      predicted: { decision: string; rule: { file: string; line: number; text: string } };
      agree: boolean;
    };
    assert.equal(j.schemaVersion, 1);
    assert.equal(j.kernel.source, "10.128.0.9");
    assert.equal(j.predicted.decision, "masquerade");
    assert.equal(j.predicted.rule.file, EXAMPLE);
    assert.match(j.predicted.rule.text, /-j MASQUERADE/);
    assert.equal(j.agree, true);
  });

  it("names the file and line the kernel refuses, with exit 2", (t) => {
    const dir = mkdtempSync(join(tmpdir(), "podpath-replay-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const bad = join(dir, "bad.txt");
    writeFileSync(
      bad,
      "# node dump\n*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -m nosuchmatch -j MASQUERADE\nCOMMIT\n",
    );
    const r = podpath(["lab", "replay", "--iptables", bad, "--flow", "10.4.0.5->8.8.8.8"]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /bad\.txt: line 4: -A POSTROUTING -m nosuchmatch/);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  });

  it("refuses a dump with lines its own reader flags invalid, unless --skip-invalid", (t) => {
    const dir = mkdtempSync(join(tmpdir(), "podpath-replay-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const lines = readFileSync(join(ROOT, EXAMPLE), "utf8").split("\n");
    // after the POSTROUTING declaration: a rule for a chain the dump never declares, which the
    // kernel would refuse too, so a replay that loaded it could not succeed
    const at = lines.findIndex((l) => l.startsWith(":POSTROUTING")) + 1;
    lines.splice(at, 0, "-A NOT-DECLARED -j RETURN");
    const dump = join(dir, "invalid.txt");
    writeFileSync(dump, lines.join("\n"));
    const flow = ["--flow", "10.4.0.5->10.20.30.40:5432"];
    const refused = podpath(["lab", "replay", "--iptables", dump, ...flow]);
    assert.equal(refused.status, 2, refused.stderr);
    assert.match(
      refused.stderr,
      new RegExp(
        `invalid\\.txt: line ${at + 1}: chain NOT-DECLARED gets rules but was never declared .*"-A NOT-DECLARED -j RETURN"; 1 line\\(s\\) of the nat table cannot be read.*--skip-invalid`,
      ),
    );
    assert.doesNotMatch(refused.stderr, /\n\s+at /);
    assert.equal(refused.stdout, "");
    const skipped = podpath(["lab", "replay", "--iptables", dump, ...flow, "--skip-invalid"]);
    assert.equal(skipped.status, 0, skipped.stderr);
    assert.match(skipped.stderr, new RegExp(`invalid\\.txt:${at + 1}: error: chain NOT-DECLARED`));
    assert.match(skipped.stdout, /^verdict +agree$/m);
  });

  it("rejects a bad flow, an unreadable file and unknown options with exit 2", () => {
    const flow = podpath(["lab", "replay", "--iptables", EXAMPLE, "--flow", "10.4.0.5=>x"]);
    assert.equal(flow.status, 2);
    assert.match(flow.stderr, /expected SRC->DST/);
    const file = podpath([
      "lab",
      "replay",
      "--iptables",
      "/nonexistent/x",
      "--flow",
      "10.4.0.5->8.8.8.8",
    ]);
    assert.equal(file.status, 2);
    assert.match(file.stderr, /cannot read \/nonexistent\/x/);
    const opt = podpath([
      "lab",
      "replay",
      "--iptables",
      EXAMPLE,
      "--flow",
      "10.4.0.5->8.8.8.8",
      "--bogus",
    ]);
    assert.equal(opt.status, 2);
    assert.match(opt.stderr, /--bogus/);
  });
});
