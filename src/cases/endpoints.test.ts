import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatIp } from "../net/cidr.ts";
import { parseDestination, parseFrom } from "./endpoints.ts";

describe("parseDestination", () => {
  it("reads an address with and without a port, IPv4 and IPv6", () => {
    const a = parseDestination("10.20.30.40:5432");
    assert.ok(!("error" in a));
    assert.equal(formatIp(a.ip), "10.20.30.40");
    assert.equal(a.port, 5432);
    const b = parseDestination("[fd00::1]:443");
    assert.ok(!("error" in b) && b.port === 443 && formatIp(b.ip) === "fd00::1");
    const c = parseDestination("fd00::1");
    assert.ok(!("error" in c) && c.port === undefined);
  });
  it("names what was expected on bad input", () => {
    for (const bad of ["10.20.30.400", "10.20.30.40:0", "10.20.30.40:70000", "host:80", ""]) {
      const r = parseDestination(bad);
      assert.ok("error" in r, bad);
      assert.match(r.error, /expected|not 1-65535/);
    }
  });
});

describe("parseFrom", () => {
  it("reads pod/NS/NAME and node/NAME and refuses the rest", () => {
    assert.deepEqual(parseFrom("pod/default/app"), {
      kind: "pod",
      namespace: "default",
      name: "app",
    });
    assert.deepEqual(parseFrom("node/n1"), { kind: "node", name: "n1" });
    assert.ok("error" in parseFrom("pods/default/app"));
    assert.ok("error" in parseFrom("pod/app"));
  });
});
