/**
 * `-m set --match-set` in the nat evaluator against the kernel: Calico's cali-nat-outgoing rule
 * (and a hash:ip SNAT rule) loaded with the real iptables-restore, its IP sets with the real
 * `ipset restore`, in a sandbox node; flows sent through it. The evaluator given the node's
 * `ipset save` (or `ipset list`) must give conntrack's translation for every flow; without the
 * sets it must say it cannot decide and ask for `ipset save`.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { createNatSandbox, type SandboxFlow } from "../lab/nat-sandbox.ts";
import { sandboxContext, sandboxFlow } from "../lab/replay.ts";
import { rootNamespaceHash } from "../lab/root-state.ts";
import { compareTranslation } from "../lab/translation.ts";
import { parseIpset } from "./ipset-parser.ts";
import { compileNat } from "./nat-eval.ts";
import { parseIptablesSave } from "./save-parser.ts";
import { hasCommand } from "./test-helpers/iptables-netns.ts";

const IN = "cali1a2b3c4d5e6";
const OUT = "eth0";
const NODE = "10.128.0.2";

const SETS = `create cali40masq-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576
add cali40masq-ipam-pools 10.244.0.0/16
create cali40all-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576
add cali40all-ipam-pools 10.244.0.0/16
add cali40all-ipam-pools 10.250.0.0/16
add cali40all-ipam-pools 10.250.3.0/24 nomatch
create pp-hosts hash:ip family inet
add pp-hosts 192.168.7.7
`;

const NAT = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:cali-POSTROUTING - [0:0]
:cali-nat-outgoing - [0:0]
-A POSTROUTING -m comment --comment "cali:O3lYWMrLQYEMJtB5" -j cali-POSTROUTING
-A cali-POSTROUTING -m set --match-set pp-hosts dst -j SNAT --to-source ${NODE}
-A cali-POSTROUTING -m comment --comment "cali:nYKhEzDlr11Jccal" -j cali-nat-outgoing
-A cali-nat-outgoing -m comment --comment "cali:flqWnvo8yq4ULQLa" -m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst -j MASQUERADE --random-fully
COMMIT
`;

const FLOWS: readonly SandboxFlow[] = [
  { proto: "tcp", src: "10.244.1.5", dst: "10.20.30.40", sport: 40001, dport: 5432 },
  { proto: "tcp", src: "10.244.1.6", dst: "10.250.1.1", sport: 40002, dport: 80 },
  { proto: "tcp", src: "10.244.1.7", dst: "10.250.3.7", sport: 40003, dport: 80 },
  { proto: "udp", src: "10.9.0.5", dst: "10.20.30.40", sport: 40004, dport: 53 },
  { proto: "tcp", src: "10.9.0.6", dst: "192.168.7.7", sport: 40005, dport: 443 },
  { proto: "tcp", src: "10.244.2.1", dst: "192.168.7.8", sport: 40006, dport: 443 },
];

const skip = kernelSkip() || (hasCommand("ipset") ? false : "ipset is not installed");

describe("-m set in the nat evaluator vs the kernel", { skip }, () => {
  it("decides every flow as conntrack does from ipset save and ipset list, and asks for them when absent", async () => {
    const rootBefore = await rootNamespaceHash();
    const sb = await createNatSandbox({ inIface: IN, outIface: OUT, nodeIp: NODE });
    try {
      const restored = await sb.node.exec(["ipset", "restore"], { input: SETS });
      assert.equal(restored.code, 0, restored.stderr);
      assert.equal(await sb.loadNat(NAT), undefined);
      const saved = await sb.node.exec(["iptables-save", "-t", "nat"]);
      const dump = parseIptablesSave(saved.stdout, "iptables-save.txt").value;
      const forms = [
        parseIpset((await sb.node.exec(["ipset", "save"])).stdout, "ipset.txt").value,
        parseIpset((await sb.node.exec(["ipset", "list"])).stdout, "ipset.txt").value,
      ];
      const observed = await sb.observe(FLOWS);
      const ctx = sandboxContext(NODE, IN, OUT);
      for (const ipsets of forms) {
        const nat = compileNat(dump, { ...ctx, ipsets });
        for (const [i, f] of FLOWS.entries()) {
          const t = nat.evaluate(sandboxFlow(f, IN, OUT));
          const a = compareTranslation(t, observed[i] ?? { error: "missing" });
          assert.equal(
            a.agree,
            true,
            `${ipsets.form} ${JSON.stringify(f)}: ${a.predicted} vs ${a.observed} ${a.why}`,
          );
        }
      }
      // the kernel did translate some and keep others: the comparison is not one-sided
      const sources = observed.map((o) => o.source);
      assert.ok(sources.includes(NODE) && sources.includes("10.244.1.6"), sources.join(" "));
      const blind = compileNat(dump, ctx).evaluate(sandboxFlow(FLOWS[0]!, IN, OUT));
      assert.notEqual(blind.decision, "masquerade");
      const asks = JSON.stringify(blind, (_k, v) => (typeof v === "bigint" ? String(v) : v));
      assert.match(asks, /undecided: give ipset save/);
    } finally {
      await sb.destroy();
    }
    assert.equal(await rootNamespaceHash(), rootBefore, "the root namespace changed");
  });
});
