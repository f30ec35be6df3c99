import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { kernelSkip } from "./kernel-guard.ts";
import {
  GEN_IN_IFACE,
  GEN_NODE_IP,
  GEN_OUT_IFACE,
  generateFlows,
  generateRuleSet,
  renderRuleSet,
} from "./nat-gen.ts";
import { createNatSandbox } from "./nat-sandbox.ts";

describe("generateRuleSet", () => {
  it("is reproducible from its seed and differs between seeds", () => {
    assert.equal(renderRuleSet(generateRuleSet(42)), renderRuleSet(generateRuleSet(42)));
    const distinct = new Set(
      Array.from({ length: 20 }, (_, i) => renderRuleSet(generateRuleSet(i))),
    );
    assert.ok(distinct.size >= 15);
  });
  it("only jumps forward, so the chain graph has no loops", () => {
    for (let seed = 0; seed < 300; seed++) {
      const set = generateRuleSet(seed);
      for (const rule of set.rules) {
        const m = / -[jg] (C\d)$/.exec(` ${rule.spec}`);
        if (m) assert.ok(set.chains.indexOf(m[1]!) > set.chains.indexOf(rule.chain), rule.spec);
      }
    }
  });
  it("covers the features the differential suite promises", () => {
    const text = Array.from({ length: 200 }, (_, i) => renderRuleSet(generateRuleSet(i))).join(
      "\n",
    );
    for (const needle of [
      "-j RETURN",
      "-j MASQUERADE",
      "-j SNAT",
      "-g C",
      "-j C",
      "! -d",
      "! -s",
      "addrtype",
      "--dport",
      "multiport",
      "--to-ports",
      "-o eth0",
      "! -p",
      "-A PREROUTING",
      "-A OUTPUT",
      "--set-xmark 0x4000/0x4000",
      "-m mark --mark",
      "-m mark ! --mark",
    ]) {
      assert.ok(text.includes(needle), needle);
    }
  });
});

describe("generateFlows", () => {
  it("gives distinct (proto, src, sport) and icmp (src, dst) keys", () => {
    for (let seed = 0; seed < 50; seed++) {
      const flows = generateFlows(seed, 25);
      const keys = flows.map((f) =>
        f.proto === "icmp" ? `icmp/${f.src}/${f.dst}` : `${f.proto}/${f.src}/${f.sport}`,
      );
      assert.equal(new Set(keys).size, keys.length);
      assert.ok(flows.every((f) => f.local === (f.src === GEN_NODE_IP)));
    }
  });
});

describe("generated rule sets on the kernel", { skip: kernelSkip() }, () => {
  it("load with iptables-restore and every flow leaves a conntrack entry", async () => {
    const sb = await createNatSandbox({
      inIface: GEN_IN_IFACE,
      outIface: GEN_OUT_IFACE,
      nodeIp: GEN_NODE_IP,
    });
    try {
      for (let seed = 1; seed <= 15; seed++) {
        const set = generateRuleSet(seed);
        const err = await sb.loadNat(renderRuleSet(set));
        assert.equal(err, undefined, `seed ${seed}:\n${renderRuleSet(set)}`);
        const flows = generateFlows(seed, 10);
        const obs = await sb.observe(flows);
        for (const [i, o] of obs.entries()) {
          assert.equal(o.error, undefined, `seed ${seed} flow ${JSON.stringify(flows[i])}`);
        }
      }
    } finally {
      await sb.destroy();
    }
  });
});
