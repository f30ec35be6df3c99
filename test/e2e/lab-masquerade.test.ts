/**
 * End-to-end: every masquerade variant goes `podpath lab run` (real kernel) → `podpath diagnose`
 * → the expected finding ids. The snapshot must hold real artifacts in DESIGN.md's layout, and
 * what the kernel did (conntrack's reply tuple, the on-prem capture read back by tcpdump, the
 * probe transcripts) must match the variant. The root namespace's fingerprint must not change.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { kernelSkip } from "../../src/lab/kernel-guard.ts";
import { rootNamespaceHash } from "../../src/lab/root-state.ts";
import { LAB_VARIANTS, type LabVariant } from "./lab-variants.ts";

const ROOT = join(import.meta.dirname, "../..");
const CLI = [process.execPath, "--import", "tsx", join(ROOT, "src/cli/main.ts")];

export function podpath(args: readonly string[]) {
  const [cmd, ...pre] = CLI;
  return spawnSync(cmd!, [...pre, ...args], { cwd: ROOT, encoding: "utf8", timeout: 120_000 });
}

/** Node index from the replica's node name (`gke-lab-<pool>-<i>`). */
const indexOf = (node: string) => Number(node.split("-").at(-1));

function checkVariant(v: LabVariant, dir: string): void {
  for (const n of v.nodes) {
    const i = indexOf(n.node);
    const podIp = `10.4.${i}.5`;
    const nodeIp = `10.128.0.${2 + i}`;
    const pool = n.node.split("-").slice(2, -1).join("-");
    for (const f of ["iptables-save", "ip-route", "ip-addr", "sysctl", "conntrack"]) {
      assert.ok(existsSync(join(dir, `nodes/${n.node}/${f}.txt`)), `${v.name}: ${n.node} ${f}`);
    }
    if (v.name === "json-config") {
      // masqLinkLocal: true — the agent writes no RETURN for 169.254.0.0/16
      const rules = readFileSync(join(dir, `nodes/${n.node}/iptables-save.txt`), "utf8");
      assert.doesNotMatch(rules, /169\.254\.0\.0\/16/);
      assert.match(rules, /^-A IP-MASQ-AGENT -d 10\.4\.0\.0\/14 /m);
    }
    const sysctl = readFileSync(join(dir, `nodes/${n.node}/sysctl.txt`), "utf8");
    assert.match(sysctl, /^net\.ipv4\.ip_forward = 1$/m);
    // conntrack: original tuple from the pod; the reply tuple's dst is the source on the wire
    const conntrack = readFileSync(join(dir, `nodes/${n.node}/conntrack.txt`), "utf8");
    const entry = conntrack
      .split("\n")
      .find((l) => l.startsWith("icmp") && l.includes(`src=${podIp} dst=10.20.30.40`));
    assert.ok(entry, `${v.name}: no conntrack entry for the pod's ping:\n${conntrack}`);
    const replyDst = /src=10\.20\.30\.40 dst=(\S+)/.exec(entry)?.[1];
    assert.equal(replyDst, n.wireSource === "pod" ? podIp : nodeIp, `${v.name}: ${entry}`);
    assert.equal(entry.includes("[UNREPLIED]"), !n.replied, `${v.name}: ${entry}`);
    // the on-prem capture, read by tcpdump itself
    const remote = spawnSync(
      "tcpdump",
      ["-nn", "-r", join(dir, "captures/remote-onprem-dc1.pcap")],
      {
        encoding: "utf8",
      },
    ).stdout;
    const seen = n.wireSource === "pod" ? podIp : nodeIp;
    assert.match(
      remote,
      new RegExp(`IP ${seen.replaceAll(".", "\\.")} > 10\\.20\\.30\\.40: ICMP echo request`),
    );
    if (n.wireSource === "node")
      assert.doesNotMatch(remote, new RegExp(`IP ${podIp.replaceAll(".", "\\.")} >`));
    const replies = remote.includes(`IP 10.20.30.40 > ${seen}: ICMP echo reply`);
    if (n.wireSource === "pod")
      assert.equal(replies, n.replied, `${v.name}: replies in\n${remote}`);
    // the pod's transcript
    const probe = readFileSync(join(dir, `probes/pod-billing-${pool}.txt`), "utf8");
    assert.match(probe, /^\$ ping -c 3 /m);
    assert.match(probe, n.replied ? / 0% packet loss/ : / 100% packet loss/);
    // the application exchange: connected, and the listener's answer arrived
    const tcpAnswered = n.tcpAnswered ?? n.replied;
    assert.match(probe, tcpAnswered ? /succeeded!\npong$/m : /timed out/);
    // the database's SYN-ACK on the far side's wire, or none (its firewall drops the rest)
    const synAck = new RegExp(
      `IP 10\\.20\\.30\\.40\\.5432 > ${seen.replaceAll(".", "\\.")}\\.\\d+: Flags \\[S\\.\\]`,
    );
    assert.match(
      remote,
      new RegExp(
        `IP ${seen.replaceAll(".", "\\.")}\\.\\d+ > 10\\.20\\.30\\.40\\.5432: Flags \\[S\\]`,
      ),
    );
    assert.equal(synAck.test(remote), tcpAnswered, `${v.name}: SYN-ACK in\n${remote}`);
    assert.ok(existsSync(join(dir, `pods/default/billing-${pool}/ip-route.txt`)));
  }
  for (const f of [
    "cluster/nodes.yaml",
    "cluster/ip-masq-agent.yaml",
    "cluster/pods.yaml",
    "remote/onprem-dc1.yaml",
  ]) {
    assert.ok(existsSync(join(dir, f)), `${v.name}: ${f}`);
  }
  const meta = readFileSync(join(dir, "captures/remote-onprem-dc1.yaml"), "utf8");
  assert.match(meta, /^point: remote\/onprem-dc1$/m);
}

describe("lab run masquerade (end to end)", { skip: kernelSkip() }, () => {
  let base = "";
  let rootBefore = "";
  before(async () => {
    base = mkdtempSync(join(tmpdir(), "podpath-e2e-lab-"));
    rootBefore = await rootNamespaceHash();
  });
  after(async () => {
    rmSync(base, { recursive: true, force: true });
  });

  for (const v of LAB_VARIANTS.filter((x) => x.scenario === "masquerade")) {
    it(`${v.name}: ${v.description}`, () => {
      const out = join(base, v.name);
      const r = podpath(["lab", "run", v.scenario, ...v.args, "--out", out]);
      assert.equal(r.status, 0, `exit ${r.status}\n${r.stderr}`);
      assert.match(r.stdout, /^snapshot written to /);
      checkVariant(v, out);
      const d = podpath(["diagnose", out, "-o", "json"]);
      assert.ok(d.status === 0 || d.status === 1, `diagnose exit ${d.status}\n${d.stderr}`);
      const answer = JSON.parse(d.stdout) as { findings: { id: string; severity: string }[] };
      const ids = new Set(answer.findings.map((f) => f.id));
      for (const id of v.findings.present) {
        assert.ok(ids.has(id), `${v.name}: expected ${id}, got ${[...ids].join(", ")}`);
      }
      for (const id of v.findings.absent) {
        assert.ok(!ids.has(id), `${v.name}: did not expect ${id}, got ${[...ids].join(", ")}`);
      }
      const hasError = answer.findings.some((f) => f.severity === "error");
      assert.equal(d.status, hasError ? 1 : 0, "exit code follows error-severity findings");
    });
  }

  it("builds the IPv6 half where the kernel allows, with the agent's ip6tables rules", () => {
    const out = join(base, "ipv6");
    const r = podpath([
      "lab",
      "run",
      "masquerade",
      "--ipv6",
      "--out",
      out,
      "--non-masquerade",
      "10.4.0.0/14,fd00:4::/48",
      "--routes-back",
      "10.128.0.0/20,fd00:128::/64",
    ]);
    assert.equal(r.status, 0, r.stderr);
    if (!existsSync("/proc/sys/net/ipv6") || /IPv6 is disabled/.test(r.stderr)) {
      assert.match(r.stderr, /IPv6 is disabled in this kernel; building IPv4 only/);
      return;
    }
    const v6 = readFileSync(join(out, "nodes/gke-lab-default-0/ip6tables-save.txt"), "utf8");
    assert.match(v6, /^-A IP-MASQ-AGENT -d fd00:4::\/48 .* -j RETURN$/m);
    assert.match(v6, /^-A IP-MASQ-AGENT .* -j MASQUERADE/m);
    const probe = readFileSync(join(out, "probes/pod-billing-default.txt"), "utf8");
    assert.match(probe, /^\$ ping .* fd00:20::30:40\n(?:.*\n)*?.* 0% packet loss/m);
    const conntrack = readFileSync(join(out, "nodes/gke-lab-default-0/conntrack.txt"), "utf8");
    assert.match(conntrack, /src=fd00:4:0::5 |src=fd00:4::5 /);
    const ds = readFileSync(join(out, "cluster/ip-masq-agent.yaml"), "utf8");
    assert.match(ds, /--enable-ipv6=true/);
    const d = podpath(["diagnose", out, "-o", "json"]);
    assert.ok(d.status === 0 || d.status === 1, d.stderr);
  });

  it("refuses a non-empty --out folder (exit 2, no replica built)", () => {
    const r = podpath(["lab", "run", "masquerade", "--out", ROOT]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /not empty/);
  });

  it("rejects bad options with exit 2 and names the option", () => {
    const r = podpath([
      "lab",
      "run",
      "masquerade",
      "--out",
      join(base, "bad"),
      "--non-masquerade",
      "10.4.0.0/33",
    ]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--non-masquerade: 10\.4\.0\.0\/33/);
    const u = podpath([
      "lab",
      "run",
      "masquerade",
      "--out",
      join(base, "bad"),
      "--frobnicate",
      "1",
    ]);
    assert.equal(u.status, 2);
    assert.match(u.stderr, /--frobnicate/);
    const s = podpath(["lab", "run", "nosuch", "--out", join(base, "bad")]);
    assert.equal(s.status, 2);
    assert.match(s.stderr, /unknown scenario "nosuch"/);
  });

  it("left the root namespace unchanged", async () => {
    assert.equal(await rootNamespaceHash(), rootBefore);
  });
});
