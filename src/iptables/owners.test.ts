import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import type { IptablesDump, Rule } from "./dump.ts";
import { attributeRule, factsOfRule, type Owner, ruleAtLine } from "./owners.ts";
import { parseIptablesSave } from "./save-parser.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const rulesOf = (d: IptablesDump): Rule[] =>
  [...d.tables.values()].flatMap((t) => [...t.chains.values()].flatMap((c) => c.rules));
const ownerOfLine = (d: IptablesDump, pattern: RegExp): Owner => {
  const r = rulesOf(d).find((x) => pattern.test(x.source.text ?? ""));
  assert.ok(r, `no rule matches ${pattern}`);
  return attributeRule(factsOfRule(r)).owner;
};

/**
 * The AWS VPC CNI's rules as `iptables-save` v1.8.9 prints them after they were added with the
 * argv of amazon-vpc-cni-k8s v1.23.1 (pkg/networkutils/network.go buildIptablesSNATRules,
 * iptables_connmark.go buildRules): VPC CIDR 192.168.0.0/16, one excluded CIDR 10.20.0.0/16.
 */
const AWS_SAVE = `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -i eth0 -m comment --comment "AWS, primary ENI" -m addrtype --dst-type LOCAL --limit-iface-in -j CONNMARK --set-xmark 0x80/0x80
-A PREROUTING -i eni+ -m comment --comment "AWS, primary ENI" -j CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:AWS-CONNMARK-CHAIN-0 - [0:0]
:AWS-SNAT-CHAIN-0 - [0:0]
:KUBE-POSTROUTING - [0:0]
-A PREROUTING -i eni+ -m comment --comment "AWS, outbound connections" -j AWS-CONNMARK-CHAIN-0
-A PREROUTING -m comment --comment "AWS, CONNMARK" -j CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -m comment --comment "AWS SNAT CHAIN" -j AWS-SNAT-CHAIN-0
-A AWS-CONNMARK-CHAIN-0 -d 192.168.0.0/16 -m comment --comment "AWS CONNMARK CHAIN" -j RETURN
-A AWS-CONNMARK-CHAIN-0 -m comment --comment "AWS, CONNMARK" -j CONNMARK --set-xmark 0x80/0x80
-A AWS-SNAT-CHAIN-0 -d 10.20.0.0/16 -m comment --comment "AWS SNAT CHAIN EXCLUSION" -j RETURN
-A AWS-SNAT-CHAIN-0 -d 192.168.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j RETURN
-A AWS-SNAT-CHAIN-0 ! -o vlan+ -m comment --comment "AWS, SNAT" -m addrtype ! --dst-type LOCAL -j SNAT --to-source 192.168.1.10 --random-fully
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
COMMIT
`;

describe("attributeRule on real rule texts", () => {
  it("gives every AWS VPC CNI rule to aws-vpc-cni, kube-proxy's to kube-proxy", () => {
    const { value: d } = parseIptablesSave(AWS_SAVE, "iptables-save.txt");
    for (const r of rulesOf(d)) {
      const a = attributeRule(factsOfRule(r));
      const expected = r.chain === "KUBE-POSTROUTING" || /kubernetes/.test(r.source.text ?? "");
      assert.equal(a.owner, expected ? "kube-proxy" : "aws-vpc-cni", r.source.text);
    }
    const exclusion = rulesOf(d).find((r) => /EXCLUSION/.test(r.source.text ?? ""))!;
    const a = attributeRule(factsOfRule(exclusion));
    assert.equal(a.by, "comment");
    assert.match(a.reason, /"AWS SNAT CHAIN EXCLUSION"/);
  });

  it("tells GKE's node startup (ip-masq:) from the agent (ip-masq-agent:) by the comment", () => {
    const f = "k8s-issue-64212_gke-1.10_IP-MASQ-plus-IP-MASQ-AGENT_grep.txt";
    const { value: d } = parseIptablesSave(fixture(f), f, { table: "nat" });
    assert.equal(ownerOfLine(d, /custom IP-MASQ chain/), "gke-node-startup");
    assert.equal(ownerOfLine(d, /custom IP-MASQ-AGENT chain/), "ip-masq-agent");
  });

  it("reads Dataplane V2's dump: Cilium feeders, node-startup IP-MASQ", () => {
    const f = "gke-dpv2-1.29_iptables-S-nat_IP-MASQ-default-snat_cilium.txt";
    const { value: d } = parseIptablesSave(fixture(f), f);
    assert.equal(ownerOfLine(d, /cilium-feeder: CILIUM_POST_nat/), "cilium");
    assert.equal(ownerOfLine(d, /-A IP-MASQ -d 10\.0\.0\.0\/8/), "gke-node-startup");
    assert.equal(ownerOfLine(d, /must be last in chain/), "gke-node-startup");
  });

  it("reads the legacy kubenet node: kubenet's SNAT, kube-proxy's mark masquerade", () => {
    const f = "gke-legacy-kubenet_iptables-S-nat_kube-proxy_kubenet-snat.txt";
    const { value: d } = parseIptablesSave(fixture(f), f);
    assert.equal(ownerOfLine(d, /kubenet: SNAT/), "kubenet");
    assert.equal(ownerOfLine(d, /KUBE-POSTROUTING.*MASQUERADE/), "kube-proxy");
    assert.equal(ownerOfLine(d, /-A KUBE-MARK-MASQ/), "kube-proxy");
  });

  it("names Docker's and kubelet's chains, and leaves an unmarked POSTROUTING rule unknown", () => {
    const f = "kubeadm-docker_k8s-pr-75893_iptables-save-nat-header.txt";
    const { value: d } = parseIptablesSave(fixture(f), f);
    assert.equal(ownerOfLine(d, /-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER/), "docker");
    const masq = rulesOf(d).find((r) => /172\.17\.0\.0\/16 ! -o docker0/.test(r.source.text ?? ""));
    assert.ok(masq);
    const a = attributeRule(factsOfRule(masq));
    assert.equal(a.owner, "unknown");
    assert.match(a.reason, /without a comment/);
  });

  it("reads the other owners' names and comments as their code writes them", () => {
    const cases: [Parameters<typeof attributeRule>[0], Owner][] = [
      [
        {
          chain: "POSTROUTING",
          comment: 'name: "cbr0" id: "5f0c"',
          jumpTo: "CNI-0123456789abcdef01234567",
        },
        "bridge-cni",
      ],
      [{ chain: "CNI-0123456789abcdef01234567" }, "bridge-cni"],
      [{ chain: "cali-nat-outgoing", comment: "cali:Dw4T8UWPnCLxRJiI" }, "calico"],
      [{ chain: "cali-POSTROUTING" }, "calico"],
      [{ chain: "FLANNEL-POSTRTG", comment: "flanneld masq" }, "flannel"],
      [{ chain: "KUBE-KUBELET-CANARY" }, "kubelet"],
      [{ chain: "POSTROUTING", jumpTo: "IP-MASQ-AGENT" }, "ip-masq-agent"],
      [
        { chain: "POSTROUTING", comment: "something else", jumpTo: "AWS-SNAT-CHAIN-0" },
        "aws-vpc-cni",
      ],
      [{ chain: "POSTROUTING", comment: "AWS SNAT" }, "unknown"],
    ];
    for (const [facts, owner] of cases)
      assert.equal(attributeRule(facts).owner, owner, facts.chain);
  });

  it("takes the agent's --masq-chain as the agent's", () => {
    assert.equal(attributeRule({ chain: "MY-MASQ" }).owner, "unknown");
    assert.equal(
      attributeRule({ chain: "MY-MASQ" }, { masqChain: "MY-MASQ" }).owner,
      "ip-masq-agent",
    );
  });

  it("finds the rule written on a line", () => {
    const { value: d } = parseIptablesSave(AWS_SAVE, "n/iptables-save.txt");
    const line = AWS_SAVE.split("\n").findIndex((l) => l.includes("EXCLUSION")) + 1;
    assert.equal(ruleAtLine(d.tables, "n/iptables-save.txt", line)?.chain, "AWS-SNAT-CHAIN-0");
    assert.equal(ruleAtLine(d.tables, "n/iptables-save.txt", 1), undefined);
  });
});
