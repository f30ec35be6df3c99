/**
 * @module path/excerpt-missing-chain.test — a filter rule that jumps to a chain the excerpt does
 * not show (a grep of iptables-save keeps `-A INPUT -j KUBE-FIREWALL` but not KUBE-FIREWALL's
 * rules): the walk follows both ways, the chain deciding (undecided, with the command that shows
 * it) and the chain letting the packet through (on to the next rule), as the nat evaluator does.
 * The lab's service scenario's INPUT, as `iptables-save | grep INPUT` prints it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PathOutcome, PathResult } from "./path-types.ts";
import { podPacketAnswer, snapshotWith } from "./test-helpers/node-snapshot.ts";

const IP_ADDR = `1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
    inet 127.0.0.1/8 scope host lo
       valid_lft forever preferred_lft forever
4: eth0@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default qlen 1000
    link/ether 86:78:8b:b8:56:99 brd ff:ff:ff:ff:ff:ff link-netns ppktk6-peer
    inet 192.168.50.10/24 scope global eth0
       valid_lft forever preferred_lft forever
`;
const IP_ROUTE = `default via 192.168.50.20 dev eth0 
10.244.1.7 dev veth-client scope link 
192.168.50.0/24 dev eth0 proto kernel scope link src 192.168.50.10 
local 192.168.50.10 dev eth0 table local proto kernel scope host src 192.168.50.10 
`;

/** The node's answer for pod 10.244.1.7 → 192.168.50.10:6443 (delivered locally: filter INPUT). */
function answer(excerpt: string): PathResult {
  const snap = snapshotWith({
    "nodes/worker-1/iptables-save.txt": excerpt,
    "nodes/worker-1/ip-addr.txt": IP_ADDR,
    "nodes/worker-1/ip-route.txt": IP_ROUTE,
  });
  return podPacketAnswer(snap, "worker-1", {
    src: "10.244.1.7",
    dst: "192.168.50.10",
    dport: 6443,
    inIface: "veth-client",
  });
}

/** Whether the outcome took the fact "chain NAME … decides this packet" the given way. */
function took(o: PathOutcome, name: string, holds: boolean): boolean {
  return o.steps.some(
    (s) =>
      s.kind === "assume" &&
      s.holds === holds &&
      s.fact.startsWith(`chain ${name} (filter, not in `) &&
      s.fact.endsWith(" decides this packet"),
  );
}

describe("a filter rule jumping to a chain the excerpt does not show", () => {
  it("is followed both ways: the chain deciding, and the rules after it (here INPUT's REJECT)", () => {
    const r = answer(
      [
        ":INPUT ACCEPT [0:0]",
        "-A INPUT -j KUBE-FIREWALL",
        "-A INPUT -m state --state RELATED,ESTABLISHED -j ACCEPT",
        "-A INPUT -p tcp -m state --state NEW -m tcp --dport 22 -j ACCEPT",
        "-A INPUT -j REJECT --reject-with icmp-host-prohibited",
        "",
      ].join("\n"),
    );
    const locals = r.outcomes.filter((o) => o.kind === "local");
    const rejected = locals.filter((o) => o.verdict.kind === "rejected");
    assert.ok(rejected.length > 0, JSON.stringify(locals.map((o) => o.verdict)));
    for (const o of rejected) {
      assert.ok(took(o, "KUBE-FIREWALL", false));
      assert.equal(o.verdict.kind === "rejected" && o.verdict.by.line, 5);
    }
    const decides = locals.filter((o) => took(o, "KUBE-FIREWALL", true));
    assert.ok(decides.length > 0);
    for (const o of decides) {
      assert.equal(o.verdict.kind, "undecided");
      assert.match(
        o.verdict.kind === "undecided" ? o.verdict.reason : "",
        /jump to chain KUBE-FIREWALL, which is not in /,
      );
      assert.deepEqual(
        o.verdict.kind === "undecided" && o.verdict.unknowns.map((u) => u.decide.command),
        ["iptables-save -t filter   # on the node: chain KUBE-FIREWALL"],
      );
    }
  });

  it("a goto to it leaves the calling chain when the chain does not decide", () => {
    const r = answer(
      [
        ":INPUT ACCEPT [0:0]",
        ":GUARD - [0:0]",
        "-A INPUT -j GUARD",
        "-A INPUT -j REJECT --reject-with icmp-host-prohibited",
        "-A GUARD -g MISSING",
        "-A GUARD -j ACCEPT",
        "",
      ].join("\n"),
    );
    const passed = r.outcomes.filter((o) => took(o, "MISSING", false));
    assert.ok(passed.length > 0);
    // back in INPUT after the goto (GUARD's ACCEPT is skipped): INPUT's REJECT at line 4
    for (const o of passed) {
      assert.equal(o.verdict.kind, "rejected", JSON.stringify(o.verdict));
      assert.equal(o.verdict.kind === "rejected" && o.verdict.by.line, 4);
    }
    assert.ok(!r.outcomes.some((o) => o.verdict.kind === "delivered"));
  });
});
