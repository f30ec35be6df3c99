/**
 * @module iptables/excerpt-tables.test — the table of each line of a headless excerpt: certain from
 * its chain and target together, else from the block of the dump it sits in, else left out.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { lineTables, placeExcerptLines } from "./excerpt-tables.ts";

const place = (text: string) => {
  const lines = text.split("\n");
  return placeExcerptLines(
    lines,
    lines.flatMap((l, i) => (/^(-A |:)/.test(l) ? [i] : [])),
  );
};

describe("lineTables", () => {
  it("meets the chain's tables with the target's", () => {
    assert.deepEqual(lineTables("-A KUBE-SERVICES -d 10.96.0.10/32 -j KUBE-SVC-ABC"), ["nat"]);
    assert.deepEqual(lineTables("-A KUBE-SERVICES -d 10.96.0.50/32 -j REJECT"), ["filter"]);
    assert.deepEqual(lineTables("-A PREROUTING -j KUBE-SERVICES"), ["nat"]);
    assert.deepEqual(lineTables("-A FORWARD -j KUBE-SERVICES"), ["filter"]);
    assert.deepEqual(lineTables("-A OUTPUT -j KUBE-SERVICES"), ["nat", "filter"]);
    assert.deepEqual(lineTables("-A KUBE-SEP-X -p tcp -j DNAT --to-destination 10.244.1.5:80"), [
      "nat",
    ]);
    assert.deepEqual(lineTables(":KUBE-FORWARD - [0:0]"), ["filter"]);
    assert.equal(lineTables("-A CILIUM_FORWARD -j ACCEPT").length, 5);
  });
});

describe("placeExcerptLines", () => {
  const GREP = [
    ":KUBE-FORWARD - [0:0]",
    ":KUBE-SERVICES - [0:0]",
    "-A OUTPUT -m conntrack --ctstate NEW -j KUBE-SERVICES",
    "-A KUBE-SERVICES -d 10.96.0.50/32 -p tcp -j REJECT --reject-with icmp-port-unreachable",
    ":KUBE-SERVICES - [0:0]",
    ":KUBE-SVC-ABC - [0:0]",
    "-A OUTPUT -j KUBE-SERVICES",
    "-A KUBE-SERVICES -d 10.96.0.10/32 -j KUBE-SVC-ABC",
  ].join("\n");

  it("places an ambiguous line by the table block it sits in, in a dump's order", () => {
    const p = place(GREP)!;
    assert.deepEqual(p.tables.get("filter"), [0, 1, 2, 3]);
    assert.deepEqual(p.tables.get("nat"), [4, 5, 6, 7]);
    assert.deepEqual(p.unplaced, []);
    assert.equal(p.byBlock, 4);
  });

  it("leaves out what chain and target do not decide once the order is lost", () => {
    const sorted = GREP.split("\n").sort().join("\n");
    const p = place(sorted)!;
    const lines = sorted.split("\n");
    const left = p.unplaced.map((u) => lines[u.line]);
    assert.ok(left.includes("-A OUTPUT -j KUBE-SERVICES"));
    assert.ok(left.includes("-A OUTPUT -m conntrack --ctstate NEW -j KUBE-SERVICES"));
    assert.ok(!left.some((l) => /REJECT|KUBE-SVC-ABC$/.test(l ?? "")));
  });

  it("says nothing when the lines do not mix tables", () => {
    assert.equal(
      place("-A KUBE-SEP-X -j DNAT --to-destination 10.0.0.1\n-A OUTPUT -j X"),
      undefined,
    );
  });
});
