import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { parseIp } from "../net/cidr.ts";
import { formatFlowSpec, parseFlowSpec } from "./flow-spec.ts";

describe("parseFlowSpec", () => {
  it("reads SRC->DST:PORT as tcp and SRC->DST as icmp", () => {
    assert.deepEqual(parseFlowSpec("10.4.0.5->10.20.30.40:5432"), {
      proto: "tcp",
      src: parseIp("10.4.0.5"),
      dst: parseIp("10.20.30.40"),
      dport: 5432,
    });
    assert.equal((parseFlowSpec("10.4.0.5->10.20.30.40") as { proto: string }).proto, "icmp");
    // the form the shell does not read as a redirect when typed unquoted
    assert.deepEqual(
      parseFlowSpec("10.4.0.5,10.20.30.40:5432"),
      parseFlowSpec("10.4.0.5->10.20.30.40:5432"),
    );
  });
  it("reads a source port, --proto udp and bracketed IPv6", () => {
    const f = parseFlowSpec("10.4.0.5:4000->8.8.8.8:53", "udp");
    assert.equal(formatFlowSpec(f as never), "udp 10.4.0.5:4000->8.8.8.8:53");
    const g = parseFlowSpec("[fd00::5]:4000->[fd00::1]:80");
    assert.equal(formatFlowSpec(g as never), "tcp [fd00::5]:4000->[fd00::1]:80");
  });
  it("names what was expected", () => {
    assert.match((parseFlowSpec("10.4.0.5") as { error: string }).error, /expected SRC->DST/);
    assert.match(
      (parseFlowSpec("10.4.0.x->1.1.1.1") as { error: string }).error,
      /source "10.4.0.x"/,
    );
    assert.match((parseFlowSpec("1.1.1.1->2.2.2.2:0") as { error: string }).error, /not a port/);
    assert.match(
      (parseFlowSpec("1.1.1.1->2.2.2.2", "udp") as { error: string }).error,
      /needs a destination port/,
    );
    assert.match(
      (parseFlowSpec("1.1.1.1->2.2.2.2:1", "sctp") as { error: string }).error,
      /expected tcp, udp or icmp/,
    );
    assert.match(
      (parseFlowSpec("1.1.1.1->fd00::1") as { error: string }).error,
      /different IP families/,
    );
  });
  it("never throws on arbitrary input and round-trips what it accepts", () => {
    fc.assert(
      fc.property(fc.string(), fc.constantFrom(undefined, "tcp", "udp", "icmp", "x"), (s, p) => {
        const r = parseFlowSpec(s, p);
        if ("error" in r) return true;
        const again = parseFlowSpec(formatFlowSpec(r).split(" ")[1]!, r.proto);
        return !("error" in again) && formatFlowSpec(again) === formatFlowSpec(r);
      }),
    );
    fc.assert(
      fc.property(fc.ipV4(), fc.ipV4(), fc.integer({ min: 1, max: 65535 }), (a, b, port) => {
        const r = parseFlowSpec(`${a}->${b}:${port}`);
        return !("error" in r) && formatFlowSpec(r) === `tcp ${a}->${b}:${port}`;
      }),
    );
  });
});
