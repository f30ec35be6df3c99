import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { readAwsNodeIntent } from "./daemonset.ts";
import { boolEnv, cidrListEnv, connmarkEnv, type SnatType, snatTypeEnv } from "./env.ts";
import { awsNodeChains, awsNodeRules, savedOrder } from "./rules.ts";

const FILE = "cluster/aws-node.yaml";
const upstream = readFileSync(
  new URL("./fixtures/aws-k8s-cni-v1.23.1-daemonset.yaml", import.meta.url),
  "utf8",
);
/** The upstream DaemonSet with an env entry added after EXTERNALSNAT's. */
const withEnv = (name: string, value: string) =>
  upstream.replace(
    '              value: "false"\n            - name: AWS_VPC_K8S_CNI_LOGLEVEL',
    `              value: "false"\n            - name: ${name}\n              value: "${value}"\n            - name: AWS_VPC_K8S_CNI_LOGLEVEL`,
  );
const intentOf = (text: string) => readAwsNodeIntent(readKubeObjects(text, FILE).value);

describe("env values as the plugin reads them", () => {
  it("ParseBool: Go's spellings, the default on anything else", () => {
    assert.equal(boolEnv("X", "True", false).value, true);
    assert.equal(boolEnv("X", "t", false).value, true);
    assert.equal(boolEnv("X", "yes", false).value, false);
    assert.match(boolEnv("X", "yes", false).note?.message ?? "", /Failed to parse X/);
    assert.equal(boolEnv("X", "", true).value, true);
  });
  it("parseCIDRString: trims, skips invalid and IPv6 items, prints the network", () => {
    const r = cidrListEnv("L", " 10.20.0.1/16, bogus,fd00::/8,172.16.0.0/12");
    assert.deepEqual(r.cidrs, ["10.20.0.0/16", "172.16.0.0/12"]);
    assert.deepEqual(
      r.notes.map((n) => n.message),
      [" bogus from L is not a valid CIDR", "fd00::/8 from L is an IPV6 CIDR"],
    );
  });
  it("typeOfSNAT and getConnmark", () => {
    assert.equal(snatTypeEnv(undefined).value, "prng");
    assert.equal(snatTypeEnv("none").value, "none");
    assert.equal(snatTypeEnv("random").value, "prng");
    assert.ok(snatTypeEnv("random").note);
    assert.equal(connmarkEnv("0x40").value, 0x40);
    assert.equal(connmarkEnv("010").value, 8);
    assert.equal(connmarkEnv("0").value, 0x80);
    assert.equal(connmarkEnv("0x100000000").value, 0x80);
  });
});

describe("readAwsNodeIntent", () => {
  it("reads the upstream v1.23.1 DaemonSet: SNAT on, prng, node ports, mark 0x80, veth eni", () => {
    const i = intentOf(upstream);
    assert.ok(i);
    assert.equal(i.container, "aws-node");
    assert.deepEqual(i.settings, {
      externalSnat: false,
      excludeSnatCidrs: [],
      snatType: "prng",
      nodePortSupport: true,
      connmark: 0x80,
      vethPrefix: "eni",
    });
    const ext = i.env.get("AWS_VPC_K8S_CNI_EXTERNALSNAT");
    assert.equal(ext?.source.file, FILE);
    // the value line in the file (two header lines + the document's own lines)
    const line =
      upstream.split("\n").findIndex((l) => l.includes("AWS_VPC_K8S_CNI_EXTERNALSNAT")) + 2;
    assert.equal(ext?.source.line, line);
    assert.equal(i.env.get("MY_NODE_NAME")?.valueFrom, true);
  });
  it("reads EXCLUDE_SNAT_CIDRS with its line, and EXTERNALSNAT=true", () => {
    const i = intentOf(withEnv("AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS", "10.20.0.0/16"));
    assert.deepEqual(i?.settings.excludeSnatCidrs, ["10.20.0.0/16"]);
    assert.match(
      i?.env.get("AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS")?.source.text ?? "",
      /10\.20\.0\.0\/16/,
    );
    const bad = intentOf(withEnv("AWS_VPC_K8S_CNI_CONNMARK", "bogus"));
    assert.equal(bad?.settings.connmark, 0x80);
    assert.equal(bad?.notes.length, 1);
    const ext = upstream.replace(
      'AWS_VPC_K8S_CNI_EXTERNALSNAT\n              value: "false"',
      'AWS_VPC_K8S_CNI_EXTERNALSNAT\n              value: "true"',
    );
    assert.equal(intentOf(ext)?.settings.externalSnat, true);
  });
  it("is undefined without an aws-node DaemonSet", () => {
    assert.equal(
      intentOf("kind: ConfigMap\napiVersion: v1\nmetadata: {name: x, namespace: kube-system}\n"),
      undefined,
    );
  });
});

describe("awsNodeRules", () => {
  const settings = {
    externalSnat: false,
    excludeSnatCidrs: ["10.20.0.0/16"],
    snatType: "prng" as SnatType,
    nodePortSupport: true,
    connmark: 0x80,
    vethPrefix: "eni",
  };
  const input = {
    vpcCidrs: ["192.168.0.0/16", "100.64.0.0/16"],
    settings,
    primaryIp: "192.168.1.10",
    primaryInterface: "eth0",
  };
  it("puts the CIDR RETURNs (inserted at 1) in reverse order before the SNAT rule", () => {
    const order = savedOrder(awsNodeRules(input));
    assert.deepEqual(order.get("nat/AWS-SNAT-CHAIN-0"), [
      '-A AWS-SNAT-CHAIN-0 -d 10.20.0.0/16 -m comment --comment "AWS SNAT CHAIN EXCLUSION" -j RETURN',
      '-A AWS-SNAT-CHAIN-0 -d 100.64.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j RETURN',
      '-A AWS-SNAT-CHAIN-0 -d 192.168.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j RETURN',
      '-A AWS-SNAT-CHAIN-0 ! -o vlan+ -m comment --comment "AWS, SNAT" -m addrtype ! --dst-type LOCAL -j SNAT --to-source 192.168.1.10 --random-fully',
    ]);
    assert.equal(order.get("nat/AWS-CONNMARK-CHAIN-0")?.length, 4);
  });
  it("--random for hashrandom (or prng without --random-fully), none for none", () => {
    const snat = (s: Partial<typeof settings>, hasRandomFully = true) =>
      awsNodeRules({ ...input, hasRandomFully, settings: { ...settings, ...s } }).find(
        (r) => r.kind === "snat",
      )?.saved;
    assert.match(snat({ snatType: "hashrandom" }) ?? "", / --random$/);
    assert.match(snat({}, false) ?? "", / --random$/);
    assert.match(snat({ snatType: "none" }) ?? "", /--to-source 192\.168\.1\.10$/);
  });
  it("EXTERNALSNAT=true: no SNAT or connmark nat rules, only the node-port mangle rules", () => {
    const rules = awsNodeRules({ ...input, settings: { ...settings, externalSnat: true } });
    assert.deepEqual(
      rules.map((r) => r.kind),
      ["mangle-connmark-set", "mangle-connmark-restore", "mangle-connmark-restore-vlan"],
    );
    assert.deepEqual(awsNodeChains({ ...input, settings: { ...settings, externalSnat: true } }), [
      "AWS-SNAT-CHAIN-0",
    ]);
  });
});
