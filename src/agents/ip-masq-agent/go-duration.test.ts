import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { formatGoDuration, parseGoDuration } from "./go-duration.ts";

const S = 1_000_000_000n;

describe("parseGoDuration (time.ParseDuration)", () => {
  it("accepts Go's forms", () => {
    const cases: [string, bigint][] = [
      ["0", 0n],
      ["5s", 5n * S],
      ["30s", 30n * S],
      ["1478s", 1478n * S],
      ["-5s", -5n * S],
      ["+5s", 5n * S],
      ["-0", 0n],
      ["5.0s", 5n * S],
      ["5.6s", 5n * S + 600_000_000n],
      ["5.s", 5n * S],
      [".5s", 500_000_000n],
      ["1.004s", S + 4_000_000n],
      ["1.0040s", S + 4_000_000n],
      ["100.00100s", 100n * S + 1_000_000n],
      ["10ns", 10n],
      ["11us", 11_000n],
      ["12µs", 12_000n],
      ["12μs", 12_000n],
      ["13ms", 13_000_000n],
      ["14s", 14n * S],
      ["15m", 15n * 60n * S],
      ["16h", 16n * 3600n * S],
      ["3h30m", (3n * 3600n + 30n * 60n) * S],
      ["10.5s4m", 4n * 60n * S + 10n * S + 500_000_000n],
      ["-2m3.4s", -(2n * 60n * S + 3n * S + 400_000_000n)],
      ["1h2m3s4ms5us6ns", 3723n * S + 4_005_006n],
      ["39h9m14.425s", (39n * 3600n + 9n * 60n + 14n) * S + 425_000_000n],
      ["52763797000ns", 52763797000n],
      ["0.3333333333333333333h", 20n * 60n * S],
      ["9007199254740993ns", 9007199254740993n],
      ["9223372036854775807ns", 9223372036854775807n],
      ["-9223372036854775808ns", -9223372036854775808n],
    ];
    for (const [text, ns] of cases) assert.deepEqual(parseGoDuration(text), { ns }, text);
  });

  it("refuses the rest with Go's error texts", () => {
    const cases: [string, string][] = [
      ["", 'time: invalid duration ""'],
      ["3", 'time: missing unit in duration "3"'],
      ["60", 'time: missing unit in duration "60"'],
      ["-", 'time: invalid duration "-"'],
      ["s", 'time: invalid duration "s"'],
      [".", 'time: invalid duration "."'],
      ["-.", 'time: invalid duration "-."'],
      [".s", 'time: invalid duration ".s"'],
      ["+.s", 'time: invalid duration "+.s"'],
      ["1d", 'time: unknown unit "d" in duration "1d"'],
      ["\x85\x85", 'time: invalid duration "\\xc2\\x85\\xc2\\x85"'],
      ["9223372036854775810ns", 'time: invalid duration "9223372036854775810ns"'],
      ["9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'],
      ["3000000h", 'time: invalid duration "3000000h"'],
    ];
    for (const [text, error] of cases) assert.deepEqual(parseGoDuration(text), { error }, text);
  });
});

describe("formatGoDuration (Duration.String)", () => {
  it("prints as Go does", () => {
    const cases: [bigint, string][] = [
      [0n, "0s"],
      [1n, "1ns"],
      [1100n, "1.1µs"],
      [2_200_000n, "2.2ms"],
      [3_300_000_000n, "3.3s"],
      [60n * S, "1m0s"],
      [5n * 60n * S, "5m0s"],
      [4n * 60n * S + 5n * S, "4m5s"],
      [4n * 60n * S + 5n * S + 1_000_000n, "4m5.001s"],
      [5n * 3600n * S + 6n * 60n * S + 7_001_000_000n, "5h6m7.001s"],
      [8n * 60n * S + 1n, "8m0.000000001s"],
      [9223372036854775807n, "2562047h47m16.854775807s"],
      [-9223372036854775808n, "-2562047h47m16.854775808s"],
    ];
    for (const [ns, text] of cases) assert.equal(formatGoDuration(ns), text, String(ns));
  });

  it("round-trips every duration through its own text", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n }), (ns) => {
        assert.deepEqual(parseGoDuration(formatGoDuration(ns)), { ns });
      }),
    );
  });
});
