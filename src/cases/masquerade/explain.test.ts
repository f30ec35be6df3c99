import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseIp } from "../../net/cidr.ts";
import { diagnose } from "../../questions/diagnose.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot } from "../../snapshot/source.ts";

const DUMP = join(
  import.meta.dirname,
  "fixtures/gke-dpv2-1.29_iptables-S-nat_IP-MASQ-default-snat_cilium.txt",
);
const EXAMPLE = join(import.meta.dirname, "../../../examples/snat-exception-list");
const tmp = mkdtempSync(join(tmpdir(), "pp-masq-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

function snapshotWith(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmp, "s-"));
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(join(root, rel, ".."), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
  return root;
}

describe("diagnose: masquerade on a real GKE Dataplane V2 node dump", () => {
  it("follows both outcomes of addrtype without the node's addresses, and names the file that decides it", async () => {
    const root = snapshotWith({ "nodes/gke-1/iptables-save.txt": readFileSync(DUMP, "utf8") });
    const a = await diagnose(loadSnapshot(openSnapshot(root)), {
      dest: { ip: parseIp("10.20.30.40"), text: "10.20.30.40" },
      from: { kind: "address", ip: parseIp("10.4.0.5") },
    });
    assert.ok(!a.findings.some((f) => f.id === "masq/exempt-destination"), "no guess");
    assert.ok(a.missing.some((m) => m.file === "nodes/gke-1/ip-addr.txt"));
    const u = a.findings.find((f) => f.id === "masq/source-undecided");
    assert.ok(u, "the fork is the answer");
    assert.equal(u.severity, "info");
    assert.match(u.title, /turns on whether 10\.20\.30\.40 is one of the node's own addresses/);
    assert.match(
      u.explanation,
      /If 10\.20\.30\.40 is one of the node's own addresses: the packet is delivered on the node/,
    );
    assert.match(
      u.explanation,
      /If not \(10\.20\.30\.40 is one of the node's own addresses\): it leaves with the pod's own address 10\.4\.0\.5/,
    );
    assert.ok(u.next.some((n) => n.startsWith("ip -o addr")));
    assert.ok(a.findings.some((f) => f.id === "masq/ebpf-dataplane"));
  });

  it("with the addresses, finds GKE's IP-MASQ RETURN for 10.0.0.0/8 and cites its line", async () => {
    const root = snapshotWith({
      "nodes/gke-1/iptables-save.txt": readFileSync(DUMP, "utf8"),
      "nodes/gke-1/ip-addr.txt": "2: eth0    inet 10.128.0.7/32 scope global dynamic eth0\n",
      "nodes/gke-1/ip-route.txt":
        "default via 10.128.0.1 dev eth0 proto dhcp src 10.128.0.7 metric 100\n",
    });
    const a = await diagnose(loadSnapshot(openSnapshot(root)), {
      dest: { ip: parseIp("10.20.30.40"), text: "10.20.30.40" },
      from: { kind: "address", ip: parseIp("10.4.0.5") },
    });
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    const ev = f.evidence[0]!;
    const line = readFileSync(join(root, ev.file), "utf8").split("\n")[ev.line - 1];
    assert.match(line ?? "", /^-A IP-MASQ -d 10\.0\.0\.0\/8 .*-j RETURN/);
    // a public destination is masqueraded by the same chain: no exemption finding
    const b = await diagnose(loadSnapshot(openSnapshot(root)), {
      dest: { ip: parseIp("8.8.8.8"), text: "8.8.8.8" },
      from: { kind: "address", ip: parseIp("10.4.0.5") },
    });
    assert.ok(!b.findings.some((x) => x.id === "masq/exempt-destination"));
    assert.equal(b.paths[0]?.sourceOnWire, "10.128.0.7");
  });
});

describe("diagnose: masquerade from intent alone", () => {
  it("evaluates the ConfigMap when the node's rules are missing, and says they are missing", async () => {
    const root = join(tmp, "intent");
    cpSync(EXAMPLE, root, { recursive: true });
    rmSync(join(root, "nodes"), { recursive: true });
    rmSync(join(root, "captures"), { recursive: true });
    const a = await diagnose(loadSnapshot(openSnapshot(root)));
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, JSON.stringify(a.findings.map((x) => x.id)));
    assert.match(f.explanation, /intent/);
    assert.ok(f.evidence.some((e) => e.file === "cluster/ip-masq-agent.yaml"));
    assert.ok(a.missing.some((m) => /nodes\/.*\/iptables-save\.txt/.test(m.file)));
  });

  it("reports a config the agent refuses with the agent's own words", async () => {
    const root = join(tmp, "invalid");
    cpSync(EXAMPLE, root, { recursive: true });
    const cm = join(root, "cluster/ip-masq-agent.yaml");
    writeFileSync(cm, readFileSync(cm, "utf8").replace("- 172.16.0.0/12", "- 172.16.0.1/12"));
    const a = await diagnose(loadSnapshot(openSnapshot(root)));
    const f = a.findings.find((x) => x.id === "masq/config-invalid");
    assert.ok(f);
    assert.match(f.explanation, /CIDR "172\.16\.0\.1\/12" is not aligned to a CIDR block/);
    const ev = f.evidence[0]!;
    assert.match(
      readFileSync(join(root, ev.file), "utf8").split("\n")[ev.line - 1] ?? "",
      /172\.16\.0\.1\/12/,
    );
  });
});
