import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { containsCidr } from "cidr-tools";
import fc from "fast-check";
import { formatIp, parseIp } from "../../net/cidr.ts";
import { decodeMasqConfig, defaultMasqConfig, fileLocator, type MasqConfig } from "./config.ts";
import { isExempt } from "./exempt.ts";

function config(text: string): MasqConfig {
  const r = decodeMasqConfig(text, { locate: fileLocator("cfg.yaml", text) });
  if ("error" in r) throw new Error(r.error.message);
  return r.config;
}

describe("isExempt", () => {
  it("exempts an on-prem 10.x address under the default RFC 1918 list", () => {
    const r = isExempt(defaultMasqConfig(), parseIp("10.20.30.40"));
    assert.equal(r.exempt, true);
    assert.ok(r.reason === "non-masquerade-cidr");
    assert.equal(r.entry.text, "10.0.0.0/8");
  });

  it("masquerades a public address", () => {
    assert.deepEqual(isExempt(defaultMasqConfig(), parseIp("8.8.8.8")), {
      exempt: false,
      reason: "masquerade",
    });
  });

  it("names the covering entry's line, the first in list order", () => {
    const c = config("nonMasqueradeCIDRs:\n  - 10.128.0.0/20\n  - 10.0.0.0/8\n");
    const r = isExempt(c, parseIp("10.128.0.5"));
    assert.ok(r.exempt && r.reason === "non-masquerade-cidr");
    assert.equal(r.entry.source?.line, 2);
    const other = isExempt(c, parseIp("10.20.30.40"));
    assert.ok(other.exempt && other.reason === "non-masquerade-cidr");
    assert.equal(other.entry.source?.line, 3);
  });

  it("exempts link-local unless masqLinkLocal", () => {
    assert.equal(isExempt(defaultMasqConfig(), parseIp("169.254.169.254")).reason, "link-local");
    const c = config("masqLinkLocal: true\n");
    assert.equal(isExempt(c, parseIp("169.254.169.254")).exempt, false);
  });

  it("leaves IPv6 alone without --enable-ipv6 and evaluates it with", () => {
    const c = config("nonMasqueradeCIDRs: [fc00::/7]\n");
    assert.equal(isExempt(c, parseIp("fd00::1")).reason, "ipv6-not-enabled");
    assert.equal(
      isExempt(c, parseIp("fd00::1"), { enableIpv6: true }).reason,
      "non-masquerade-cidr",
    );
    assert.equal(isExempt(c, parseIp("fe80::1"), { enableIpv6: true }).reason, "link-local");
    assert.equal(isExempt(c, parseIp("2001:db8::1"), { enableIpv6: true }).exempt, false);
  });

  it("uses the block iptables installs: /010 covers the /8", () => {
    const c = config("nonMasqueradeCIDRs: [10.0.0.0/010]\n");
    const r = isExempt(c, parseIp("10.200.0.1"));
    assert.ok(r.exempt && r.reason === "non-masquerade-cidr");
    assert.equal(r.cidr.prefix, 8);
  });

  it("masquerades everything when the list is null (issue #65 config)", () => {
    const c = config("nonMasqueradeCIDRs:\nmasqLinkLocal: true\n");
    assert.equal(isExempt(c, parseIp("10.0.0.1")).exempt, false);
  });

  it("agrees with cidr-tools on which IPv4 destinations a list covers", () => {
    const arbCidr = fc
      .tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 32 }))
      .map(([v, p]) => {
        const masked = p === 0 ? 0 : (v >>> (32 - p)) << (32 - p);
        return `${formatIp({ family: 4, value: BigInt(masked >>> 0) })}/${p}`;
      });
    const arbIp = fc
      .integer({ min: 0, max: 0xffffffff })
      .map((v) => formatIp({ family: 4, value: BigInt(v) }));
    fc.assert(
      fc.property(fc.array(arbCidr, { maxLength: 6 }), arbIp, (cidrs, ip) => {
        const c = config(JSON.stringify({ nonMasqueradeCIDRs: cidrs, masqLinkLocal: true }));
        const r = isExempt(c, parseIp(ip));
        const oracle = cidrs.some((x) => containsCidr(x, ip));
        assert.equal(r.exempt, oracle);
        if (r.exempt && r.reason === "non-masquerade-cidr") {
          // the first covering entry in list order, as the first RETURN rule wins
          assert.equal(
            r.entry.text,
            cidrs.find((x) => containsCidr(x, ip)),
          );
        }
      }),
    );
  });
});
