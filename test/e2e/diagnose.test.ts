/**
 * End to end: the built CLI on the embedded example and on bad input (exit codes, stdout JSON,
 * messages that name the file). Needs `npm run build` first (npm test does it).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const CLI = join(import.meta.dirname, "../../dist/cli/main.js");
const EXAMPLE = join(import.meta.dirname, "../../examples/snat-exception-list");

function podpath(...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface Json {
  findings: {
    id: string;
    severity: string;
    evidence: { file: string; line: number; text?: string }[];
  }[];
  paths: { from: string; sourceOnWire?: string }[];
  missing: { file: string }[];
  diagnostics: { code: string; severity: string }[];
}

const tmp = mkdtempSync(join(tmpdir(), "pp-e2e-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** The text of line `n` (1-based) of a snapshot file. */
function lineOf(root: string, file: string, n: number): string {
  return readFileSync(join(root, file), "utf8").split("\n")[n - 1] ?? "";
}

describe("podpath diagnose on the embedded example", () => {
  const r = podpath("diagnose", EXAMPLE, "-o", "json");
  const json = JSON.parse(r.stdout) as Json;

  it("exits 1 (error findings) with schemaVersion 1 JSON on stdout only", () => {
    assert.equal(r.code, 1, r.stderr);
    assert.equal((JSON.parse(r.stdout) as { schemaVersion: number }).schemaVersion, 1);
  });

  it("names masq/exempt-destination with the RETURN rule's line and the ConfigMap line", () => {
    const f = json.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, JSON.stringify(json.findings.map((x) => x.id)));
    assert.equal(f.severity, "error");
    const rule = f.evidence.find((e) => e.file.endsWith("iptables-save.txt"));
    assert.ok(rule);
    // the cited line really is the RETURN for 10.0.0.0/8 in the agent's chain
    assert.match(
      lineOf(EXAMPLE, rule.file, rule.line),
      /-A IP-MASQ-AGENT -d 10\.0\.0\.0\/8 .*-j RETURN/,
    );
    const cm = f.evidence.find((e) => e.file.startsWith("cluster/"));
    assert.ok(cm);
    assert.match(lineOf(EXAMPLE, cm.file, cm.line), /- 10\.0\.0\.0\/8/);
  });

  it("finds the missing route back and the pod address on the wire", () => {
    const ids = json.findings.map((x) => x.id);
    assert.ok(ids.includes("masq/no-return-route"));
    const wire = json.findings.find((x) => x.id === "masq/wire-pod-source");
    assert.ok(wire);
    assert.ok(wire.evidence.some((e) => e.file.startsWith("captures/")));
  });

  it("traces the pod path to the pod address and the node path to the node address", () => {
    const pod = json.paths.find((p) => p.from.startsWith("pod/"));
    const node = json.paths.find((p) => p.from.startsWith("node/"));
    assert.ok(pod?.sourceOnWire && node?.sourceOnWire);
    assert.notEqual(pod.sourceOnWire, node.sourceOnWire);
  });

  it("prints the same findings as text, most important first", () => {
    const t = podpath("diagnose", EXAMPLE, "--no-color");
    assert.equal(t.code, 1);
    const first = t.stdout.split("\n").find((l) => /^(ERROR|WARN|INFO)/.test(l));
    assert.match(first ?? "", /^ERROR/);
    assert.match(t.stdout, /masq\/exempt-destination/);
    assert.doesNotMatch(t.stdout, /\x1b\[/);
  });
});

describe("podpath diagnose on bad input", () => {
  it("exits 2 naming the path when it does not exist", () => {
    const r = podpath("diagnose", join(tmp, "nope"));
    assert.equal(r.code, 2);
    assert.match(r.stderr, /nope: no such file or folder/);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  });
  it("exits 2 and says what a snapshot contains for a folder that is not one", () => {
    const d = join(tmp, "empty");
    mkdirSync(d);
    writeFileSync(join(d, "notes.md"), "hello");
    const r = podpath("diagnose", d);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /nothing in it is part of a snapshot/);
    assert.match(r.stderr, /nodes\/<node>\/iptables-save\.txt/);
  });
  it("exits 2 on a malformed --dest", () => {
    const r = podpath("diagnose", EXAMPLE, "--dest", "10.20.30.400");
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--dest "10\.20\.30\.400": expected an IP address/);
  });
  it("keeps using the rest of a snapshot when files are damaged, and names file and line", () => {
    const d = join(tmp, "damaged");
    cpSync(EXAMPLE, d, { recursive: true });
    const ipt = join(d, "nodes/gke-lab-default-0/iptables-save.txt");
    const text = readFileSync(ipt, "utf8");
    writeFileSync(ipt, text.replace(/COMMIT\n[\s\S]*$/, "")); // cut the dump before COMMIT
    writeFileSync(
      join(d, "cluster/broken.yaml"),
      "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n",
    );
    const r = podpath("diagnose", d, "-o", "json");
    assert.equal(r.code, 1, r.stderr);
    const json = JSON.parse(r.stdout) as Json;
    assert.ok(json.findings.some((f) => f.id === "masq/exempt-destination"));
    const codes = json.diagnostics.filter((x) => x.severity !== "info");
    assert.ok(codes.length >= 2, JSON.stringify(json.diagnostics));
    assert.ok(
      (json.diagnostics as unknown as { source?: { file: string } }[]).some((x) =>
        x.source?.file.includes("cluster/broken.yaml"),
      ),
    );
  });
  it("reads the same snapshot from a .tar.gz", () => {
    const archive = join(tmp, "snap.tar.gz");
    spawnSync("tar", ["-czf", archive, "-C", join(EXAMPLE, ".."), "snat-exception-list"]);
    const r = podpath("diagnose", archive, "-o", "json");
    assert.equal(r.code, 1, r.stderr);
    const json = JSON.parse(r.stdout) as Json;
    assert.ok(json.findings.some((f) => f.id === "masq/exempt-destination"));
  });
});
