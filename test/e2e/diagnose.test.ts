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
/** Made by `podpath lab run masquerade --pools default:agent,legacy:no-agent,batch:agent` (its README). */
const THREE_POOLS = join(import.meta.dirname, "../../src/cases/masquerade/fixtures/three-pools");

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

  it("prints the verdict, cause, fix and path first, then the findings cause first, nothing cut", () => {
    const t = podpath("diagnose", EXAMPLE, "--no-color");
    assert.equal(t.code, 1);
    assert.doesNotMatch(t.stdout, /\x1b\[/);
    const lines = t.stdout.split("\n");
    const at = (re: RegExp) => lines.findIndex((l) => re.test(l));
    assert.match(lines[0]!, /^BROKEN {2}.*\(masq\/exempt-destination\)$/);
    const summary = [
      /^cause /,
      /^fix /,
      /\$ podpath plan masquerade /,
      /^pod\/default\/billing-default → /,
    ];
    const found = summary.map(at);
    assert.deepEqual(
      [...found].sort((a, b) => a - b),
      found,
      JSON.stringify(found),
    );
    assert.ok(found[0] === 1 && found.at(-1)! < 14, "verdict, cause, fix, path: one screen");
    // every finding, each consequence under its cause
    const ids = json.findings.map((f) => f.id);
    const idLine = (id: string) => at(new RegExp(`^\\s*${id.replace("/", "\\/")} · `));
    assert.ok(
      ids.every((id) => idLine(id) > found.at(-1)!),
      "details below the summary",
    );
    assert.ok(idLine("masq/exempt-destination") < idLine("masq/no-return-route"));
    assert.ok(idLine("masq/no-return-route") < idLine("masq/wire-pod-source"));
    assert.ok(idLine("masq/wire-pod-source") < idLine("masq/wire-node-source"));
    assert.match(lines[idLine("masq/no-return-route")]!, /follows from masq\/exempt-destination$/);
    // piped: wrapped at 100, evidence never cut (the deciding rule ends in -j RETURN)
    assert.doesNotMatch(t.stdout, /…\n/);
    const rule = json.findings.find((f) => f.id === "masq/exempt-destination")!.evidence[0]!;
    const flat = t.stdout.replace(/\s+/g, " ");
    assert.ok(flat.includes(`${rule.file}:${rule.line} ${rule.text!.trim()}`), rule.text);
    assert.match(rule.text!, /-j RETURN$/);
  });

  it("three pools (a lab-made snapshot): the first line names the missing agent on pool legacy", () => {
    const t = podpath("diagnose", THREE_POOLS, "--no-color");
    assert.equal(t.code, 1, t.stderr);
    assert.match(
      t.stdout.split("\n")[0]!,
      /^BROKEN {2}pod\/default\/billing-legacy → \S+: ip-masq-agent does not run on node pool legacy, .+ \(masq\/agent-missing\)$/,
    );
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

interface VerdictJson {
  verdict: { state: string; summary: string; finding?: string; subject?: string };
  findings: {
    id: string;
    severity: string;
    subject: string;
    explanation: string;
    evidence: { file: string; line: number; text?: string }[];
    next: string[];
  }[];
  paths: { from: string; to: string }[];
}

describe("podpath diagnose opens with one verdict", () => {
  const FIXED = join(import.meta.dirname, "../../examples/snat-exception-list-fixed");
  const ALLOWLISTED = join(import.meta.dirname, "../../examples/snat-exception-list-allowlisted");
  const withoutCaptures = (dir: string, name: string) => {
    const copy = join(tmp, name);
    cpSync(dir, copy, { recursive: true });
    rmSync(join(copy, "captures"), { recursive: true, force: true });
    return copy;
  };

  it("text: BROKEN, the path and the finding that decide it, on the first line", () => {
    const r = podpath("diagnose", EXAMPLE, "--no-color");
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stdout.split("\n")[0] ?? "",
      /^BROKEN {2}pod\/default\/billing-default → 10\.20\.30\.40:5432: .+ \(masq\/exempt-destination\)$/,
    );
  });

  it("json: the verdict as a field after the snapshot's name", () => {
    const r = podpath("diagnose", EXAMPLE, "-o", "json");
    const json = JSON.parse(r.stdout) as VerdictJson & Record<string, unknown>;
    assert.deepEqual(Object.keys(json).slice(3, 6), ["snapshot", "verdict", "findings"]);
    assert.equal(json.verdict.state, "broken");
    assert.equal(json.verdict.finding, "masq/exempt-destination");
    assert.equal(json.verdict.subject, "pod/default/billing-default → 10.20.30.40:5432");
    const decider = json.findings.find((f) => f.id === json.verdict.finding);
    assert.equal(decider?.severity, "error");
  });

  it("md: the first line is the verdict", () => {
    const r = podpath("diagnose", EXAMPLE, "-o", "md");
    assert.equal(r.code, 1);
    assert.match(
      r.stdout.split("\n")[0] ?? "",
      /^\*\*BROKEN\*\* pod\/default\/billing-default → 10\.20\.30\.40:5432: .+ \(`masq\/exempt-destination`\)$/,
    );
  });

  it("after the fix: the far side's allowlist (pod range only) is the next break, exit 1", () => {
    // the lab's database firewall drops the node address: its SYNs are on the wire, unanswered
    for (const snapshot of [FIXED, withoutCaptures(FIXED, "fixed-without-captures")]) {
      const r = podpath("diagnose", snapshot, "--no-color");
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stdout.split("\n")[0] ?? "",
        /^BROKEN {2}pod\/default\/billing-default → 10\.20\.30\.40:5432: .*allowlist db-firewall does not admit 10\.128\.0\.2 .*\(masq\/remote-allowlist-rejects\)$/,
      );
      const json = JSON.parse(podpath("diagnose", snapshot, "-o", "json").stdout) as VerdictJson & {
        findings: { id: string; severity: string }[];
      };
      assert.equal(json.verdict.state, "broken");
      assert.equal(json.verdict.finding, "masq/remote-allowlist-rejects");
      const f = json.findings.find((x) => x.id === "masq/remote-allowlist-rejects");
      assert.equal(f?.severity, "error");
    }
  });

  it("after the fix, with the wire showing the far side answer: the allowlist is a warning, exit 0", () => {
    // the combined change's snapshot (the firewall admits the node subnet), with a site file that
    // still lists the pod range only: the file is out of date, and the wire outranks it
    const stale = join(tmp, "allowlisted-stale-site-file");
    cpSync(ALLOWLISTED, stale, { recursive: true });
    const site = join(stale, "remote/onprem-dc1.yaml");
    const text = readFileSync(site, "utf8");
    assert.match(text, /\n {6}- 10\.128\.0\.0\/20\n {4}destinations:/);
    writeFileSync(site, text.replace(/\n {6}- 10\.128\.0\.0\/20(?=\n {4}destinations:)/, ""));
    const r = podpath("diagnose", stale, "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const json = JSON.parse(r.stdout) as VerdictJson & {
      findings: { id: string; severity: string; evidence: { file: string }[] }[];
    };
    assert.equal(json.verdict.state, "healthy");
    const f = json.findings.find((x) => x.id === "masq/remote-allowlist-rejects");
    assert.equal(f?.severity, "warning");
    assert.match(f?.evidence[0]?.file ?? "", /^captures\//);
    // the same snapshot as written (the site file admits the node subnet): no finding at all
    const asIs = JSON.parse(podpath("diagnose", ALLOWLISTED, "-o", "json").stdout) as {
      findings: { id: string }[];
    };
    assert.ok(!asIs.findings.some((x) => x.id === "masq/remote-allowlist-rejects"));
  });
});

describe("podpath diagnose says what it read but could not place", () => {
  const snapshot = (name: string, files: Record<string, string>): string => {
    const d = join(tmp, name);
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(join(d, rel, ".."), { recursive: true });
      writeFileSync(join(d, rel), text);
    }
    return d;
  };
  const RULES = readFileSync(join(EXAMPLE, "nodes/gke-lab-default-0/iptables-save.txt"), "utf8");
  const unplaced = (json: VerdictJson) => json.findings.filter((f) => f.id === "evidence/unplaced");

  it("a node's rules without cluster objects or --from: undecided, naming --from and pods.yaml", () => {
    const d = snapshot("rules-only", { "nodes/n1/iptables-save.txt": RULES });
    const r = podpath("diagnose", d, "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const json = JSON.parse(r.stdout) as VerdictJson;
    assert.equal(json.verdict.state, "undecided");
    assert.equal(json.verdict.finding, "evidence/unplaced");
    const [f, ...rest] = unplaced(json);
    assert.ok(f, JSON.stringify(json.findings));
    assert.equal(rest.length, 0);
    assert.equal(f.severity, "info");
    assert.equal(f.subject, "node/n1");
    assert.match(f.explanation, /nodes\/n1\/iptables-save\.txt was read/);
    assert.match(f.explanation, /no pod address|names no pod/);
    for (const e of f.evidence) assert.equal(lineOf(d, e.file, e.line), e.text);
    assert.ok(
      f.next.some(
        (n) => n.includes("kubectl get pods -A -o yaml > ") && n.includes("cluster/pods.yaml"),
      ),
    );
    assert.ok(f.next.some((n) => /--from POD_IP/.test(n)));
    const text = podpath("diagnose", d, "--no-color");
    assert.match(
      text.stdout.split("\n")[0] ?? "",
      /^UNDECIDED {2}node\/n1: .+ \(evidence\/unplaced\)$/,
    );
    // named as it asks, the pod's address is traced through the same rules
    const placed = JSON.parse(
      podpath("diagnose", d, "--from", "10.4.0.5", "--dest", "10.20.30.40", "-o", "json").stdout,
    ) as VerdictJson;
    assert.ok(placed.paths.some((p) => p.to === "10.20.30.40"));
    assert.deepEqual(unplaced(placed), []);
  });

  it("probes without the VPN pod's evidence: undecided, citing each command line as pasted", () => {
    const transcript = [
      "# client: laptop vpn-address: 10.8.0.6",
      "root@laptop:~# ping -c 2 -W 1 10.8.0.1",
      "PING 10.8.0.1 (10.8.0.1) 56(84) bytes of data.",
      "64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=0.250 ms",
      "64 bytes from 10.8.0.1: icmp_seq=2 ttl=64 time=0.279 ms",
      "",
      "--- 10.8.0.1 ping statistics ---",
      "2 packets transmitted, 2 received, 0% packet loss, time 1015ms",
      "ping -c 2 -W 1 10.244.2.20",
      "PING 10.244.2.20 (10.244.2.20) 56(84) bytes of data.",
      "",
      "--- 10.244.2.20 ping statistics ---",
      "2 packets transmitted, 0 received, 100% packet loss, time 1056ms",
    ].join("\n");
    // a name lookup tests the DNS layer wherever the VPN pod is: the walk places it
    const real = readFileSync(
      join(import.meta.dirname, "../../src/evidence/testdata/probes/linux-real.txt"),
      "utf8",
    ).split("\n");
    const at = real.findIndex((l) => l.startsWith("$ dig @10.99.0.2 web.vpn.test"));
    const end = real.findIndex((l, i) => i > at && l.startsWith("$ "));
    const dig = real.slice(at, end).join("\n");
    const d = snapshot("probes-only", { "probes/laptop.txt": `${transcript}\n${dig}\n` });
    const r = podpath("diagnose", d, "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const json = JSON.parse(r.stdout) as VerdictJson;
    assert.equal(json.verdict.state, "undecided");
    const [f] = unplaced(json);
    assert.ok(f, JSON.stringify(json.findings));
    assert.equal(f.subject, "client/laptop");
    assert.deepEqual(
      f.evidence.map((e) => [e.file, e.line]),
      [
        ["probes/laptop.txt", 2],
        ["probes/laptop.txt", 9],
      ],
    );
    for (const e of f.evidence) assert.equal(lineOf(d, e.file, e.line), e.text);
    assert.match(f.explanation, /ping -c 2 -W 1 10\.8\.0\.1 → replies/);
    assert.match(f.explanation, /ping -c 2 -W 1 10\.244\.2\.20 → timeout/);
    assert.ok(f.next.some((n) => n.startsWith(`podpath collect --out ${d} --pod `)));
    assert.ok(f.next.some((n) => /sysctl net\.ipv4\.ip_forward > .*\/sysctl\.txt$/.test(n)));
    // a probe typed behind kubectl exec names the pod in the commands that would place it
    const inPod = snapshot("probes-in-pod", {
      "probes/pod.txt":
        "$ kubectl exec -n vpn openvpn-0 -- ping -c 1 -W 1 10.244.2.20\nPING 10.244.2.20 (10.244.2.20) 56(84) bytes of data.\n\n--- 10.244.2.20 ping statistics ---\n1 packets transmitted, 0 received, 100% packet loss, time 0ms\n",
    });
    const p = unplaced(JSON.parse(podpath("diagnose", inPod, "-o", "json").stdout) as VerdictJson);
    assert.ok(
      p[0]?.next.includes(
        `kubectl -n vpn exec openvpn-0 -- sysctl net.ipv4.ip_forward > ${inPod}/pods/vpn/openvpn-0/sysctl.txt`,
      ),
      JSON.stringify(p),
    );
  });

  it("--dest of another family than the rules: undecided, naming ip6tables-save", () => {
    const r = podpath("diagnose", EXAMPLE, "--dest", "fd00::1", "-o", "json");
    assert.equal(r.code, 0, r.stderr);
    const json = JSON.parse(r.stdout) as VerdictJson;
    assert.equal(json.verdict.state, "undecided");
    assert.equal(json.verdict.finding, "evidence/unplaced");
    const [f] = unplaced(json);
    assert.ok(f);
    assert.match(f.explanation, /IPv6/);
    assert.deepEqual(
      f.evidence.map((e) => e.file),
      ["nodes/gke-lab-default-0/iptables-save.txt"],
    );
    for (const e of f.evidence) assert.equal(lineOf(EXAMPLE, e.file, e.line), e.text);
    assert.ok(
      f.next.some((n) =>
        /ip6tables-save > .*nodes\/gke-lab-default-0\/ip6tables-save\.txt/.test(n),
      ),
    );
    // the same destination's IPv4 twin is decided by the rules the snapshot has
    const v4 = JSON.parse(
      podpath("diagnose", EXAMPLE, "--dest", "10.20.30.40", "-o", "json").stdout,
    ) as VerdictJson;
    assert.deepEqual(unplaced(v4), []);
  });
});
