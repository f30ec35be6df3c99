import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { goParseCidr } from "./go-net.ts";
import { goQuote } from "./go-quote.ts";

describe("goParseCidr (net.ParseCIDR)", () => {
  it("parses IPv4 and IPv6 blocks and prints ip and network as Go does", () => {
    const r = goParseCidr("10.0.0.1/8");
    assert.ok("ok" in r);
    assert.equal(r.ok.ipText, "10.0.0.1");
    assert.equal(r.ok.networkText, "10.0.0.0/8");
    assert.equal(r.ok.aligned, false);
    const v6 = goParseCidr("2001:DB8::1/32");
    assert.ok("ok" in v6);
    assert.equal(v6.ok.ipText, "2001:db8::1");
    assert.equal(v6.ok.networkText, "2001:db8::/32");
    assert.equal(v6.ok.agentFamily, 6);
  });

  it("accepts a prefix with leading zeros, as dtoi does", () => {
    const r = goParseCidr("10.0.0.0/08");
    assert.ok("ok" in r);
    assert.equal(r.ok.cidr.prefix, 8);
  });

  it("files an IPv4-mapped IPv6 block under IPv4, as isIPv6CIDR does", () => {
    const r = goParseCidr("::ffff:10.0.0.0/104");
    assert.ok("ok" in r);
    assert.equal(r.ok.agentFamily, 4);
    assert.equal(r.ok.networkText, "10.0.0.0/104");
  });

  it("refuses what Go refuses, with its text", () => {
    for (const bad of [
      "10.1.2.3",
      "10.0.0.0/33",
      "10.0.0.0/+8",
      "10.0.0.0/",
      "010.0.0.0/8",
      "fe80::1%eth0/64",
      "10.0.0.0/8 ",
      "",
    ]) {
      assert.deepEqual(goParseCidr(bad), { error: `invalid CIDR address: ${bad}` }, bad);
    }
  });
});

describe("goQuote (strconv.Quote)", () => {
  it("escapes as Go does", () => {
    assert.equal(goQuote('a"b\\c'), '"a\\"b\\\\c"');
    assert.equal(goQuote("\n\t\x01\x7f"), '"\\n\\t\\x01\\x7f"');
    assert.equal(goQuote("é µ"), '"é µ"');
    assert.equal(goQuote("\u00a0\u00ad\u200b"), '"\\u00a0\\u00ad\\u200b"');
    assert.equal(goQuote("😀"), '"😀"');
  });
});
