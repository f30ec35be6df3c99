/**
 * Tests of OpenVPN's variants beyond the chart: tap mode (`dev tap0`, `dev-type`, `server-bridge`
 * and its pool), `client-config-dir` files (`iroute`, `ifconfig-push`, per-client pushes), the
 * openvpn(8) rule that an `iroute` needs a server `route`, and `topology` as written.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { formatCidr, formatIp } from "../../net/cidr.ts";
import { parseOpenvpnClientConfig, unroutedIroutes } from "./client-config.ts";
import { clientPools, parseOpenvpnConfig } from "./server-config.ts";

const read = (f: string) => readFileSync(new URL(`testdata/${f}`, import.meta.url), "utf8");

describe("OpenVPN tap mode", () => {
  const { value, diagnostics } = parseOpenvpnConfig(read("server-tap.conf"), "server-tap.conf");
  it("reads dev-type, the server-bridge pool as blocks, and client-config-dir", () => {
    assert.equal(value.devType?.value, "tap");
    assert.equal(value.devType?.source.line, 6);
    assert.deepEqual(value.serverBridge?.value.map(formatCidr), [
      "10.244.1.200/29",
      "10.244.1.208/28",
      "10.244.1.224/28",
      "10.244.1.240/29",
      "10.244.1.248/31",
      "10.244.1.250/32",
    ]);
    assert.equal(clientPools(value)[0]?.source.line, 3);
    assert.equal(value.clientConfigDir?.value, "/etc/openvpn/ccd");
  });
  it("reports a server-bridge without its pool end, keeping the first", () => {
    assert.deepEqual(
      diagnostics.map((d) => [d.code, d.source?.line]),
      [["OPENVPN_SYNTAX", 7]],
    );
  });
  it("takes the type from the device name when dev-type is absent; topology as written", () => {
    const r = parseOpenvpnConfig("dev tun1\ntopology net30\nserver-bridge\n", "s.conf").value;
    assert.equal(r.devType?.value, "tun");
    assert.equal(r.topology?.value, "net30");
    assert.equal(r.serverBridge, undefined);
  });
});

describe("parseOpenvpnClientConfig", () => {
  const { value, diagnostics } = parseOpenvpnClientConfig(read("ccd/site-a"), "ccd/site-a");
  it("reads iroutes, the pushed address and routes, push-reset, with lines", () => {
    assert.equal(value.commonName, "site-a");
    assert.deepEqual(
      value.iroutes.map((r) => formatCidr(r.value)),
      ["192.168.10.0/24", "192.168.20.0/24"],
    );
    assert.equal(formatIp(value.ifconfigPush!.value), "10.8.0.101");
    assert.deepEqual(
      value.pushedRoutes.map((r) => formatCidr(r.value)),
      ["10.96.0.0/12"],
    );
    assert.equal(value.pushReset?.line, 6);
    assert.deepEqual(
      diagnostics.map((d) => d.source?.line),
      [7],
    );
  });
  it("names each iroute no server route covers (openvpn(8): --iroute needs --route)", () => {
    const server = parseOpenvpnConfig(read("server-tap.conf"), "server-tap.conf").value;
    const d = unroutedIroutes(server, [value]);
    assert.deepEqual(
      d.map((x) => [x.code, x.source?.file, x.source?.line]),
      [["OPENVPN_IROUTE_UNROUTED", "ccd/site-a", 4]],
    );
    assert.match(d[0]!.message, /192\.168\.20\.0\/24 .*expected a server "route"/);
  });
  it("never throws on random or mutated text and cites lines inside it", () => {
    const base = read("ccd/site-a");
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), fc.nat(base.length), (junk, at) => {
        const text = base.slice(0, at) + junk + base.slice(at);
        const lines = text.split("\n").length;
        for (const x of parseOpenvpnClientConfig(text, "f").diagnostics) {
          assert.ok(x.source && x.source.line >= 1 && x.source.line <= lines);
          assert.match(x.message, /expected/);
        }
      }),
      { numRuns: 300 },
    );
  });
});
