/**
 * End to end: the built CLI's `verify` on the VPN lab snapshots (forwarding-off → fixed proves the
 * fix, exit 0; the reverse exits 1), and on the masquerade examples, whose output stays byte for
 * byte what `verify` wrote before it asked the cases (fixtures/verify-masquerade/README.md).
 * Needs `npm run build` first.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const LAB = "src/cases/vpn/testdata/vpn-lab";
const OFF = `${LAB}/forwarding-off`;
const FIXED = `${LAB}/fixed`;
const POD = "vpn/vpn-openvpn-6d9c7b5f4-x2x7k";
const GOLDEN = join(import.meta.dirname, "fixtures/verify-masquerade");

function podpath(...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The 1-based line of the first line of a snapshot file that matches `re`. */
function lineOf(rel: string, re: RegExp): number {
  const i = readFileSync(join(ROOT, rel), "utf8")
    .split("\n")
    .findIndex((l) => re.test(l));
  assert.ok(i >= 0, `${rel}: no line matches ${re}`);
  return i + 1;
}

interface VpnRecordJson {
  schemaVersion: number;
  question: string;
  case: string;
  proof: string;
  verdict: string;
  verdictText: string;
  forwarding: { before: { state: string }; after: { state: string } };
  firstSilentHop: { moved: string };
}

const tmp = mkdtempSync(join(tmpdir(), "pp-e2e-verify-vpn-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

describe("podpath verify on VPN snapshots (built CLI)", () => {
  const sysctl = `pods/${POD}/sysctl.txt`;
  const proof = () =>
    `net.ipv4.ip_forward 0 → 1 in pod ${POD} (${sysctl}:${lineOf(`${OFF}/${sysctl}`, /^net\.ipv4\.ip_forward = 0/)} → …:${lineOf(`${FIXED}/${sysctl}`, /^net\.ipv4\.ip_forward = 1/)}); the pod IP 10.244.2.20 now answers the client (probes/laptop.txt:${lineOf(`${FIXED}/probes/laptop.txt`, /^64 bytes from 10\.244\.2\.20/)})`;

  it("forwarding-off → fixed, -o json: exit 0, the VPN record with its one-line proof", () => {
    const r = podpath("verify", OFF, FIXED, "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const rec = JSON.parse(r.stdout) as VpnRecordJson;
    assert.equal(rec.schemaVersion, 1);
    assert.equal(rec.question, "verify");
    assert.equal(rec.case, "vpn");
    assert.equal(rec.verdict, "intended");
    assert.equal(rec.proof, proof());
    assert.deepEqual(
      [rec.forwarding.before.state, rec.forwarding.after.state, rec.firstSilentHop.moved],
      ["off", "on", "vanished"],
    );
  });

  it("forwarding-off → fixed, -o md: the proof is the first evidence line", () => {
    const r = podpath("verify", OFF, FIXED, "-o", "md");
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split("\n");
    assert.equal(lines[0], "# Change record: VPN pod forwarding");
    assert.equal(lines[2], `- Proof: \`${proof()}\``);
    assert.match(lines[3]!, /\*\*INTENDED\*\*/);
    // no masquerade record on VPN snapshots
    assert.doesNotMatch(r.stdout, /ip-masq-agent/);
  });

  it("fixed → forwarding-off: exit 1, not intended, with the reason", () => {
    const r = podpath("verify", FIXED, OFF, "-o", "json");
    assert.equal(r.code, 1, r.stderr);
    const rec = JSON.parse(r.stdout) as VpnRecordJson;
    assert.equal(rec.verdict, "not-intended");
    assert.match(rec.verdictText, /reads 0 in vpn\/vpn-openvpn-6d9c7b5f4-x2x7k after the change/);
    assert.match(rec.proof, /^net\.ipv4\.ip_forward 1 → 0 /);
  });

  it("snapshots with nothing any case compares: exit 2, no answer", () => {
    // the lab's node files alone: no agent, no far side, no VPN pod
    const only = (from: string, name: string) => {
      const dir = join(tmp, name);
      cpSync(join(ROOT, from, "nodes"), join(dir, "nodes"), { recursive: true });
      return dir;
    };
    const r = podpath("verify", only(OFF, "nodes-before"), only(FIXED, "nodes-after"));
    assert.equal(r.code, 2, r.stdout);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /holds anything a case compares/);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  });
});

describe("podpath verify on the masquerade examples: the output of before", () => {
  const pairs = [
    ["fixed", "examples/snat-exception-list", "examples/snat-exception-list-allowlisted", 0],
    ["rolled-back", "examples/snat-exception-list-allowlisted", "examples/snat-exception-list", 0],
  ] as const;
  for (const [name, b, a, code] of pairs) {
    for (const format of ["json", "md", "text"] as const) {
      it(`${name}, -o ${format}: byte for byte, exit ${code}`, () => {
        const r = podpath("verify", b, a, "-o", format);
        assert.equal(r.code, code, r.stderr);
        assert.equal(r.stdout, readFileSync(join(GOLDEN, `${name}.${format}`), "utf8"));
      });
    }
  }
});
