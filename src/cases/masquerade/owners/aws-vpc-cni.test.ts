import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import type { Answer } from "../../../model/answer.ts";
import { parseIp } from "../../../net/cidr.ts";
import { diagnose } from "../../../questions/diagnose.ts";
import { loadSnapshot } from "../../../snapshot/load.ts";
import { openSnapshot } from "../../../snapshot/source.ts";

/** Made by `podpath lab run aws-vpc-cni` on a real kernel (see its README). */
const EXAMPLE = join(import.meta.dirname, "../../../../examples/eks-exclude-snat-cidrs");
const NODE = "ip-192-168-1-10.eu-west-1.compute.internal";
const DUMP = `nodes/${NODE}/iptables-save.txt`;
const tmp = mkdtempSync(join(tmpdir(), "pp-aws-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A copy of the example with `edit` applied to one of its files. */
function variant(rel: string, edit: (text: string) => string): string {
  const root = mkdtempSync(join(tmp, "s-"));
  cpSync(EXAMPLE, root, { recursive: true });
  writeFileSync(join(root, rel), edit(readFileSync(join(root, rel), "utf8")));
  return root;
}
const run = (root: string, dest?: string) =>
  diagnose(
    loadSnapshot(openSnapshot(root)),
    dest ? { dest: { ip: parseIp(dest), text: dest } } : {},
  );
const text = (a: Answer) => JSON.stringify({ findings: a.findings, missing: a.missing });
const lineOf = (rel: string, pattern: RegExp) =>
  readFileSync(join(EXAMPLE, rel), "utf8")
    .split("\n")
    .findIndex((l) => pattern.test(l)) + 1;

describe("masquerade case on the EKS example (AWS VPC CNI)", () => {
  it("names the plugin's EXCLUSION rule and the aws-node env line, fixes it in the plugin's terms", async () => {
    const a = await run(EXAMPLE);
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.equal(f.severity, "error");
    assert.match(f.title, /AWS VPC CNI: AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS entry 10\.20\.0\.0\/16/);
    const ruleLine = lineOf(DUMP, /AWS SNAT CHAIN EXCLUSION/);
    assert.ok(ruleLine > 0);
    assert.deepEqual(
      [f.evidence[0]?.file, f.evidence[0]?.line],
      [DUMP, ruleLine],
      "the AWS-SNAT-CHAIN-0 line is the first evidence",
    );
    assert.match(f.evidence[0]?.text ?? "", /^-A AWS-SNAT-CHAIN-0 -d 10\.20\.0\.0\/16/);
    const envLine = lineOf("cluster/aws-node.yaml", /value: 10\.20\.0\.0\/16/);
    assert.ok(
      f.evidence.some((e) => e.file === "cluster/aws-node.yaml" && e.line === envLine),
      "the DaemonSet's env value is cited",
    );
    assert.match(
      f.explanation,
      /Attribution: the AWS VPC CNI's comment "AWS SNAT CHAIN EXCLUSION"/,
    );
    assert.ok(
      f.next.includes(
        "kubectl -n kube-system set env daemonset aws-node -c aws-node AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS-",
      ),
    );
    assert.ok(
      f.next.some((n) => /AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS=10\.20\.0\.0\/16 .*rollback/.test(n)),
    );
  });

  it("has no ip-masq-agent or GKE wording, and never cites kube-proxy's RETURN", async () => {
    const a = await run(EXAMPLE);
    assert.doesNotMatch(text(a), /ip-masq-agent|GKE|IP-MASQ|plan masquerade/i);
    const kubeProxyReturn = lineOf(DUMP, /-A KUBE-POSTROUTING -m mark ! --mark/);
    assert.ok(kubeProxyReturn > 0);
    for (const f of a.findings) {
      assert.ok(!f.evidence.some((e) => e.file === DUMP && e.line === kubeProxyReturn), f.title);
    }
    for (const id of ["masq/intent-rules-drift", "masq/agent-missing", "masq/config-invalid"]) {
      assert.ok(!a.findings.some((f) => f.id === id), id);
    }
  });

  it("pod traffic inside the VPC keeps its address by design: no exempt finding", async () => {
    const a = await run(EXAMPLE, "192.168.2.20");
    assert.ok(!a.findings.some((f) => f.id === "masq/exempt-destination"));
    const p = a.paths.find((x) => x.from.startsWith("pod/") && x.to === "192.168.2.20");
    assert.equal(p?.sourceOnWire, "100.64.1.50");
  });

  it("without the plugin's names the rule is not attributed to it (attribution decides)", async () => {
    // the same dump with the plugin's comments and chain renamed: nothing says AWS wrote it
    const root = variant(DUMP, (t) =>
      t
        .replace(/AWS SNAT CHAIN EXCLUSION/g, "site exclusion")
        .replace(/AWS-SNAT-CHAIN-0/g, "EGRESS-0"),
    );
    const a = await run(root);
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, "the source is still kept: the rules decide that, not the names");
    assert.doesNotMatch(f.title, /AWS VPC CNI/);
    assert.match(f.explanation, /a rule podpath cannot attribute to any component it knows/);
    assert.doesNotMatch(f.explanation, /AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS/);
  });

  it("reads the plugin's older chained form (! -d each CIDR, before v1.16) the same way", async () => {
    const chained = [
      '-A AWS-SNAT-CHAIN-0 ! -d 192.168.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j AWS-SNAT-CHAIN-1',
      '-A AWS-SNAT-CHAIN-1 ! -d 100.64.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j AWS-SNAT-CHAIN-2',
      '-A AWS-SNAT-CHAIN-2 ! -d 10.20.0.0/16 -m comment --comment "AWS SNAT CHAIN EXCLUSION" -j AWS-SNAT-CHAIN-3',
      '-A AWS-SNAT-CHAIN-3 ! -o vlan+ -m comment --comment "AWS, SNAT" -m addrtype ! --dst-type LOCAL -j SNAT --to-source 192.168.1.10 --random-fully',
    ];
    const root = variant(DUMP, (t) => {
      const lines = t.split("\n").filter((l) => !l.startsWith("-A AWS-SNAT-CHAIN-0 "));
      const decl = lines.indexOf(":AWS-SNAT-CHAIN-0 - [0:0]");
      lines.splice(decl + 1, 0, ...[1, 2, 3].map((n) => `:AWS-SNAT-CHAIN-${n} - [0:0]`));
      const kube = lines.findIndex((l) => l.startsWith("-A KUBE-POSTROUTING"));
      lines.splice(kube, 0, ...chained);
      return lines.join("\n");
    });
    const a = await run(root);
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.match(f.title, /AWS VPC CNI: AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS entry 10\.20\.0\.0\/16/);
    assert.match(f.evidence[0]?.text ?? "", /^-A AWS-SNAT-CHAIN-2 ! -d 10\.20\.0\.0\/16/);
    assert.match(f.explanation, /older chained form/);
    assert.doesNotMatch(JSON.stringify(a.findings), /KUBE-POSTROUTING -m mark/);
    const vpc = await run(root, "192.168.2.20");
    assert.ok(!vpc.findings.some((x) => x.id === "masq/exempt-destination"), "inside the VPC");
  });

  it("EXTERNALSNAT=true with no AWS SNAT chain: the env line is the exemption, not kube-proxy's RETURN", async () => {
    const root = variant(DUMP, (t) =>
      t
        .split("\n")
        .filter((l) => !/AWS-SNAT-CHAIN-0|AWS SNAT CHAIN/.test(l))
        .join("\n"),
    );
    writeFileSync(
      join(root, "cluster/aws-node.yaml"),
      readFileSync(join(root, "cluster/aws-node.yaml"), "utf8").replace(
        /(name: AWS_VPC_K8S_CNI_EXTERNALSNAT\n(\s+)value: )"false"/g,
        '$1"true"',
      ),
    );
    const a = await run(root);
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f);
    assert.match(f.title, /AWS_VPC_K8S_CNI_EXTERNALSNAT=true/);
    assert.ok(f.evidence.some((e) => e.file === "cluster/aws-node.yaml"));
    assert.ok(!f.evidence.some((e) => e.file === DUMP));
    assert.match(f.explanation, /kube-proxy's RETURN .* is not the exemption/);
  });
});

describe("IPv6 on an AWS VPC CNI node: the plugin writes no IPv6 SNAT", () => {
  /** The example made dual stack: the pod's IPv6 address, the node's empty IPv6 nat table. */
  function dualStack(): string {
    const root = variant("cluster/pods.yaml", (t) =>
      t.replace(
        "        - ip: 100.64.1.50\n",
        "        - ip: 100.64.1.50\n        - ip: 2600:1f14:abc:1::50\n",
      ),
    );
    // ip6tables-save of a node whose IPv6 nat table holds nothing (the plugin writes none)
    writeFileSync(
      join(root, `nodes/${NODE}/ip6tables-save.txt`),
      "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n",
    );
    const site = join(root, "remote/onprem-dc1.yaml");
    writeFileSync(
      site,
      readFileSync(site, "utf8").replace(
        "  - 10.20.0.0/16\nroutesBack",
        "  - 10.20.0.0/16\n  - fd00:20::/64\nroutesBack",
      ),
    );
    return root;
  }

  it("says the plugin keeps IPv6 pod addresses by design, never blames an exemption", async () => {
    const a = await run(dualStack(), "fd00:20::30:40");
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, text(a));
    assert.match(f.title, /2600:1f14:abc:1::50 \(AWS VPC CNI: no IPv6 SNAT\)/);
    assert.match(f.explanation, /UpdateHostSNATRules/);
    assert.doesNotMatch(text(a), /EXCLUDE_SNAT_CIDRS=|ip-masq-agent|GKE/);
  });

  it("plans nothing on the nodes: no aws-node setting masquerades IPv6", async () => {
    const { planMasquerade } = await import("../plan.ts");
    const snap = loadSnapshot(openSnapshot(dualStack()));
    const p = planMasquerade(snap, {
      strategy: "narrow",
      dest: { ip: parseIp("fd00:20::30:40"), text: "fd00:20::30:40" },
    });
    assert.equal(p.owner?.owner, "aws-vpc-cni");
    assert.match(p.owner?.title ?? "", /cannot masquerade IPv6/);
    assert.deepEqual(p.owner?.apply, []);
  });
});
