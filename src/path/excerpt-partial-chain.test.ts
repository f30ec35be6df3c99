/**
 * @module path/excerpt-partial-chain.test — filter chains the file may not show whole. A dump cut
 * short (no COMMIT) shows the first rules of its chains; a grep of it may leave out a whole
 * built-in chain. The walk takes neither for "no rules, the policy decides": it follows the chain
 * as shown and, on a fork, the rules not shown deciding (undecided, with the command that shows
 * them), as the nat evaluator does. Input: the lab's Service scenario on a real kernel
 * (`src/cases/masquerade/fixtures/service-probes`, made by `podpath lab run service`), its nat
 * table first and its filter table cut after INPUT's rules, as a legacy iptables-save (which
 * prints nat before filter) pasted short reads; and `grep -- '-A INPUT'` of it.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { PathOutcome, PathResult } from "./path-types.ts";
import { podPacketAnswer, snapshotWith } from "./test-helpers/node-snapshot.ts";

const FIXTURE = join(import.meta.dirname, "../cases/masquerade/fixtures/service-probes");
const DUMP = "nodes/worker-1/iptables-save.txt";
const WHOLE = readFileSync(join(FIXTURE, DUMP), "utf8").split("\n");
const tableLines = (name: string) => {
  const start = WHOLE.indexOf(`*${name}`);
  const end = WHOLE.indexOf("COMMIT", start);
  return WHOLE.slice(start - 1, end + 2); // its "# Generated" line to its "# Completed" line
};
const FILTER = tableLines("filter");
const NAT = tableLines("nat");
/** nat whole, then filter up to INPUT's last rule (its REJECT): the paste ends there. */
const CUT = [
  ...NAT,
  ...FILTER.slice(
    0,
    FILTER.findIndex((l) => l.startsWith("-A FORWARD")),
  ),
];

/** The node's answer for a packet of pod 10.244.1.7 with the given dump. */
function answer(dump: string, dst: string, dport: number): PathResult {
  const snap = snapshotWith({ [DUMP]: dump }, FIXTURE);
  return podPacketAnswer(snap, "worker-1", {
    src: "10.244.1.7",
    dst,
    dport,
    inIface: "veth-client",
  });
}

const assumed = (o: PathOutcome, chain: string, holds: boolean) =>
  o.steps.some(
    (s) =>
      s.kind === "assume" &&
      s.holds === holds &&
      s.fact === `${DUMP} shows every rule of filter ${chain} (it is cut short)`,
  );

describe("filter chains a cut dump may not show whole", () => {
  it("the whole dump: pod → web's ClusterIP is forwarded to its endpoint, nothing assumed", () => {
    const r = answer(WHOLE.join("\n"), "10.96.0.50", 80);
    assert.equal(r.outcomes.length, 1);
    const o = r.outcomes[0]!;
    assert.equal(o.verdict.kind, "forwarded");
    assert.ok(!o.steps.some((s) => s.kind === "assume"));
  });

  it("cut before FORWARD's rules: forwarded only if FORWARD has none, else undecided, with the command", () => {
    const r = answer(CUT.join("\n"), "10.96.0.50", 80);
    const fwd = r.outcomes.filter((o) => o.verdict.kind === "forwarded");
    const open = r.outcomes.filter((o) => o.verdict.kind === "undecided");
    assert.equal(fwd.length, 1, "one way: FORWARD has no rules beyond the cut, its policy ACCEPT");
    assert.ok(assumed(fwd[0]!, "FORWARD", true));
    assert.equal(open.length, 1, "the other way: the rules cut off decide");
    const o = open[0]!;
    assert.ok(assumed(o, "FORWARD", false));
    assert.ok(o.verdict.kind === "undecided");
    assert.match(o.verdict.reason, /filter FORWARD/);
    assert.equal(o.verdict.at?.text, ":FORWARD ACCEPT [0:0]");
    assert.deepEqual(
      o.verdict.unknowns.map((u) => [u.decide.file, u.decide.command]),
      [[DUMP, "iptables-save -t filter   # on the node: the whole table, not an excerpt"]],
    );
  });

  it("cut: the INPUT REJECT the paste shows still rejects, on the way where the chains cut off let it pass", () => {
    // kubernetes' ClusterIP is DNATed to the node itself: INPUT jumps to four chains whose rules
    // come after the cut, then REJECTs
    const r = answer(CUT.join("\n"), "10.96.0.1", 443);
    const rejected = r.outcomes.filter((o) => o.verdict.kind === "rejected");
    assert.equal(rejected.length, 1);
    for (const c of ["KUBE-FIREWALL", "KUBE-PROXY-FIREWALL", "KUBE-NODEPORTS"])
      assert.ok(assumed(rejected[0]!, c, true), c);
    assert.ok(rejected[0]!.verdict.kind === "rejected");
    assert.equal(rejected[0]!.verdict.by.line, NAT.length + 21); // INPUT's REJECT, after the nat table
    assert.ok(r.outcomes.filter((o) => o.verdict.kind === "undecided").length >= 3);
    assert.ok(!r.outcomes.some((o) => o.verdict.kind === "delivered"));
  });

  it("a grep that shows INPUT's rules and not FORWARD's: forwarded only if FORWARD has none", () => {
    // iptables-save -t nat; iptables-save -t filter | grep -E '^[*]|^-A INPUT'
    const grep = FILTER.filter((l) => l === "*filter" || l.startsWith("-A INPUT"));
    const r = answer(`${[...NAT, ...grep].join("\n")}\n`, "10.96.0.50", 80);
    const open = r.outcomes.filter(
      (o) => o.verdict.kind === "undecided" && /filter FORWARD/.test(o.verdict.reason),
    );
    assert.ok(open.length > 0);
    for (const o of open) {
      assert.ok(o.verdict.kind === "undecided");
      assert.equal(
        o.verdict.unknowns[0]?.decide.command,
        "iptables-save -t filter   # on the node: the whole table, not an excerpt",
      );
    }
    // forwarded only on the way that takes the grep for all of FORWARD
    for (const o of r.outcomes.filter((x) => x.verdict.kind === "forwarded")) {
      assert.ok(
        o.steps.some((s) => s.kind === "assume" && s.holds && /filter FORWARD/.test(s.fact)),
      );
    }
  });
});
