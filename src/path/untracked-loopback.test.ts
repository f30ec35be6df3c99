/**
 * The whole-path evaluator on two things the kernel differential found: a packet raw marks
 * NOTRACK skips the nat table (no DNAT, no SNAT) and matches `--ctstate UNTRACKED`; the node's
 * packet to its own address meets mangle POSTROUTING and raw/mangle PREROUTING on lo before INPUT;
 * the node's packet is routed once before any hook (the socket's route: its mark, from lo) and
 * every OUTPUT chain's `-o` sees that route's device, whatever a mark or DNAT reroutes it to.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readIpRoute } from "../evidence/ip-route.ts";
import { readIpRule } from "../evidence/ip-rule.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import { formatIp, parseIp } from "../net/cidr.ts";
import { compilePath } from "./evaluate-path.ts";
import { NODE_TEST_ROUTES as ROUTES } from "./test-helpers/node-routes.ts";

function evaluate(
  rules: string,
  packet: { src: string; dst: string; origin: "pod" | "host"; dport?: number },
  ipRule?: string,
) {
  const dump = parseIptablesSave(rules, "nodes/n1/iptables-save.txt").value;
  const routes = readIpRoute(ROUTES, "nodes/n1/ip-route.txt").value;
  const ipRules = ipRule ? readIpRule(ipRule, "nodes/n1/ip-rule.txt").value : undefined;
  return compilePath(dump, {
    routing: { routes, ...(ipRules ? { rules: ipRules } : {}) },
    localAddresses: [parseIp("10.244.0.1"), parseIp("192.168.10.2")],
  }).evaluate({
    src: parseIp(packet.src),
    dst: parseIp(packet.dst),
    proto: "udp",
    sport: 20001,
    dport: packet.dport ?? 53,
    origin: packet.origin,
  });
}

describe("compilePath: untracked packets and the node's packets to itself", () => {
  it("skips nat for a packet raw PREROUTING marks NOTRACK, and --ctstate UNTRACKED matches it", () => {
    const rules = [
      "*raw",
      ":PREROUTING ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "-A PREROUTING -s 10.244.0.5/32 -j CT --notrack",
      "COMMIT",
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A PREROUTING -d 10.96.0.10/32 -p udp -j DNAT --to-destination 8.8.8.8:53",
      "-A POSTROUTING -j MASQUERADE",
      "COMMIT",
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD DROP [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "-A FORWARD -m conntrack --ctstate UNTRACKED -j ACCEPT",
      "COMMIT",
      "",
    ].join("\n");
    const r = evaluate(rules, { src: "10.244.0.5", dst: "10.96.0.10", origin: "pod" });
    assert.equal(r.outcomes.length, 1);
    const v = r.outcomes[0]!.verdict;
    assert.equal(v.kind, "forwarded");
    assert.equal(v.kind === "forwarded" ? formatIp(v.dst) : "", "10.96.0.10");
    assert.equal(v.kind === "forwarded" && v.src ? formatIp(v.src) : "", "10.244.0.5");
    // a tracked packet is translated and then dropped by the policy
    const t = evaluate(rules, { src: "10.244.0.6", dst: "10.96.0.10", origin: "pod" });
    assert.equal(t.outcomes[0]!.verdict.kind, "dropped");
    assert.equal(formatIp(t.outcomes[0]!.dstOut), "8.8.8.8");
  });

  it("walks mangle PREROUTING on lo for the node's packet to its own address", () => {
    const rules = [
      "*mangle",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A PREROUTING -i lo -p udp -j DROP",
      "COMMIT",
      "",
    ].join("\n");
    const r = evaluate(rules, { src: "10.244.0.1", dst: "192.168.10.2", origin: "host" });
    assert.deepEqual(
      r.outcomes.map((o) => o.verdict.kind),
      ["dropped"],
    );
    // a pod's packet to the node enters by pod0: the lo rule does not match
    const p = evaluate(rules, { src: "10.244.0.5", dst: "192.168.10.2", origin: "pod" });
    assert.deepEqual(
      p.outcomes.map((o) => o.verdict.kind),
      ["delivered"],
    );
  });

  it("keeps the node's own packet tracked when raw PREROUTING on lo says NOTRACK", () => {
    const rules = [
      "*raw",
      ":PREROUTING ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "-A PREROUTING -j CT --notrack",
      "COMMIT",
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "-A INPUT -m conntrack --ctstate UNTRACKED -j DROP",
      "COMMIT",
      "",
    ].join("\n");
    const r = evaluate(rules, { src: "10.244.0.1", dst: "192.168.10.2", origin: "host" });
    assert.deepEqual(
      r.outcomes.map((o) => o.verdict.kind),
      ["delivered"],
    );
  });

  it("refuses the node's packet when its socket's route is refused, before mangle re-marks it", () => {
    const rules = [
      "*mangle",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A OUTPUT -j MARK --set-xmark 0x10/0xffffffff",
      "COMMIT",
      "",
    ].join("\n");
    const ipRule = [
      "0:\tfrom all lookup local",
      "102:\tfrom all fwmark 0x10 lookup main",
      "117:\tfrom all to 10.20.0.0/16 unreachable",
      "32766:\tfrom all lookup main",
      "",
    ].join("\n");
    const r = evaluate(rules, { src: "10.244.0.1", dst: "10.20.31.5", origin: "host" }, ipRule);
    assert.deepEqual(
      r.outcomes.map((o) => o.verdict.kind),
      ["unroutable"],
    );
    // a pod's packet is routed after mangle: its mark takes it to the main table
    const p = evaluate(
      rules.replace("-A OUTPUT", "-A PREROUTING"),
      {
        src: "10.244.0.5",
        dst: "10.20.31.5",
        origin: "pod",
      },
      ipRule,
    );
    assert.deepEqual(
      p.outcomes.map((o) => o.verdict.kind),
      ["forwarded"],
    );
  });

  it("matches -o in filter OUTPUT on the socket's route, not on where DNAT sends the packet", () => {
    const rules = [
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A OUTPUT -d 10.96.0.10/32 -p udp -j DNAT --to-destination 192.168.10.2:8080",
      "COMMIT",
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "-A OUTPUT -o lo -j REJECT --reject-with icmp-port-unreachable",
      "-A OUTPUT -o eth0 -j DROP",
      "COMMIT",
      "",
    ].join("\n");
    const r = evaluate(rules, { src: "192.168.10.2", dst: "10.96.0.10", origin: "host" });
    assert.deepEqual(
      r.outcomes.map((o) => o.verdict.kind),
      ["dropped"],
    );
    // sent to the node's own address in the first place: the socket's route is lo
    const l = evaluate(rules, { src: "192.168.10.2", dst: "10.244.0.1", origin: "host" });
    assert.deepEqual(
      l.outcomes.map((o) => o.verdict.kind),
      ["rejected"],
    );
  });

  it("gives nat POSTROUTING the mark mangle FORWARD set after the routing decision", () => {
    const rules = [
      "*mangle",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A FORWARD -o eth0 -j MARK --set-xmark 0x4000/0x4000",
      "COMMIT",
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A POSTROUTING -m mark --mark 0x4000/0x4000 -j SNAT --to-source 192.0.2.7",
      "COMMIT",
      "",
    ].join("\n");
    const r = evaluate(rules, { src: "10.244.0.5", dst: "8.8.8.8", origin: "pod" });
    const v = r.outcomes[0]?.verdict;
    assert.equal(r.outcomes.length, 1);
    assert.equal(v?.kind === "forwarded" && v.src ? formatIp(v.src) : "", "192.0.2.7");
  });

  it("leaves an untracked packet's mark alone on CONNMARK --restore-mark", () => {
    const rules = [
      "*raw",
      ":PREROUTING ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "-A PREROUTING -p udp -j CT --notrack",
      "COMMIT",
      "*mangle",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A PREROUTING -j MARK --set-xmark 0x10/0xffffffff",
      "-A PREROUTING -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff",
      "COMMIT",
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "-A FORWARD -m mark --mark 0x10 -j DROP",
      "COMMIT",
      "",
    ].join("\n");
    const r = evaluate(rules, { src: "10.244.0.5", dst: "8.8.8.8", origin: "pod" });
    assert.deepEqual(
      r.outcomes.map((o) => o.verdict.kind),
      ["dropped"],
    );
  });

  it("walks mangle OUTPUT once for the node's packet, before nat OUTPUT's DNAT", () => {
    const rules = [
      "*mangle",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A OUTPUT -d 172.16.0.0/12 -j MARK --set-xmark 0x10/0xffffffff",
      "COMMIT",
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A OUTPUT -d 10.96.0.10/32 -p udp -j DNAT --to-destination 172.16.5.5:53",
      "COMMIT",
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "-A OUTPUT -m mark --mark 0x10/0x10 -j DROP",
      "COMMIT",
      "",
    ].join("\n");
    const r = evaluate(rules, { src: "192.168.10.2", dst: "10.96.0.10", origin: "host" });
    assert.deepEqual(
      r.outcomes.map((o) => o.verdict.kind),
      ["forwarded"],
    );
    assert.equal(formatIp(r.outcomes[0]!.dstOut), "172.16.5.5");
  });

  it("leaves the node's packet to itself undecided when nat POSTROUTING rewrites its source", () => {
    const rules = [
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "-A POSTROUTING -j MASQUERADE",
      "COMMIT",
      "*filter",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "-A INPUT -s 10.0.0.0/8 -j DROP",
      "COMMIT",
      "",
    ].join("\n");
    const r = evaluate(rules, { src: "192.168.10.2", dst: "192.168.10.2", origin: "host" });
    assert.deepEqual(
      r.outcomes.map((o) => o.verdict.kind),
      ["undecided"],
    );
  });
});
