import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { parseIpset } from "../../iptables/ipset-parser.ts";
import { hasCommand, iptablesNamespace } from "../../iptables/test-helpers/iptables-netns.ts";
import { kernelSkip } from "../../lab/kernel-guard.ts";
import { readIpPools } from "./ippool.ts";
import { calicoIpsetName, isAllPoolsSet } from "./ipsets.ts";
import {
  calicoNatRestoreText,
  felixRuleHashes,
  ipsetRestoreText,
  natOutgoingRules,
  postroutingHookRule,
} from "./rules.ts";

const POOLS = `apiVersion: crd.projectcalico.org/v1
kind: IPPool
metadata:
  name: default-ipv4-ippool
spec:
  cidr: 10.244.0.0/16
  natOutgoing: false
  blockSize: 26
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: ipv6-pool
spec:
  cidr: fd00:10:244::/64
  natOutgoing: true
  disabled: true
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: lb-pool
spec:
  cidr: 10.96.100.0/24
  allowedUses: [LoadBalancer]
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata:
  name: broken
spec:
  cidr: 10.300.0.0/16
  natOutgoing: "yes"
`;

describe("Felix's rule hashes", () => {
  it("gives the hash comments seen on real nodes (POSTROUTING hook, cali-nat-outgoing)", () => {
    assert.deepEqual(
      felixRuleHashes("POSTROUTING", ["-A POSTROUTING HASH --jump cali-POSTROUTING"]),
      ["O3lYWMrLQYEMJtB5"],
    );
    assert.match(postroutingHookRule(), /"cali:O3lYWMrLQYEMJtB5" --jump cali-POSTROUTING$/);
    const [legacy] = natOutgoingRules({ family: 4, allPoolsSetId: "all-ipam-pools" }, true);
    assert.equal(
      legacy,
      '-A cali-nat-outgoing -m comment --comment "cali:flqWnvo8yq4ULQLa" -m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst --jump MASQUERADE --random-fully',
    );
  });
  it("writes no rule while no pool has natOutgoing, five with a natPortRange, SNAT with an address", () => {
    assert.deepEqual(natOutgoingRules({ family: 4 }, false), []);
    const ported = natOutgoingRules({ family: 6, natPortRange: { min: 1024, max: 2047 } }, true);
    assert.equal(ported.length, 5);
    assert.match(
      ported[0] ?? "",
      /cali60masq-ipam-pools src .*cali60network-ip-pools dst -p tcp --jump MASQUERADE --to-ports 1024-2047 --random-fully$/,
    );
    assert.match(ported[1] ?? "", /-p tcp --jump RETURN$/);
    const snat = natOutgoingRules(
      { family: 4, natOutgoingAddress: "192.0.2.9", masqFullyRandom: false },
      true,
    );
    assert.match(snat[0] ?? "", /--jump SNAT --to-source 192\.0\.2\.9$/);
    // every hash differs with the rule's text and place
    assert.equal(new Set(ported.map((r) => r.slice(0, 60))).size, 5);
  });
});

describe("readIpPools", () => {
  const objects = readKubeObjects(POOLS, "cluster/ippools.yaml").value;
  const { pools, diagnostics } = readIpPools(objects);
  it("reads both API groups with the lines of cidr and natOutgoing", () => {
    assert.deepEqual(
      pools.map((p) => [p.name, p.cidrText, p.natOutgoing, p.disabled]),
      [
        ["default-ipv4-ippool", "10.244.0.0/16", false, false],
        ["ipv6-pool", "fd00:10:244::/64", true, true],
        ["lb-pool", "10.96.100.0/24", false, false],
        ["broken", "10.300.0.0/16", false, false],
      ],
    );
    assert.equal(pools[0]?.natOutgoingSource?.line, 7);
    assert.equal(pools[0]?.cidrSource.line, 6);
  });
  it("names what Calico would refuse, with its line", () => {
    assert.deepEqual(
      diagnostics.map((d) => [d.source?.line, /cidr|natOutgoing/.exec(d.message)?.[0]]),
      [
        [32, "cidr"],
        [33, "natOutgoing"],
      ],
    );
  });
  it("fills Felix's sets as masq_mgr does (disabled pools stay; LoadBalancer-only pools leave the all-pools set from v3.32)", () => {
    const v4 = parseIpset(ipsetRestoreText(pools, 4), "x").value;
    assert.deepEqual(
      v4.sets.get("cali40network-ip-pools")?.members?.map((m) => m.element),
      ["10.244.0.0/16"],
    );
    assert.deepEqual(v4.sets.get("cali40masq-ipam-pools")?.members, []);
    const legacy = parseIpset(ipsetRestoreText(pools, 4, "all-ipam-pools"), "x").value;
    assert.equal(legacy.sets.get("cali40all-ipam-pools")?.members?.length, 2);
    const v6 = parseIpset(ipsetRestoreText(pools, 6), "x").value;
    assert.deepEqual(
      v6.sets.get("cali60masq-ipam-pools")?.members?.map((m) => m.element),
      ["fd00:10:244::/64"],
    );
  });
  it("set names", () => {
    assert.equal(calicoIpsetName(6, "masq-ipam-pools"), "cali60masq-ipam-pools");
    assert.ok(isAllPoolsSet("cali40all-ipam-pools") && isAllPoolsSet("cali60network-ip-pools"));
  });
  it("never throws on mutated pools", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: POOLS.length }),
        fc.string({ maxLength: 8 }),
        (at, s) => {
          const text = POOLS.slice(0, at) + s + POOLS.slice(at + 1);
          const r = readIpPools(readKubeObjects(text, "f.yaml").value);
          for (const d of r.diagnostics) assert.equal(d.source?.file, "f.yaml");
        },
      ),
      { numRuns: 200 },
    );
  });
});

const skip = kernelSkip() || (hasCommand("ipset") ? false : "ipset is not installed");

describe("Felix's rendering on the real tools", { skip }, () => {
  const suite = iptablesNamespace("ppca");
  it("loads with iptables-restore and ipset restore; iptables-save prints the rule as on real nodes", async () => {
    const pools = readIpPools(
      readKubeObjects(POOLS.replace("natOutgoing: false", "natOutgoing: true"), "p.yaml").value,
    ).pools;
    const sets = await suite.ns.exec(["ipset", "restore"], {
      input: ipsetRestoreText(pools, 4, "all-ipam-pools"),
    });
    assert.equal(sets.code, 0, sets.stderr);
    const text = calicoNatRestoreText({ family: 4, allPoolsSetId: "all-ipam-pools" }, true);
    const r = await suite.ns.exec(["iptables-restore", "--noflush"], { input: text });
    assert.equal(r.code, 0, r.stderr);
    const saved = (await suite.ns.exec(["iptables-save", "-t", "nat"])).stdout;
    assert.match(
      saved,
      /^-A cali-nat-outgoing -m comment --comment "cali:flqWnvo8yq4ULQLa" -m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst -j MASQUERADE --random-fully$/m,
    );
    assert.match(
      saved,
      /^-A POSTROUTING -m comment --comment "cali:O3lYWMrLQYEMJtB5" -j cali-POSTROUTING$/m,
    );
  });
});
