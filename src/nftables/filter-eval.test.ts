/**
 * @module nftables/filter-eval.test — filter verdicts from listings the real nft printed: the
 * sample's forward chain (ct state, a named set with reject type, interfaces, port sets, fib, the
 * drop policy) and the real kube-proxy's reject of a Service without endpoints.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import type { Flow } from "../iptables/nat-trace.ts";
import { parseIp } from "../net/cidr.ts";
import { compileNftFilter } from "./filter-eval.ts";
import { readNftRuleset } from "./read-ruleset.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const NODE = parseIp("10.128.0.2");
const flow = (
  src: string,
  dst: string,
  proto: string,
  dport: number,
  extra: Partial<Flow> = {},
): Flow => ({
  src: parseIp(src),
  dst: parseIp(dst),
  proto,
  sport: 40000,
  dport,
  origin: "pod",
  inIface: "cbr0",
  outIface: "eth0",
  ...extra,
});

describe("compileNftFilter on the sample's forward chain", () => {
  const text = fixture("sample-a.nft");
  const lines = text.split("\n");
  const filter = compileNftFilter(readNftRuleset(text, "nft.txt").value, {
    localAddresses: [NODE],
  });
  const at = (line: number | undefined) => lines[(line ?? 0) - 1] ?? "";

  it("accepts an established connection at the ct state rule", () => {
    const v = filter.verdict(
      flow("10.9.1.1", "10.20.30.40", "tcp", 22, { ctstate: "ESTABLISHED" }),
      "forward",
    );
    assert.equal(v.decision, "accept");
    assert.match(at(v.decidingRule?.line), /ct state established,related accept/);
  });

  it("rejects a source in the named interval set with its ICMP type", () => {
    const v = filter.verdict(flow("10.9.1.1", "10.20.30.40", "tcp", 443), "forward");
    assert.equal(v.decision, "reject");
    assert.equal(v.rejectWith, "icmp host-prohibited");
    assert.match(at(v.decidingRule?.line), /ip saddr @blocked/);
  });

  it("accepts from cbr0 unless it leaves by eth1; then port sets reject and the policy drops", () => {
    assert.equal(
      filter.verdict(flow("10.4.0.9", "10.20.30.40", "tcp", 22), "forward").decision,
      "accept",
    );
    const out = { inIface: "eth0", outIface: "eth1" };
    const ssh = filter.verdict(flow("10.4.0.9", "10.20.30.40", "tcp", 85, out), "forward");
    assert.equal(ssh.decision, "reject");
    assert.equal(ssh.rejectWith, "tcp reset");
    const other = filter.verdict(flow("10.4.0.9", "10.20.30.40", "udp", 53, out), "forward");
    assert.equal(other.decision, "drop");
    assert.match(at(other.decidingRule?.line), /chain forward/);
  });

  it("follows both outcomes of an arriving interface it is not told", () => {
    const { inIface: _i, ...f } = flow("10.4.0.9", "10.20.30.40", "udp", 53);
    const v = filter.verdict(f, "forward");
    assert.equal(v.decision, "branches");
    assert.deepEqual(v.branches?.map((b) => b.trace.decision).sort(), ["accept", "drop"]);
  });
});

describe("compileNftFilter on the real kube-proxy's table", () => {
  it("rejects a connection to a Service without endpoints (no-endpoint-services → reject-chain)", () => {
    const text = fixture("kube-proxy-ruleset-a.nft");
    const filter = compileNftFilter(readNftRuleset(text, "nft.txt").value, {
      localAddresses: [NODE],
    });
    const v = filter.verdict(flow("10.4.0.9", "10.96.0.1", "tcp", 443), "forward");
    assert.equal(v.decision, "reject");
    assert.ok(v.steps.some((s) => s.chain === "service-endpoints-check"));
    assert.match(text.split("\n")[(v.decidingRule?.line ?? 0) - 1] ?? "", /^\s*reject/);
  });
});
