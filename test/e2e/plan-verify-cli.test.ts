/**
 * End to end: the built CLI's `plan masquerade` and `verify` on the embedded example pair and on
 * bad input (exit codes, stdout only the answer, messages that say what was expected, no stack
 * traces). Needs `npm run build` first (npm test does it).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parse } from "yaml";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const BEFORE = join(ROOT, "examples/snat-exception-list");
const FIXED = join(ROOT, "examples/snat-exception-list-allowlisted");

function podpath(...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const tmp = mkdtempSync(join(tmpdir(), "pp-e2e-plan-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

const noStack = (stderr: string) => assert.doesNotMatch(stderr, /\n\s+at .+:\d+:\d+/);

describe("podpath plan masquerade (built CLI)", () => {
  it("-o json: the plan, exit 0", () => {
    const r = podpath("plan", "masquerade", BEFORE, "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout) as {
      question: string;
      narrow: { newList: { cidr: string }[]; newConfigMap: string };
      replay: unknown[];
    };
    assert.equal(plan.question, "plan masquerade");
    assert.deepEqual(
      plan.narrow.newList.map((n) => n.cidr),
      ["10.4.0.0/24", "10.128.0.0/20"],
    );
    assert.deepEqual(plan.replay, []);
  });

  it("-o yaml parses to the same plan", () => {
    const y = parse(podpath("plan", "masquerade", BEFORE, "-o", "yaml").stdout) as {
      strategy: string;
      podRanges: string[];
    };
    assert.equal(y.strategy, "narrow");
    assert.deepEqual(y.podRanges, ["10.4.0.0/24"]);
  });

  it("--write puts both ConfigMaps where the printed commands name them", () => {
    const dir = join(tmp, "change");
    const r = podpath("plan", "masquerade", BEFORE, "--pod-range", "10.4.0.0/14", "--write", dir);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`\\$ kubectl apply -f ${dir}/ip-masq-agent\\.new\\.yaml`));
    assert.match(
      r.stdout,
      new RegExp(`\\$ kubectl apply -f ${dir}/ip-masq-agent\\.previous\\.yaml`),
    );
    const next = parse(readFileSync(join(dir, "ip-masq-agent.new.yaml"), "utf8")) as {
      data: { config: string };
    };
    assert.match(next.data.config, /- 10\.4\.0\.0\/14\n/);
    const prev = parse(readFileSync(join(dir, "ip-masq-agent.previous.yaml"), "utf8")) as {
      data: { config: string };
    };
    assert.match(prev.data.config, /- 10\.0\.0\.0\/8\n/);
    assert.match(r.stderr, /wrote .*ip-masq-agent\.new\.yaml/);
  });

  it("--strategy keep-pod-identity prints the site diff and the trade-off", () => {
    const r = podpath("plan", "masquerade", BEFORE, "--strategy", "keep-pod-identity");
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /\+ {3}- 10\.4\.0\.0\/24/);
    assert.match(r.stdout, /Trade-off: narrow vs keep pod identity/);
  });

  const bad: [string, string[], RegExp][] = [
    [
      "a bad --pod-range",
      ["--pod-range", "10.4.0.0/33"],
      /--pod-range "10\.4\.0\.0\/33": .*expected CIDRs/,
    ],
    [
      "--dest inside the pod range",
      ["--dest", "10.4.0.9:80"],
      /10\.4\.0\.9 is inside the pod range/,
    ],
    ["a bad --dest", ["--dest", "10.20.30.400"], /10\.20\.30\.400/],
  ];
  for (const [what, args, message] of bad) {
    it(`${what}: exit 2 with a clear message`, () => {
      const r = podpath("plan", "masquerade", BEFORE, ...args);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.equal(r.stdout, "");
      noStack(r.stderr);
    });
  }

  it("a snapshot without Nodes: exit 2, says what to collect", () => {
    const dir = join(tmp, "no-nodes");
    cpSync(BEFORE, dir, { recursive: true });
    rmSync(join(dir, "cluster/nodes.yaml"));
    const r = podpath("plan", "masquerade", dir);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /pod range is not known: no Node in cluster\/\*\.yaml/);
    assert.match(r.stderr, /kubectl get nodes -o yaml/);
    noStack(r.stderr);
  });

  it("no such snapshot: exit 2", () => {
    const r = podpath("plan", "masquerade", join(tmp, "nope"));
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no such file or folder/);
    noStack(r.stderr);
  });
});

describe("podpath verify (built CLI)", () => {
  it("writes the change record as text by default, exit 0 when fixed", () => {
    const r = podpath("verify", BEFORE, FIXED);
    assert.equal(r.code, 0, r.stderr);
    const text = r.stdout.split("\n");
    assert.equal(text[0], "Change record: ip-masq-agent non-masquerade list");
    assert.equal(text[2], "- Proof:");
    assert.match(text[3]!, /^ {2}tcp 10\.4\.0\.5 → 10\.20\.30\.40:5432: before 10\.4\.0\.5 /);
    assert.match(r.stdout, /^- Verdict: FIXED: /m);
  });

  it("writes the change record as Markdown with -o md", () => {
    const r = podpath("verify", BEFORE, FIXED, "-o", "md");
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split("\n");
    assert.match(
      lines[2]!,
      /^- Proof: `tcp 10\.4\.0\.5 → 10\.20\.30\.40:5432: before 10\.4\.0\.5 \(SYN only, no reply\) · after 10\.128\.0\.2 \(handshake and data completed\)`$/,
    );
    assert.match(lines[3]!, /\*\*FIXED\*\*/);
  });

  it("-o json, and the rollback pair", () => {
    const r = podpath("verify", FIXED, BEFORE, "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const rec = JSON.parse(r.stdout) as { verdict: string; schemaVersion: number; proof: string };
    assert.equal(rec.schemaVersion, 1);
    assert.equal(rec.verdict, "rolled-back");
  });

  it("a partly applied change exits 1", () => {
    // the fixed example with its node's rules put back: the ConfigMap changed, the kernel did not
    const dir = join(tmp, "not-applied");
    cpSync(FIXED, dir, { recursive: true });
    writeFileSync(
      join(dir, "nodes/gke-lab-default-0/iptables-save.txt"),
      readFileSync(join(BEFORE, "nodes/gke-lab-default-0/iptables-save.txt")),
    );
    const r = podpath("verify", BEFORE, dir, "-o", "json");
    assert.equal(r.code, 1, r.stderr);
    const rec = JSON.parse(r.stdout) as { verdict: string; verdictText: string };
    assert.equal(rec.verdict, "not-applied-on-node");
    assert.match(rec.verdictText, /gke-lab-default-0/);
  });

  it("bad input: exit 2 without a stack trace", () => {
    for (const args of [[BEFORE], [BEFORE, join(tmp, "nope")], [BEFORE, FIXED, "--dest", "x:y"]]) {
      const r = podpath("verify", ...args);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.equal(r.stdout, "");
      noStack(r.stderr);
    }
  });
});
