/**
 * @module evidence/ip-rule-lookup.test — the policy routing walk on `ip rule` text: an `oif`
 * selector, which the kernel compares with the lookup's output interface, never matches a packet
 * that came in (forwarded or delivered: no output interface), matches the host's own packet only
 * when its output interface is given, and is left undecided for the host's own packet otherwise.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseIp } from "../net/cidr.ts";
import { readIpRoute } from "./ip-route.ts";
import { readIpRule } from "./ip-rule.ts";
import { routeByPolicy } from "./ip-rule-lookup.ts";

const RULES = (sel: string) =>
  readIpRule(
    [
      "0:\tfrom all lookup local",
      `50:\tfrom all ${sel} lookup 300`,
      "32766:\tfrom all lookup main",
      "32767:\tfrom all lookup default",
    ].join("\n"),
    "ip-rule.txt",
  ).value;
const ROUTES = readIpRoute(
  [
    "default via 10.128.0.1 dev v0 ",
    "10.128.0.0/20 dev v0 proto kernel scope link src 10.128.0.2 ",
    "10.129.0.0/20 dev v1 proto kernel scope link src 10.129.0.2 ",
    "default via 10.129.0.1 dev v1 table 300 ",
  ].join("\n"),
  "ip-route.txt",
).value;
const dst = parseIp("192.0.2.7");

const answer = (d: ReturnType<typeof routeByPolicy>) =>
  d.kind === "route" ? `${d.route.dev} by ${d.rule.priority}` : d.kind;

describe("ip rule oif", () => {
  it("never matches a forwarded packet: its lookup has no output interface", () => {
    const fwd = { dst, src: parseIp("10.9.0.2"), iif: "c0" };
    assert.equal(answer(routeByPolicy(RULES("oif v1"), ROUTES, fwd)), "v0 by 32766");
    // inverted, it matches every forwarded packet
    assert.equal(answer(routeByPolicy(RULES("not oif v1"), ROUTES, fwd)), "v1 by 50");
  });

  it("matches the host's own packet bound to the device, and is undecided when that is unknown", () => {
    assert.equal(
      answer(routeByPolicy(RULES("oif v1"), ROUTES, { dst, iif: "lo", oif: "v1" })),
      "v1 by 50",
    );
    assert.equal(
      answer(routeByPolicy(RULES("oif v1"), ROUTES, { dst, iif: "lo", oif: "" })),
      "v0 by 32766",
    );
    const d = routeByPolicy(RULES("oif v1"), ROUTES, { dst, iif: "lo" });
    assert.equal(d.kind, "undecided");
    assert.match(d.kind === "undecided" ? d.fact : "", /outgoing interface \(rule 50\)/);
  });
});
