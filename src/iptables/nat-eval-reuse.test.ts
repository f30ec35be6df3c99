/**
 * @module iptables/nat-eval-reuse.test — a flow asked again with only another outgoing interface
 * (`reuseFirstHook`: the whole path asks so for a Service's endpoint) gets the answer a fresh
 * evaluation gives, whatever was asked before it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseIp } from "../net/cidr.ts";
import { compileNat } from "./nat-eval.ts";
import type { Flow, NatContext } from "./nat-trace.ts";
import { parseIptablesSave } from "./save-parser.ts";

const RULES = [
  "*nat",
  ":PREROUTING ACCEPT [0:0]",
  ":INPUT ACCEPT [0:0]",
  ":OUTPUT ACCEPT [0:0]",
  ":POSTROUTING ACCEPT [0:0]",
  ":KUBE-SERVICES - [0:0]",
  ":KUBE-SVC-A - [0:0]",
  ":KUBE-SEP-1 - [0:0]",
  ":KUBE-SEP-2 - [0:0]",
  ":KUBE-SEP-3 - [0:0]",
  ":KUBE-MARK-MASQ - [0:0]",
  ":KUBE-POSTROUTING - [0:0]",
  "-A PREROUTING -j KUBE-SERVICES",
  "-A OUTPUT -o eth0 -j KUBE-SERVICES",
  "-A POSTROUTING -j KUBE-POSTROUTING",
  "-A POSTROUTING -o eth0 ! -d 10.0.0.0/8 -j MASQUERADE",
  "-A POSTROUTING ! -o cbr0 -d 10.4.0.0/14 -j SNAT --to-source 10.128.0.20",
  "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
  "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
  "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
  "-A KUBE-POSTROUTING -o cbr0 -j MASQUERADE",
  "-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 443 -j KUBE-SVC-A",
  "-A KUBE-SVC-A -m statistic --mode random --probability 0.33333 -j KUBE-SEP-1",
  "-A KUBE-SVC-A -m statistic --mode random --probability 0.5 -j KUBE-SEP-2",
  "-A KUBE-SVC-A -j KUBE-SEP-3",
  "-A KUBE-SEP-1 -s 10.4.1.5/32 -j KUBE-MARK-MASQ",
  "-A KUBE-SEP-1 -p tcp -m tcp -j DNAT --to-destination 10.4.1.5:8443",
  "-A KUBE-SEP-2 -s 10.4.2.6/32 -j KUBE-MARK-MASQ",
  "-A KUBE-SEP-2 -p tcp -m tcp -j DNAT --to-destination 10.4.2.6:8443",
  "-A KUBE-SEP-3 -s 10.8.0.7/32 -j KUBE-MARK-MASQ",
  "-A KUBE-SEP-3 -p tcp -m tcp -j DNAT --to-destination 10.8.0.7:8443",
  "COMMIT",
];

const ctx: NatContext = {
  localAddresses: [parseIp("10.128.0.20")],
  interfaces: [
    { name: "eth0", primary: parseIp("10.128.0.20") },
    { name: "cbr0", primary: parseIp("10.4.0.1") },
  ],
};

const flow = (src: string, dst: string, more: Partial<Flow> = {}): Flow => ({
  src: parseIp(src),
  dst: parseIp(dst),
  proto: "tcp",
  sport: 40000,
  dport: 443,
  origin: "pod",
  inIface: "cbr0",
  mark: 0,
  ...more,
});

describe("compileNat with reuseFirstHook", () => {
  const dump = parseIptablesSave(`${RULES.join("\n")}\n`, "rules.txt").value;

  it("answers a flow asked again with another outgoing interface as a fresh evaluation does", () => {
    const reused = compileNat(dump, { ...ctx, reuseFirstHook: true });
    const asks: Flow[] = [];
    for (const src of ["10.4.1.5", "10.4.3.9", "10.8.0.7"]) {
      for (const dst of ["10.96.0.10", "8.8.8.8", "10.4.2.6"]) {
        for (const out of ["eth0", "cbr0", "eth0", "tun0"]) {
          asks.push(flow(src, dst, { outIface: out }));
        }
        // the same flow but for its mark, its port or its word on the destination: not reused
        asks.push(flow(src, dst, { outIface: "cbr0", mark: 0x4000 }));
        asks.push(flow(src, dst, { outIface: "cbr0", sport: 40001 }));
        asks.push(flow(src, dst, { outIface: "eth0", dstLocal: false }));
        asks.push(flow(src, dst, { outIface: "cbr0" }));
      }
    }
    let differs = 0;
    for (const f of asks) {
      const fresh = compileNat(dump, ctx).evaluate(f);
      assert.deepEqual(reused.evaluate(f), fresh, JSON.stringify({ ...f, src: 0, dst: 0 }));
      if (f.outIface === "cbr0" && fresh.decision === "branches") differs++;
    }
    // the interface does change answers here: the reuse is held to something
    const viaEth0 = compileNat(dump, ctx).evaluate(
      flow("10.4.1.5", "10.96.0.10", { outIface: "eth0" }),
    );
    const viaCbr0 = compileNat(dump, ctx).evaluate(
      flow("10.4.1.5", "10.96.0.10", { outIface: "cbr0" }),
    );
    assert.notDeepEqual(viaEth0.branches, viaCbr0.branches);
    assert.ok(differs > 0);
  });

  it("walks the node's own flow whole again: nat OUTPUT sees the outgoing interface", () => {
    const reused = compileNat(dump, { ...ctx, reuseFirstHook: true });
    for (const out of ["eth0", "cbr0", "eth0"]) {
      const f = flow("10.128.0.20", "10.96.0.10", { origin: "host", outIface: out });
      assert.deepEqual(reused.evaluate(f), compileNat(dump, ctx).evaluate(f));
    }
    const dnatted = (out: string) =>
      reused
        .evaluate(flow("10.128.0.20", "10.96.0.10", { origin: "host", outIface: out }))
        .steps.some((s) => s.kind === "dnat");
    assert.equal(dnatted("cbr0"), false);
  });
});
