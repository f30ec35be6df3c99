/**
 * @module path/post-nat-interface.test — nat POSTROUTING sees the interface the route to the
 * DNAT's endpoint gives, not the one toward the Service address the packet came in for: the first
 * nat evaluation (told the latter) is reused only when no rule tested `-o` and nothing
 * masqueraded (iptables/oif-reads).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readIpRoute } from "../evidence/ip-route.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import { formatIp, parseIp } from "../net/cidr.ts";
import { compilePath } from "./evaluate-path.ts";
import type { PathOutcome } from "./path-types.ts";
import { NODE_TEST_ROUTES } from "./test-helpers/node-routes.ts";

/** A Service address routed by eth0 (the default route), DNATed to a pod on pod0. */
function dumpWith(postrouting: string): string {
  return `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.244.0.9:8080
${postrouting}
COMMIT
`;
}

function outcomesOf(postrouting: string): readonly PathOutcome[] {
  const path = compilePath(parseIptablesSave(dumpWith(postrouting), "iptables-save.txt").value, {
    routing: { routes: readIpRoute(NODE_TEST_ROUTES, "ip-route.txt").value },
    localAddresses: [parseIp("10.244.0.1"), parseIp("192.168.10.2")],
    interfaces: [
      { name: "eth0", primary: parseIp("192.168.10.2") },
      { name: "pod0", primary: parseIp("10.244.0.1") },
    ],
    reuseAnswers: false,
  });
  return path.evaluate({
    src: parseIp("192.168.10.50"),
    dst: parseIp("10.96.0.10"),
    proto: "tcp",
    sport: 40000,
    dport: 80,
    origin: "forwarded",
    inIface: "eth0",
  }).outcomes;
}

/** The source the packet leaves with, and the device, of the only outcome. */
function leaving(outcomes: readonly PathOutcome[]): { src: string; dev: string | undefined } {
  assert.equal(outcomes.length, 1);
  const v = outcomes[0]!.verdict;
  assert.equal(v.kind, "forwarded");
  return { src: v.src ? formatIp(v.src) : "(unknown)", dev: v.dev };
}

describe("nat POSTROUTING after a DNAT to another interface", () => {
  it("an -o rule is read with the endpoint's interface", () => {
    const out = leaving(outcomesOf("-A POSTROUTING -o pod0 -j SNAT --to-source 10.244.0.1"));
    assert.deepEqual(out, { src: "10.244.0.1", dev: "pod0" });
    // and one for the Service's own route does not match the packet that leaves by pod0
    const other = leaving(outcomesOf("-A POSTROUTING -o eth0 -j SNAT --to-source 192.168.10.2"));
    assert.deepEqual(other, { src: "192.168.10.50", dev: "pod0" });
  });

  it("MASQUERADE takes the endpoint's interface's address", () => {
    const out = leaving(outcomesOf("-A POSTROUTING -j MASQUERADE"));
    assert.deepEqual(out, { src: "10.244.0.1", dev: "pod0" });
  });

  it("a rule on the destination alone decides the same, whichever interface was asked first", () => {
    const out = leaving(
      outcomesOf("-A POSTROUTING -d 10.244.0.0/24 -j SNAT --to-source 10.244.0.1"),
    );
    assert.deepEqual(out, { src: "10.244.0.1", dev: "pod0" });
    const kept = leaving(outcomesOf("-A POSTROUTING -d 10.0.0.0/8 -j RETURN"));
    assert.deepEqual(kept, { src: "192.168.10.50", dev: "pod0" });
  });
});
