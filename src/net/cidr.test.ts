/**
 * @module net/cidr.test — properties of the CIDR algebra, a differential check against
 * cidr-tools@11.3.2 (a devDependency used only as an oracle, on valid inputs), RFC 5952 vectors and
 * the strict rejections a diagnosis tool needs.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as oracle from "cidr-tools";
import fc from "fast-check";
import {
  type Cidr,
  contains,
  excludeCidrs,
  type Family,
  formatCidr,
  formatIp,
  mergeCidrs,
  overlaps,
  parseCidr,
  parseIp,
  rangeToCidrs,
  tryParseCidr,
  tryParseIp,
} from "./cidr.ts";

const arbV4 = fc
  .tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 }))
  .map(([ip, p]) => parseCidr(`${ip}/${p}`));
const arbV6 = fc
  .tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 }))
  .map(([ip, p]) => parseCidr(`${ip}/${p}`));
/** Blocks clustered in a small region so that overlaps and adjacency are common. */
const arbNearV4 = fc
  .tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 22, max: 32 }))
  .map(([x, p]) => parseCidr(`10.0.${x >> 2}.${(x & 3) * 64}/${p}`));
const arbNearV6 = fc
  .tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 112, max: 128 }))
  .map(([x, p]) => parseCidr(`fd00::${x.toString(16)}/${p}`));
const arbCidr = fc.oneof(arbV4, arbV6, arbNearV4, arbNearV6);
const arbNear = fc.oneof(arbNearV4, arbNearV6);

/** The covered addresses as sorted, coalesced [start, end] intervals per family (a naive model). */
function intervals(blocks: readonly Cidr[]): string[] {
  const out: { f: Family; s: bigint; e: bigint }[] = [];
  const sorted = [...blocks].sort((a, b) =>
    a.family !== b.family
      ? a.family - b.family
      : a.start < b.start
        ? -1
        : a.start > b.start
          ? 1
          : 0,
  );
  for (const c of sorted) {
    const last = out.at(-1);
    if (last && last.f === c.family && c.start <= last.e + 1n) {
      if (c.end > last.e) last.e = c.end;
    } else out.push({ f: c.family, s: c.start, e: c.end });
  }
  return out.map((r) => `${r.f}:${r.s}-${r.e}`);
}

function isSortedDisjoint(blocks: readonly Cidr[]): boolean {
  for (let i = 1; i < blocks.length; i++) {
    const a = blocks[i - 1]!;
    const b = blocks[i]!;
    if (a.family > b.family) return false;
    if (a.family === b.family && a.end >= b.start) return false;
  }
  return true;
}

function isWellFormed(c: Cidr): boolean {
  const bits = BigInt(c.family === 4 ? 32 : 128);
  const size = 1n << (bits - BigInt(c.prefix));
  return c.start % size === 0n && c.end === c.start + size - 1n;
}

function intersect(a: Cidr, b: Cidr): Cidr[] {
  if (!overlaps(a, b)) return [];
  return [a.prefix >= b.prefix ? a : b];
}

const toOracle = (blocks: readonly Cidr[]) => blocks.map(formatCidr);
const fromOracle = (nets: readonly string[]) => nets.map((n) => parseCidr(n));

describe("parseCidr strictness", () => {
  const rejected = [
    "10.0.0.300/8",
    "10.0.0.0/33",
    "::/129",
    "fd00::/129",
    "010.0.0.1",
    "010.0.0.1/8",
    "10.0.0/8",
    "10.0.0",
    "fe80::1%eth0",
    "fe80::1%eth0/64",
    "",
    " ",
    " 10.0.0.0/8",
    "10.0.0.0/8 ",
    "10.0.0.0 /8",
    "10.0.0.0/ 8",
    "10.0.0.0/",
    "/8",
    "10.0.0.0/08",
    "10.0.0.0/-1",
    "10.0.0.0/8/8",
    "10.0.0.0/+8",
    "10.0.0.0/0x8",
    "0x0a.0.0.1",
    "1::2::3",
    "::ffff:010.0.0.1",
    "10.0.0.1\n",
  ];
  for (const text of rejected) {
    it(`rejects ${JSON.stringify(text)}`, () => {
      const r = tryParseCidr(text);
      assert.ok("error" in r, `accepted ${JSON.stringify(text)}`);
      assert.throws(
        () => parseCidr(text),
        (e: unknown) => e instanceof Error && (e as { code?: string }).code === "ERR_INVALID_CIDR",
      );
    });
  }

  it("names the reason: prefix too long, not an address", () => {
    const long = tryParseCidr("10.0.0.0/33");
    assert.ok("error" in long && /longer than 32/.test(long.error));
    const bad = tryParseCidr("10.0.0.300/8");
    assert.ok("error" in bad && /not an IPv4 or IPv6 address/.test(bad.error));
  });

  it("accepts a bare address as a host block unless told not to", () => {
    assert.deepEqual(parseCidr("10.0.0.1"), {
      family: 4,
      start: 0x0a000001n,
      end: 0x0a000001n,
      prefix: 32,
    });
    assert.ok("error" in tryParseCidr("10.0.0.1", { allowBareAddress: false }));
  });

  it("clears host bits by default and refuses them when strict", () => {
    assert.equal(formatCidr(parseCidr("10.1.2.3/8")), "10.0.0.0/8");
    assert.ok("error" in tryParseCidr("10.1.2.3/8", { strictHostBits: true }));
    assert.equal(formatCidr(parseCidr("10.0.0.0/8", { strictHostBits: true })), "10.0.0.0/8");
  });

  it("reads the edges of both families", () => {
    assert.equal(parseCidr("0.0.0.0/0").end, (1n << 32n) - 1n);
    assert.equal(parseCidr("::/0").end, (1n << 128n) - 1n);
    assert.equal(parseIp("255.255.255.255").value, (1n << 32n) - 1n);
    assert.equal(parseIp("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff").value, (1n << 128n) - 1n);
    assert.equal(parseIp("::ffff:10.0.0.1").value, 0xffff0a000001n);
    assert.equal(parseIp("1:2:3:4:5:6:1.2.3.4").value & 0xffffffffn, 0x01020304n);
  });

  it("never throws from tryParse* on arbitrary text", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (s) => {
        tryParseIp(s);
        tryParseCidr(s);
      }),
      { numRuns: 3000 },
    );
  });
});

describe("formatIp / formatCidr", () => {
  // RFC 5952 §4 examples and rules.
  const vectors: [string, string][] = [
    ["2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"],
    ["2001:db8:0:0:0:0:2:1", "2001:db8::2:1"],
    ["2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"], // §4.2.2: one zero group stays
    ["2001:0:0:1:0:0:0:1", "2001:0:0:1::1"], // §4.2.3: the longest run
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"], // §4.2.3: the first of equal runs
    ["2001:DB8::ABCD", "2001:db8::abcd"], // §4.3: lower case
    ["0:0:0:0:0:0:0:0", "::"],
    ["0:0:0:0:0:0:0:1", "::1"],
    ["1:0:0:0:0:0:0:0", "1::"],
    ["fe80:0:0:0:0:0:0:0", "fe80::"],
    ["::ffff:10.0.0.1", "::ffff:10.0.0.1"], // §5: IPv4-mapped keeps the dotted quad
    ["0:0:0:0:0:ffff:c000:0201", "::ffff:192.0.2.1"],
  ];
  for (const [input, want] of vectors) {
    it(`renders ${input} as ${want}`, () => assert.equal(formatIp(parseIp(input)), want));
  }

  it("round-trips every v4 and v6 address: format(parse(x)) parses to the same value", () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV4(), fc.ipV6()), (text) => {
        const ip = parseIp(text);
        const shown = formatIp(ip);
        assert.deepEqual(parseIp(shown), ip);
        assert.equal(formatIp(parseIp(shown)), shown);
        assert.equal(shown, shown.toLowerCase());
        assert.ok(!/(^|:)0[0-9a-f]/.test(shown), `leading zero in ${shown}`);
      }),
      { numRuns: 3000 },
    );
  });

  it("agrees with cidr-tools' compressed form outside the IPv4-mapped block", () => {
    fc.assert(
      fc.property(fc.ipV6(), (text) => {
        const ip = parseIp(text);
        fc.pre(ip.value >> 32n !== 0xffffn);
        assert.equal(formatIp(ip), oracle.normalizeCidr(text, { compress: true }).toLowerCase());
      }),
      { numRuns: 2000 },
    );
  });

  it("round-trips CIDRs", () => {
    fc.assert(
      fc.property(arbCidr, (c) => {
        assert.deepEqual(parseCidr(formatCidr(c)), c);
        assert.ok(isWellFormed(c));
      }),
      { numRuns: 2000 },
    );
  });
});

describe("contains / overlaps", () => {
  it("agree with cidr-tools", () => {
    fc.assert(
      fc.property(arbCidr, arbCidr, (a, b) => {
        assert.equal(overlaps(a, b), oracle.overlapCidr(formatCidr(a), formatCidr(b)));
        assert.equal(contains(a, b), oracle.containsCidr(formatCidr(a), formatCidr(b)));
      }),
      { numRuns: 2000 },
    );
  });

  it("contains an address exactly when start <= value <= end", () => {
    fc.assert(
      fc.property(arbV4, fc.ipV4(), (c, text) => {
        const ip = parseIp(text);
        assert.equal(contains(c, ip), oracle.containsCidr(formatCidr(c), text));
      }),
    );
  });

  it("never mixes families", () => {
    assert.equal(overlaps(parseCidr("0.0.0.0/0"), parseCidr("::/0")), false);
    assert.equal(contains(parseCidr("::/0"), parseIp("10.0.0.1")), false);
  });
});

describe("mergeCidrs", () => {
  it("covers exactly the same addresses, sorted and disjoint", () => {
    fc.assert(
      fc.property(fc.array(arbCidr, { maxLength: 12 }), (blocks) => {
        const merged = mergeCidrs(blocks);
        assert.deepEqual(intervals(merged), intervals(blocks));
        assert.ok(isSortedDisjoint(merged));
        assert.ok(merged.every(isWellFormed));
      }),
      { numRuns: 1500 },
    );
  });

  it("is idempotent", () => {
    fc.assert(
      fc.property(fc.array(arbNear, { maxLength: 12 }), (blocks) => {
        const once = mergeCidrs(blocks);
        assert.deepEqual(mergeCidrs(once), once);
      }),
    );
  });

  it("gives the same blocks as cidr-tools", () => {
    fc.assert(
      fc.property(fc.array(arbCidr, { maxLength: 10 }), (blocks) => {
        const ours = mergeCidrs(blocks);
        const theirs = mergeCidrs(fromOracle(oracle.mergeCidr(toOracle(blocks))));
        assert.deepEqual(ours, theirs);
        // The oracle's own output is already minimal: our merge must not need more blocks.
        assert.equal(ours.length, oracle.mergeCidr(toOracle(blocks)).length);
      }),
      { numRuns: 1500 },
    );
  });

  it("joins two halves into their parent", () => {
    assert.deepEqual(
      mergeCidrs([parseCidr("10.0.0.128/25"), parseCidr("10.0.0.0/25")]).map(formatCidr),
      ["10.0.0.0/24"],
    );
  });
});

describe("excludeCidrs", () => {
  it("exclude(a, b) ∪ (a ∩ b) = a", () => {
    fc.assert(
      fc.property(arbCidr, arbCidr, (a, b) => {
        const rest = excludeCidrs([a], [b]);
        assert.deepEqual(mergeCidrs([...rest, ...intersect(a, b)]), mergeCidrs([a]));
        assert.ok(rest.every((c) => !overlaps(c, b)));
        assert.ok(isSortedDisjoint(rest));
      }),
      { numRuns: 2000 },
    );
  });

  it("gives the same blocks as cidr-tools on lists", () => {
    fc.assert(
      fc.property(
        fc.array(arbNear, { minLength: 1, maxLength: 6 }),
        fc.array(arbNear, { maxLength: 6 }),
        (base, cut) => {
          const ours = excludeCidrs(base, cut);
          const theirs = fromOracle(oracle.excludeCidr(toOracle(base), toOracle(cut)));
          assert.deepEqual(ours, mergeCidrs(theirs));
        },
      ),
      { numRuns: 1500 },
    );
  });

  it("excludes a /16 from a /8 as 8 disjoint blocks", () => {
    const rest = excludeCidrs([parseCidr("10.0.0.0/8")], [parseCidr("10.1.0.0/16")]);
    assert.equal(rest.length, 8);
    assert.equal(formatCidr(rest[0]!), "10.0.0.0/16");
    assert.equal(formatCidr(rest[7]!), "10.128.0.0/9");
  });

  it("leaves nothing when the cut covers the block, and everything when it misses", () => {
    assert.deepEqual(excludeCidrs([parseCidr("10.1.0.0/16")], [parseCidr("10.0.0.0/8")]), []);
    assert.deepEqual(excludeCidrs([parseCidr("10.1.0.0/16")], [parseCidr("::/0")]), [
      parseCidr("10.1.0.0/16"),
    ]);
  });
});

describe("rangeToCidrs", () => {
  it("splits any range into the fewest aligned blocks that tile it", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: (1n << 32n) - 1n }),
        fc.bigInt({ min: 0n, max: 4096n }),
        (s, len) => {
          const end = s + len > (1n << 32n) - 1n ? (1n << 32n) - 1n : s + len;
          const blocks = rangeToCidrs(4, s, end);
          assert.deepEqual(intervals(blocks), [`4:${s}-${end}`]);
          assert.ok(blocks.every(isWellFormed));
          // Minimal: no two neighbours could be joined into one aligned block.
          assert.deepEqual(mergeCidrs(blocks), blocks);
        },
      ),
    );
  });
});
