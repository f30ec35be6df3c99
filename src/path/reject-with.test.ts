/**
 * @module path/reject-with.test — REJECT's answer in each family, as ip6tables-save prints it:
 * the ICMPv6 codes ip6t_REJECT sends (policy-fail and reject-route too), IPv6's short names.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ModuleOption } from "../iptables/dump.ts";
import { rejectWithNft } from "./nft-path.ts";
import { REJECT_SEEN_AS, rejectWithOf } from "./reject-with.ts";

const opt = (v: string): ModuleOption[] => [{ name: "--reject-with", negated: false, values: [v] }];

describe("rejectWithOf", () => {
  it("reads every type ip6tables-save prints", () => {
    for (const w of [
      "icmp6-no-route",
      "icmp6-adm-prohibited",
      "icmp6-addr-unreachable",
      "icmp6-port-unreachable",
      "icmp6-policy-fail",
      "icmp6-reject-route",
      "tcp-reset",
    ]) {
      assert.equal(rejectWithOf(opt(w), 6, "udp"), w);
      assert.ok(REJECT_SEEN_AS[rejectWithOf(opt(w), 6, "udp")]);
    }
  });

  it("reads a short name in the rule's family", () => {
    assert.equal(rejectWithOf(opt("port-unreach"), 6, "udp"), "icmp6-port-unreachable");
    assert.equal(rejectWithOf(opt("port-unreach"), 4, "udp"), "icmp-port-unreachable");
    assert.equal(rejectWithOf(opt("policy-fail"), 6, "udp"), "icmp6-policy-fail");
  });

  it("defaults to port unreachable of the family", () => {
    assert.equal(rejectWithOf([], 6, "tcp"), "icmp6-port-unreachable");
    assert.equal(rejectWithOf([], 4, "tcp"), "icmp-port-unreachable");
  });
});

describe("rejectWithNft", () => {
  it("reads icmpv6 and icmpx types per family", () => {
    assert.equal(rejectWithNft("icmpv6 type policy-fail", 6), "icmp6-policy-fail");
    assert.equal(rejectWithNft("icmpv6 type reject-route", 6), "icmp6-reject-route");
    assert.equal(rejectWithNft("icmpx type no-route", 4), "icmp-net-unreachable");
    assert.equal(rejectWithNft("icmpx type no-route", 6), "icmp6-no-route");
  });
});
