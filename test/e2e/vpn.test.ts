/**
 * End to end: the built CLI's VPN commands (`plan vpn`, `probe`, and `diagnose` on the VPN lab
 * snapshots): exit codes, stdout JSON, one-line usage errors. Needs `npm run build` first.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseProbeJson } from "../../src/evidence/probes.ts";

const CLI = join(import.meta.dirname, "../../dist/cli/main.js");
const LAB = join(import.meta.dirname, "../../src/cases/vpn/testdata/vpn-lab");
const POD = "vpn/vpn-openvpn-6d9c7b5f4-x2x7k";

function podpath(...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const tmp = mkdtempSync(join(tmpdir(), "pp-e2e-vpn-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

describe("podpath plan vpn", () => {
  it("prints the plan as JSON with admission per strategy", () => {
    const r = podpath("plan", "vpn", join(LAB, "baseline-ns"), "--pod", POD, "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(r.stdout);
    assert.equal(plan.pod, POD);
    assert.deepEqual(
      plan.strategies.map((s: { strategy: string; admission?: { allowed: string } }) => [
        s.strategy,
        s.admission?.allowed,
      ]),
      [
        ["init-container", "no"],
        ["pod-sysctls", "no"],
        ["chart-value", "no"],
      ],
    );
    assert.ok(plan.verify.some((v: string) => v.includes("sysctl net.ipv4.ip_forward")));
  });

  it("one strategy in text, with the patch and the check after rollout", () => {
    const r = podpath(
      "plan",
      "vpn",
      join(LAB, "set-by-hand"),
      "--pod",
      POD,
      "--strategy",
      "pod-sysctls",
    );
    assert.equal(r.code, 0, r.stderr);
    // a section per strategy, its title flush left (the plan's document rendered as text)
    assert.match(r.stdout, /^pod-sysctls$/m);
    assert.doesNotMatch(r.stdout, /^init-container$/m);
    assert.match(r.stdout, /^ {2}strategic-merge patch$/m);
    assert.match(r.stdout, /^after the rollout$/m);
  });

  it("refuses a bad --pod and a missing snapshot with one line and exit 2", () => {
    for (const args of [
      ["plan", "vpn", join(LAB, "set-by-hand"), "--pod", "not-a-pod"],
      ["plan", "vpn", join(tmp, "nope"), "--pod", POD],
      ["plan", "vpn", join(LAB, "set-by-hand"), "--pod", "vpn/absent"],
    ]) {
      const r = podpath(...args);
      assert.equal(r.code, 2, args.join(" "));
      assert.equal(r.stdout, "");
      assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
    }
  });
});

describe("podpath diagnose on the VPN lab snapshots", () => {
  for (const [variant, id] of [
    ["forwarding-off", "vpn/forwarding-disabled"],
    ["no-masquerade", "vpn/client-pool-unroutable"],
    ["pool-policy", "vpn/policy-source-mismatch"],
    ["dns-broken", "vpn/dns-layer"],
    ["set-by-hand", "vpn/forwarding-not-durable"],
  ] as const) {
    it(`${variant} → ${id}`, () => {
      const r = podpath("diagnose", join(LAB, variant), "-o", "json");
      const doc = JSON.parse(r.stdout);
      assert.ok(doc.findings.some((f: { id: string }) => f.id === id));
      assert.equal(
        r.code,
        doc.findings.some((f: { severity: string }) => f.severity === "error") ? 1 : 0,
      );
    });
  }
});

describe("podpath probe", () => {
  it("refuses to run without a target, or with a bad address", () => {
    for (const args of [
      ["probe"],
      ["probe", "--peer", "10.8.0.300"],
      ["probe", "--peer", "10.8.0.1", "--count", "0"],
    ]) {
      const r = podpath(...args);
      assert.equal(r.code, 2, args.join(" "));
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    }
  });

  it("probes loopback and writes the transcript to --out", () => {
    const out = join(tmp, "probe.txt");
    const r = podpath(
      "probe",
      "--peer",
      "127.0.0.1",
      "--count",
      "1",
      "--timeout-ms",
      "1000",
      "--out",
      out,
      "-o",
      "json",
    );
    assert.equal(r.code, 0, r.stderr);
    const doc = JSON.parse(r.stdout);
    assert.equal(doc.question, "probe");
    assert.equal(doc.steps[0].role, "peer");
    assert.equal(doc.steps[0].answered, true);
    assert.match(readFileSync(out, "utf8"), /# peer/);
    // saved as probes/*.json, it reads back with the JSON file's own line numbers
    const back = parseProbeJson(r.stdout, "probes/laptop.json");
    assert.deepEqual(back.diagnostics, []);
    assert.equal(back.value.commands[0]?.role, "peer");
    assert.match(
      r.stdout.split("\n")[back.value.commands[0]!.source.line - 1]!,
      /\$ ping .*# peer/,
    );
  });
});
