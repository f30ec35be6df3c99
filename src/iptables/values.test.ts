import assert from "node:assert/strict";
import { isIPv4 } from "node:net";
import { describe, it } from "node:test";
import fc from "fast-check";
import { tryParseCidr } from "../net/cidr.ts";
import {
  dottedQuad,
  isPlainCidrV4,
  isPlainHostPortV4,
  parseAddr,
  parseCounters,
  parseNatRange,
} from "./values.ts";

const arbOctet = fc.oneof(
  fc.nat(255).map(String),
  fc.constantFrom("00", "01", "010", "256", "300", "-1", "", "a", " 1"),
);
const arbQuad = fc
  .tuple(arbOctet, arbOctet, arbOctet, arbOctet, fc.boolean())
  .map(([a, b, c, d, extra]) => `${a}.${b}.${c}.${d}${extra ? ".5" : ""}`);
const arbPrefix = fc.oneof(
  fc.integer({ min: 0, max: 32 }).map(String),
  fc.constantFrom("", "00", "05", "032", "33", "99", "-1", "3a", "255.255.0.0", "255.0.255.0"),
);
const arbAddrText = fc.oneof(
  arbQuad,
  fc.tuple(arbQuad, arbPrefix).map(([q, p]) => `${q}/${p}`),
);

describe("IPv4 values read without node:net", () => {
  it("dottedQuad accepts exactly what node:net calls IPv4, with its value", () => {
    fc.assert(
      fc.property(arbQuad, (q) => {
        const v = dottedQuad(q, 0, q.length);
        assert.equal(v >= 0, isIPv4(q), q);
        if (v >= 0) {
          const want = q.split(".").reduce((acc, o) => acc * 256 + Number(o), 0);
          assert.equal(v, want, q);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it("parseAddr on IPv4 gives the block tryParseCidr gives (host bits cleared), or refuses", () => {
    fc.assert(
      fc.property(arbAddrText, (t) => {
        const r = parseAddr(t, 4);
        const slash = t.indexOf("/");
        const masked = slash >= 0 && t.slice(slash + 1).includes(".");
        if (masked) return; // dotted masks: their own path, checked below
        const ref = tryParseCidr(t);
        const refOk = !("error" in ref) && ref.cidr.family === 4;
        assert.equal(r.ok, refOk, t);
        if (r.ok && refOk) assert.deepEqual(r.value, ref.cidr, t);
      }),
      { numRuns: 3000 },
    );
    const m = parseAddr("10.1.2.3/255.255.0.0", 4);
    assert.ok(m.ok && m.value.prefix === 16 && m.value.start === 0x0a010000n);
    assert.equal(parseAddr("10.1.2.3/255.0.255.0", 4).ok, false);
  });

  it("isPlainCidrV4 says yes only to what parseAddr reads, with a prefix other than 0", () => {
    fc.assert(
      fc.property(arbAddrText, fc.nat(3), (t, pad) => {
        const text = `${" ".repeat(pad)}${t} -j X`;
        if (!isPlainCidrV4(text, pad, pad + t.length)) return;
        const r = parseAddr(t, 4);
        assert.ok(r.ok, t);
        assert.notEqual(r.value.prefix, 0, t);
      }),
      { numRuns: 3000 },
    );
    assert.ok(isPlainCidrV4("10.0.0.0/8", 0, 10));
    assert.ok(isPlainCidrV4("x 10.8.0.1 y", 2, 10));
  });

  it("isPlainHostPortV4 says yes only to one address (and port) parseNatRange reads", () => {
    const arbPort = fc.oneof(
      fc.integer({ min: 0, max: 70000 }).map(String),
      fc.constantFrom("", "080", "1-2", "a"),
    );
    fc.assert(
      fc.property(arbQuad, fc.option(arbPort), (q, port) => {
        const t = port === null ? q : `${q}:${port}`;
        if (!isPlainHostPortV4(`${t}\n`, 0, t.length)) return;
        const r = parseNatRange(t, 4);
        assert.ok(r.ok, t);
        assert.deepEqual(r.value.from, r.value.to, t);
      }),
      { numRuns: 3000 },
    );
    assert.ok(isPlainHostPortV4("10.6.61.60:8080", 0, 15));
  });

  it("reads counters, sharing the zero ones", () => {
    assert.deepEqual(parseCounters("[12:3456]"), { packets: 12n, bytes: 3456n });
    assert.equal(parseCounters("[0:0]"), parseCounters("[0:0]"));
    assert.equal(parseCounters("[1:x]"), undefined);
    assert.equal(parseCounters("1:2"), undefined);
  });
});
