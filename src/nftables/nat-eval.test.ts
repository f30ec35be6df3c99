/**
 * @module nftables/nat-eval.test — the nat question answered from rulesets the real nft printed:
 * the real kube-proxy's nftables table (Service DNAT through its verdict map and numgen endpoint
 * map, the 0x4000 masquerade mark), iptables-nft's tables (agreeing with the iptables evaluator
 * on the same rules as iptables-nft-save prints them), forks and undecided rules with their lines.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { compileNat } from "../iptables/nat-eval.ts";
import type { Flow, NatContext, NatTrace } from "../iptables/nat-trace.ts";
import { parseIptablesSave } from "../iptables/save-parser.ts";
import { formatIp, parseIp } from "../net/cidr.ts";
import { compileNftNat } from "./nat-eval.ts";
import { readNftRuleset } from "./read-ruleset.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const NODE = "10.128.0.2";
const ctx: NatContext = {
  nodeInternalIp: parseIp(NODE),
  localAddresses: [parseIp(NODE)],
  interfaces: [
    { name: "eth0", primary: parseIp(NODE), addresses: [{ ip: parseIp(NODE), prefix: 24 }] },
  ],
};
const flow = (
  src: string,
  dst: string,
  proto: string,
  dport: number,
  origin: Flow["origin"] = "pod",
): Flow => ({
  src: parseIp(src),
  dst: parseIp(dst),
  proto,
  sport: 41000,
  dport,
  origin,
  ...(origin === "host" ? { outIface: "eth0" } : { inIface: "cbr0", outIface: "eth0" }),
});
const leaves = (t: NatTrace): NatTrace[] => (t.branches ? t.branches.map((b) => b.trace) : [t]);

describe("compileNftNat on the real kube-proxy's nftables table", () => {
  const file = "nodes/n1/nft-ruleset.txt";
  const rs = readNftRuleset(fixture("kube-proxy-ruleset-a.nft"), file).value;
  const nat = compileNftNat(rs, ctx);
  const text = fixture("kube-proxy-ruleset-a.nft").split("\n");
  const clusterIP = /(\d+\.\d+\.\d+\.\d+) \. tcp \. 80 : goto service-/.exec(text.join("\n"))![1]!;

  it("follows a pod's connection to the ClusterIP to each endpoint, citing the DNAT line", () => {
    const t = nat.evaluate(flow("10.4.0.9", clusterIP, "tcp", 80));
    assert.equal(t.decision, "branches");
    const ends = t.branches!.map((b) => ({
      p: b.probability,
      dst: `${formatIp(b.trace.dstOut!.ip)}:${b.trace.dstOut!.port}`,
      decision: b.trace.decision,
    }));
    assert.deepEqual(ends, [
      { p: 0.5, dst: "10.4.1.5:8080", decision: "keep" },
      { p: 0.5, dst: "10.4.2.7:8080", decision: "keep" },
    ]);
    const dnat = t.branches![0]!.trace.steps.find((s) => s.kind === "dnat")!;
    assert.equal(dnat.source.file, file);
    assert.match(text[dnat.source.line - 1]!, /dnat ip to numgen random mod 2 map/);
    // the verdict map's line is cited on the way
    const svc = t.steps.find((s) => s.kind === "goto")!;
    assert.match(text[svc.source.line - 1]!, /vmap @service-ips/);
  });

  it("masquerades a ClusterIP connection from outside the cluster range (mark 0x4000) and the node's own", () => {
    for (const f of [
      flow("10.9.0.9", clusterIP, "tcp", 80),
      flow(NODE, clusterIP, "tcp", 80, "host"),
    ]) {
      const t = nat.evaluate(f);
      for (const leaf of leaves(t)) {
        assert.equal(leaf.decision, "masquerade");
        assert.equal(formatIp(leaf.sourceOut!.ip!), NODE);
        assert.match(text[leaf.decidingRule!.line - 1]!, /meta mark & 0x00004000 != 0x00000000/);
      }
    }
  });

  it("keeps the pod's address toward a destination outside every Service", () => {
    const t = nat.evaluate(flow("10.4.0.9", "10.20.30.40", "tcp", 5432));
    assert.equal(t.decision, "keep");
    assert.equal(t.delivery, "forward");
    assert.equal(formatIp(t.dstOut!.ip), "10.20.30.40");
  });
});

describe("compileNftNat on iptables-nft's tables", () => {
  const rs = readNftRuleset(fixture("iptables-nft.nft"), "nft.txt").value;
  const nft = compileNftNat(rs, ctx);
  const ipt = compileNat(
    parseIptablesSave(fixture("iptables-nft.save.txt"), "save.txt").value,
    ctx,
  );

  /** What a trace decides, branch by branch, without where it is cited. */
  const answer = (t: NatTrace): string[] =>
    leaves(t)
      .map(
        (l) =>
          `${l.decision} ${l.sourceOut?.ip ? formatIp(l.sourceOut.ip) : "-"} ${formatIp(l.dstOut!.ip)}:${l.dstOut!.port} p=${t.branches ? t.branches[leaves(t).indexOf(l)]!.probability : 1}`,
      )
      .sort();

  for (const [src, dst, proto, port, origin] of [
    ["10.4.0.9", "10.96.0.10", "udp", 53, "pod"],
    ["10.4.0.9", "10.20.30.40", "tcp", 5432, "pod"],
    ["10.4.0.9", "10.1.2.3", "tcp", 443, "pod"],
    ["10.4.0.9", NODE, "tcp", 10250, "pod"],
    [NODE, "192.0.2.1", "tcp", 443, "host"],
  ] as const) {
    it(`agrees with the iptables evaluator on ${origin} ${src} -> ${dst}:${port}`, () => {
      const f = flow(src, dst, proto, port, origin);
      assert.deepEqual(
        answer(nft.evaluate({ ...f, mark: 0 })),
        answer(ipt.evaluate({ ...f, mark: 0 })),
      );
    });
  }

  it("follows both outcomes of an interface it is not told", () => {
    const { outIface: _o, ...f } = flow("10.4.0.9", "192.0.2.1", "tcp", 443);
    const t = nft.evaluate({ ...f, mark: 0 });
    assert.equal(t.decision, "branches");
    const facts = t.branches!.map((b) => b.trace.assumptions?.map((a) => a.holds).join(","));
    assert.ok(facts.includes("true") && facts.includes("false"), JSON.stringify(facts));
  });
});

describe("compileNftNat on what it cannot read", () => {
  it("is undecided at the rule it does not read, citing its line", () => {
    const text = [
      "table ip t {",
      "\tchain post {",
      "\t\ttype nat hook postrouting priority srcnat; policy accept;",
      "\t\tip daddr 10.20.0.0/16 return",
      '\t\tosf name "Linux" masquerade',
      "\t}",
      "}",
    ].join("\n");
    const r = readNftRuleset(text, "n.txt");
    const nat = compileNftNat(r.value, ctx);
    assert.equal(nat.evaluate(flow("10.4.0.9", "10.20.1.1", "tcp", 80)).decision, "keep");
    const t = nat.evaluate(flow("10.4.0.9", "192.0.2.1", "tcp", 80));
    assert.equal(t.decision, "cannot-decide");
    assert.equal(t.undecided?.rule.line, 5);
    assert.equal(r.diagnostics[0]?.source?.line, 5);
  });
});

describe("compileNftNat after a goto from the nat base chain", () => {
  it("translates in the chain the base chain went to (it is still the nat hook's walk)", () => {
    const text = [
      "table ip t {",
      "\tchain pre {",
      "\t\ttype nat hook prerouting priority dstnat; policy accept;",
      "\t\tip daddr 10.96.0.1 tcp dport 443 goto endpoint",
      "\t}",
      "",
      "\tchain endpoint {",
      "\t\tmeta l4proto tcp dnat to 10.128.0.2:6443",
      "\t}",
      "}",
    ].join("\n");
    const nat = compileNftNat(readNftRuleset(text, "n.txt").value, ctx);
    const t = nat.evaluate(flow("10.4.0.9", "10.96.0.1", "tcp", 443));
    assert.notEqual(t.decision, "cannot-decide", JSON.stringify(t.undecided));
    assert.equal(formatIp(t.dstOut!.ip), "10.128.0.2");
    assert.equal(t.dstOut!.port, 6443);
  });
});
