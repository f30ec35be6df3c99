/**
 * @module path/established-nat.test — a later packet of a connection (ctstate ESTABLISHED) keeps
 * the translation its first packet got: the nat rules are read as that packet met them (state
 * NEW), while filter's conntrack matches see the later packet's state.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readIpRoute } from "../evidence/ip-route.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import { formatIp, parseIp } from "../net/cidr.ts";
import { compilePath } from "./evaluate-path.ts";
import { NODE_TEST_ROUTES } from "./test-helpers/node-routes.ts";

const DUMP = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -d 10.96.0.10/32 -p udp -m conntrack --ctstate NEW -j DNAT --to-destination 192.168.10.7:53
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
`;

describe("a later packet of a connection", () => {
  const path = compilePath(parseIptablesSave(DUMP, "iptables-save.txt").value, {
    routing: { routes: readIpRoute(NODE_TEST_ROUTES, "ip-route.txt").value },
  });
  const packet = {
    src: parseIp("10.244.0.5"),
    dst: parseIp("10.96.0.10"),
    proto: "udp",
    sport: 40000,
    dport: 53,
    origin: "pod" as const,
    inIface: "pod0",
  };

  it("keeps the DNAT its first packet got, though the rule tests --ctstate NEW", () => {
    const r = path.evaluate({ ...packet, ctstate: "ESTABLISHED" });
    assert.ok(r.outcomes.length > 0);
    for (const o of r.outcomes) {
      assert.equal(formatIp(o.dstOut), "192.168.10.7");
      assert.equal(o.dportOut, 53);
      // and filter sees the later packet's state: FORWARD accepts it
      assert.equal(o.verdict.kind, "forwarded");
    }
  });

  it("the first packet is DNATed too, and FORWARD's policy drops it", () => {
    const r = path.evaluate(packet);
    assert.equal(formatIp(r.outcomes[0]!.dstOut), "192.168.10.7");
    assert.equal(r.outcomes[0]!.verdict.kind, "dropped");
  });
});

describe("a later packet whose mark is restored from its connection", () => {
  const dump = `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -m mark --mark 0x10/0x10 -j MASQUERADE
COMMIT
`;
  const path = compilePath(parseIptablesSave(dump, "iptables-save.txt").value, {
    routing: { routes: readIpRoute(NODE_TEST_ROUTES, "ip-route.txt").value },
  });

  it("is masqueraded only on the branch where the restored mark matches", () => {
    const r = path.evaluate({
      src: parseIp("10.244.0.6"),
      dst: parseIp("172.16.5.5"),
      proto: "udp",
      sport: 40000,
      dport: 53,
      origin: "pod",
      inIface: "pod0",
      ctstate: "ESTABLISHED",
    });
    const seen = r.outcomes.map((o) => {
      const a = o.assumptions.find((x) => /mark/.test(x.fact));
      const masq = o.steps.some((x) => x.kind === "snat" && x.decision === "masquerade");
      return `${a?.holds} ${masq ? "masquerade" : "keep"}`;
    });
    // the connection's mark is not known: both, each with its own answer (found by the kernel
    // differential: the branch without the mark was masqueraded too)
    assert.ok(seen.includes("true masquerade"), seen.join(", "));
    assert.ok(seen.includes("false keep"), seen.join(", "));
    assert.ok(!seen.includes("false masquerade"), seen.join(", "));
  });
});
