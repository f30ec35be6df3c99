/**
 * @module path/node-path-ipv4-rules.test — an IPv4 routing decision without the node's `ip rule`.
 * When the routes show a table beyond local, main and default (AWS VPC CNI's per-ENI tables, as
 * `ip route show table all` prints them), only a rule sends packets there: the kernel's default
 * rules are taken, and every outcome says so with the command that decides it, and diagnose names
 * `ip-rule.txt` under the evidence that would decide more. With `ip rule` given, or with routes of
 * the main table only, nothing is assumed. Route and rule texts: `ip -4 route show table all` and
 * `ip rule` in a throwaway network namespace (`unshare -n`, veth links, `ip route add … table 2`,
 * `ip rule add from 100.64.1.50 lookup 2 pref 1536`), on the EKS example's node.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { Missing } from "../model/types.ts";
import { diagnose } from "../questions/diagnose.ts";
import type { Snapshot } from "../snapshot/load.ts";
import type { PathResult } from "./path-types.ts";
import { podPacketAnswer, snapshotWith } from "./test-helpers/node-snapshot.ts";

const EXAMPLE = join(import.meta.dirname, "../../examples/eks-exclude-snat-cidrs");
const NODE = "ip-192-168-1-10.eu-west-1.compute.internal";
const ROUTES_ALL = `default via 192.168.1.1 dev eth1 table 2 
192.168.1.1 dev eth1 table 2 scope link 
default via 192.168.1.1 dev eth0 
100.64.1.50 dev enia scope link 
192.168.1.0/24 dev eth0 proto kernel scope link src 192.168.1.10 
local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1 
local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1 
broadcast 127.255.255.255 dev lo table local proto kernel scope link src 127.0.0.1 
local 192.168.1.10 dev eth0 table local proto kernel scope host src 192.168.1.10 
local 192.168.1.20 dev eth1 table local proto kernel scope host src 192.168.1.20 
broadcast 192.168.1.255 dev eth0 table local proto kernel scope link src 192.168.1.10 
broadcast 192.168.1.255 dev eth1 table local proto kernel scope link src 192.168.1.20 
`;
const RULES = `0:\tfrom all lookup local
1536:\tfrom 100.64.1.50 lookup 2
32766:\tfrom all lookup main
32767:\tfrom all lookup default
`;
const FACT = /^the node's IPv4 policy rules are the kernel's defaults/;

/** The example with its node's routes (and rules) replaced. */
function snapshot(routes: string | undefined, rules: string | undefined): Snapshot {
  return snapshotWith(
    {
      ...(routes !== undefined ? { [`nodes/${NODE}/ip-route.txt`]: routes } : {}),
      ...(rules !== undefined ? { [`nodes/${NODE}/ip-rule.txt`]: rules } : {}),
    },
    EXAMPLE,
  );
}

const answer = (snap: Snapshot): PathResult =>
  podPacketAnswer(snap, NODE, {
    src: "100.64.1.50",
    dst: "10.20.30.40",
    dport: 5432,
    inIface: "enia",
  });

/** The entries asking for ip-rule.txt because the default rules were taken. */
const ruleMissing = (missing: readonly Missing[]) =>
  missing.filter(
    (m) => m.file === `nodes/${NODE}/ip-rule.txt` && /^which table routes/.test(m.would_decide),
  );

describe("an IPv4 route decision without ip rule", () => {
  it("routes showing table 2: the default rules are taken, said on every outcome, and ip-rule.txt is asked for", async () => {
    const snap = snapshot(ROUTES_ALL, undefined);
    const r = answer(snap);
    assert.ok(r.outcomes.length > 0);
    for (const o of r.outcomes) {
      const a = o.assumptions.find((x) => FACT.test(x.fact));
      assert.ok(a, JSON.stringify(o.assumptions.map((x) => x.fact)));
      assert.equal(a.holds, true);
      assert.equal(a.decide.command, "ip rule   # on the node");
      assert.match(a.reason, /show table 2/);
    }
    const d = await diagnose(snap, {});
    const m = ruleMissing(d.missing);
    assert.equal(m.length, 1, JSON.stringify(d.missing));
    assert.equal(m[0]!.command, `ip rule   # on ${NODE}`);
    assert.match(m[0]!.would_decide, /traced on ip-192-168-1-10\S*: its routes show table 2/);
  });

  it("with ip rule: the pod's packet takes table 2 (eth1), nothing assumed", async () => {
    const snap = snapshot(ROUTES_ALL, RULES);
    const r = answer(snap);
    for (const o of r.outcomes) {
      assert.ok(!o.assumptions.some((x) => FACT.test(x.fact)));
      const route = o.steps.find((s) => s.kind === "route");
      assert.ok(route?.kind === "route");
      assert.equal(route.table, "2");
      assert.equal(route.dev, "eth1");
    }
    assert.deepEqual(ruleMissing((await diagnose(snap, {})).missing), []);
  });

  it("routes of the main table only (plain ip route): nothing assumed, nothing asked", async () => {
    const snap = snapshot(undefined, undefined);
    for (const o of answer(snap).outcomes) assert.ok(!o.assumptions.some((x) => FACT.test(x.fact)));
    assert.deepEqual(ruleMissing((await diagnose(snap, {})).missing), []);
  });
});
