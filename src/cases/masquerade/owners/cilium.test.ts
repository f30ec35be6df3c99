/**
 * The masquerade case on Cilium's BPF masquerade with its ip-masq-agent (the hand-assembled,
 * real-shaped snapshot fixtures/cilium/bpf-ip-masq-agent: no Cilium runs here, see its README):
 * the source on the wire decided from the node's ipmasq listing (or the ConfigMap Cilium reads),
 * the finding and fix in Cilium's terms, what is missing when nothing decides, attribution tested
 * by taking the owner away, and the plan in Cilium's terms.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseIp } from "../../../net/cidr.ts";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";
import type { DiagnoseOptions } from "../../case.ts";
import { explainMasquerade } from "../explain.ts";
import { planMasquerade } from "../plan.ts";
import { coveringCidr } from "./cilium.ts";
import { SOURCE_OWNERS } from "./index.ts";

const FIXTURE = join(import.meta.dirname, "../fixtures/cilium/bpf-ip-masq-agent");
const LIST = "nodes/worker-1/cilium-bpf-ipmasq.txt";
const STATUS = "nodes/worker-1/cilium-status.txt";
const tmp = mkdtempSync(join(tmpdir(), "pp-cilium-"));
after(() => rmSync(tmp, { recursive: true, force: true }));
const load = (p: string) => loadSnapshot(openSnapshot(p));
const dest = (ip: string): DiagnoseOptions => ({ dest: { ip: parseIp(ip), text: ip } });
const without = SOURCE_OWNERS.filter((o) => o.id !== "cilium");
const lineOf = (rel: string, pattern: RegExp) =>
  readFileSync(join(FIXTURE, rel), "utf8")
    .split("\n")
    .findIndex((l) => pattern.test(l)) + 1;

/** A copy of the fixture with files removed or replaced. */
function variant(edits: Record<string, string | null>): string {
  const root = mkdtempSync(join(tmp, "s-"));
  cpSync(FIXTURE, root, { recursive: true });
  for (const [rel, text] of Object.entries(edits)) {
    if (text === null) rmSync(join(root, rel));
    else writeFileSync(join(root, rel), text);
  }
  return root;
}

describe("Cilium BPF masquerade with its ip-masq-agent", () => {
  it("keeps the pod's address toward 10.20.30.40, citing the ipmasq map line and the ConfigMap entry", async () => {
    const r = await explainMasquerade(load(FIXTURE), dest("10.20.30.40"));
    const path = r.paths.find((p) => p.from.startsWith("pod/"));
    assert.equal(path?.sourceOnWire, "10.0.1.23");
    const hop = path?.hops.find((h) => h.at === "node/worker-1");
    assert.match(
      hop?.label ?? "",
      /^Cilium BPF ip-masq-agent: 10\.20\.30\.40 is in 10\.0\.0\.0\/8/,
    );
    assert.deepEqual([hop?.evidence?.file, hop?.evidence?.line], [LIST, 2]);
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.equal(f.severity, "error");
    assert.match(f.title, /Cilium ip-masq-agent: nonMasqueradeCIDRs entry 10\.0\.0\.0\/8/);
    assert.deepEqual([f.evidence[0]?.file, f.evidence[0]?.line], [LIST, 2]);
    const cmLine = lineOf("cluster/cilium.yaml", /^\s+- 10\.0\.0\.0\/8$/);
    assert.ok(f.evidence.some((e) => e.file === "cluster/cilium.yaml" && e.line === cmLine));
    assert.ok(f.evidence.some((e) => e.file === STATUS && e.line === 19));
    assert.ok(
      f.next.includes("kubectl -n kube-system exec pod/cilium-x7k2p -- cilium-dbg bpf ipmasq list"),
    );
    assert.ok(
      f.next.some((n) =>
        /edit configmap ip-masq-agent .*172\.16\.0\.0\/12, 192\.168\.0\.0\/16$/.test(n),
      ),
    );
    assert.ok(f.next.some((n) => /ip-masq-agent\.before\.yaml .*rollback/.test(n)));
    const text = JSON.stringify(r.findings);
    assert.doesNotMatch(text, /plan masquerade|GKE's node startup|IP-MASQ/);
    assert.ok(
      !r.findings.some((x) => x.id === "masq/agent-missing"),
      "Cilium's DaemonSet reads the ConfigMap",
    );
    const e = r.findings.find((x) => x.id === "masq/ebpf-dataplane");
    assert.equal(e?.severity, "info");
    assert.match(e?.title ?? "", /Cilium masquerades in eBPF/);
  });

  it("attribution: without Cilium's knowledge the answer is not Cilium's", async () => {
    const r = await explainMasquerade(load(FIXTURE), dest("10.20.30.40"), without);
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.doesNotMatch(f?.title ?? "", /Cilium/);
    const hop = r.paths
      .find((p) => p.from.startsWith("pod/"))
      ?.hops.find((h) => h.at === "node/worker-1");
    assert.doesNotMatch(hop?.label ?? "", /Cilium/);
  });

  it("masquerades a public destination to the node's address; keeps pod-to-pod inside the native-routing CIDR", async () => {
    const pub = await explainMasquerade(load(FIXTURE), dest("203.0.114.9"));
    const p = pub.paths.find((x) => x.from.startsWith("pod/"));
    assert.equal(p?.sourceOnWire, "192.168.1.10");
    assert.match(p?.hops[1]?.label ?? "", /MASQUERADE → 192\.168\.1\.10/);
    assert.ok(!pub.findings.some((x) => x.id === "masq/exempt-destination"));
    const pod = await explainMasquerade(load(FIXTURE), dest("10.0.2.9"));
    const q = pod.paths.find((x) => x.from.startsWith("pod/"));
    assert.equal(q?.sourceOnWire, "10.0.1.23");
    assert.match(q?.hops[1]?.label ?? "", /SNAT exclusion CIDR 10\.0\.0\.0\/16/);
  });

  it("without the node's listing, decides from the ConfigMap Cilium reads; without both, says what decides", async () => {
    const cm = await explainMasquerade(load(variant({ [LIST]: null })), dest("10.20.30.40"));
    const hop = cm.paths.find((p) => p.from.startsWith("pod/"))?.hops[1];
    assert.match(hop?.label ?? "", /ip-masq-agent ConfigMap/);
    assert.equal(hop?.evidence?.file, "cluster/cilium.yaml");
    const noCm = readFileSync(join(FIXTURE, "cluster/cilium.yaml"), "utf8").replace(
      /- apiVersion: v1\n {2}kind: ConfigMap\n {2}metadata:\n {4}name: ip-masq-agent[\s\S]*?masqLinkLocal: true\n/,
      "",
    );
    assert.doesNotMatch(noCm, /metadata:\n {4}name: ip-masq-agent\n/);
    const none = await explainMasquerade(
      load(variant({ [LIST]: null, "cluster/cilium.yaml": noCm })),
      dest("10.20.30.40"),
    );
    const p = none.paths.find((x) => x.from.startsWith("pod/"));
    assert.equal(p?.sourceOnWire, undefined);
    assert.equal(p?.hops[1]?.state, "unknown");
    const m = none.missing.find((x) => x.file === LIST);
    assert.equal(
      m?.command,
      "kubectl -n kube-system exec pod/cilium-x7k2p -- cilium-dbg bpf ipmasq list",
    );
  });

  it("GKE Dataplane V2: an EgressNATPolicy NoSNAT destination keeps the address, cited and fixed there", async () => {
    const policy = `apiVersion: networking.gke.io/v1
kind: EgressNATPolicy
metadata:
  name: default
spec:
  action: NoSNAT
  destinations:
  - cidr: 10.0.0.0/8
  - cidr: 172.16.0.0/12
`;
    const root = variant({ [LIST]: null, "cluster/egressnatpolicies.yaml": policy });
    const r = await explainMasquerade(load(root), dest("10.20.30.40"));
    const hop = r.paths.find((p) => p.from.startsWith("pod/"))?.hops[1];
    assert.match(hop?.label ?? "", /EgressNATPolicy NoSNAT/);
    assert.deepEqual(
      [hop?.evidence?.file, hop?.evidence?.line],
      ["cluster/egressnatpolicies.yaml", 8],
    );
    const f = r.findings.find((x) => x.id === "masq/exempt-destination");
    assert.match(f?.title ?? "", /EgressNATPolicy entry 10\.0\.0\.0\/8/);
    assert.ok(
      f?.next.includes(
        "kubectl edit egressnatpolicy default   # remove the destination 10.0.0.0/8",
      ),
    );
  });

  it("Masquerading: IPTables hands the decision to the node's rules, and asks for them", async () => {
    const st = readFileSync(join(FIXTURE, STATUS), "utf8").replace(
      /^Masquerading: .*$/m,
      "Masquerading:            IPTables [IPv4: Enabled, IPv6: Disabled]",
    );
    const r = await explainMasquerade(
      load(variant({ [STATUS]: st, [LIST]: null })),
      dest("10.20.30.40"),
    );
    const hop = r.paths.find((p) => p.from.startsWith("pod/"))?.hops[1];
    assert.match(hop?.label ?? "", /Cilium masquerades with iptables/);
    assert.ok(r.missing.some((m) => m.file === "nodes/worker-1/iptables-save.txt"));
    const e = r.findings.find((x) => x.id === "masq/ebpf-dataplane");
    assert.match(e?.title ?? "", /CILIUM_POST_nat rules decide/);
  });

  it("plans in Cilium's terms: the ip-masq-agent ConfigMap without 10.0.0.0/8, applied and rolled back", () => {
    const plan = planMasquerade(load(FIXTURE), {
      strategy: "narrow",
      dest: { ip: parseIp("10.20.30.40"), text: "10.20.30.40" },
    } as never);
    assert.equal(plan.owner?.owner, "cilium");
    assert.equal(plan.owner?.knob, "the ip-masq-agent ConfigMap Cilium reads (nonMasqueradeCIDRs)");
    const file = plan.owner?.files[0];
    assert.equal(file?.file, "ip-masq-agent.cilium.yaml");
    assert.match(file?.content ?? "", /name: ip-masq-agent\n {2}namespace: kube-system/);
    assert.match(
      file?.content ?? "",
      /nonMasqueradeCIDRs:\n {4}- 172\.16\.0\.0\/12\n {4}- 192\.168\.0\.0\/16\n {4}masqLinkLocal: true\n$/,
    );
    assert.deepEqual(plan.owner?.nowMasqueraded, ["10.0.0.0/8"]);
    assert.ok(plan.owner?.apply.includes("kubectl apply -f ip-masq-agent.cilium.yaml"));
    assert.ok(
      plan.owner?.rollback.some((x) => /kubectl replace -f ip-masq-agent\.before\.yaml/.test(x)),
    );
    const after = plan.owner?.change.after.find((s) => s.key.startsWith("ip-masq-agent"));
    assert.equal(after?.value, "172.16.0.0/12,192.168.0.0/16");
    const before = plan.owner?.change.before.find((s) => s.key.startsWith("ip-masq-agent"));
    assert.equal(before?.value, "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16");
  });
});

describe("the native-routing CIDR a fix narrows to", () => {
  it("holds every node's pod range, not one node's", () => {
    assert.equal(coveringCidr(["10.0.1.0/24", "10.0.2.0/24"]), "10.0.0.0/22");
    assert.equal(coveringCidr(["10.0.1.0/24"]), "10.0.1.0/24");
    assert.equal(coveringCidr(["10.4.0.0/16", "10.7.255.0/24"]), "10.4.0.0/14");
    assert.equal(coveringCidr(["10.0.1.0/24", "fd00::/64"]), undefined);
    assert.equal(coveringCidr([]), undefined);
  });
});

describe("problems reading Cilium's node files reach the answer", () => {
  it("a Masquerading line podpath cannot read is a diagnostic naming the file and line", async () => {
    const status = readFileSync(join(FIXTURE, STATUS), "utf8");
    const broken = status.replace(/^Masquerading:.*$/m, "Masquerading:            ??? garbled");
    const root = variant({ [STATUS]: broken });
    const r = await explainMasquerade(load(root), {});
    const line = lineOf(STATUS, /^Masquerading:/);
    const d = r.diagnostics.find((x) => x.source?.file === STATUS);
    assert.ok(d, JSON.stringify(r.diagnostics));
    assert.equal(d.source?.line, line);
  });
});
