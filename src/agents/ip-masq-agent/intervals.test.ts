import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  formatInterval,
  intervalSize,
  intervalsSize,
  parseInterval,
  parseIntervals,
} from "./intervals.ts";
import { loadVectors } from "./test-helpers/vectors.ts";

const { interval } = loadVectors();
const iv = ([first, last]: [number, number]) => ({ first, last });

describe("port intervals (upstream pkg/interval tests)", () => {
  it("sizes", () => {
    for (const v of interval.size) assert.equal(intervalSize(iv(v.interval)), v.want);
  });
  it("strings", () => {
    for (const v of interval.string) assert.equal(formatInterval(iv(v.interval)), v.want);
  });
  it("parses one interval or refuses it", () => {
    for (const v of interval.parse_interval) {
      const r = parseInterval(v.input);
      if (v.error) assert.ok("error" in r, v.input);
      else assert.deepEqual(r, { interval: iv(v.want!) }, v.input);
    }
  });
  it("sizes lists", () => {
    for (const v of interval.intervals_size) {
      assert.equal(intervalsSize(v.intervals === null ? null : v.intervals.map(iv)), v.want);
    }
  });
  it("parses lists in the order written, or refuses them", () => {
    for (const v of interval.parse_intervals) {
      const r = parseIntervals(v.input);
      if (v.error) assert.ok("error" in r, v.input);
      else assert.deepEqual(r, { intervals: v.want!.map(iv) }, v.input);
    }
  });
  it("words errors as the agent does", () => {
    assert.deepEqual(parseInterval("42-43-44"), { error: 'invalid interval "42-43-44"' });
    assert.deepEqual(parseInterval("42-41"), { error: 'first is greater than last in "42-41"' });
    assert.deepEqual(parseInterval("4x"), { error: 'strconv.Atoi: parsing "4x": invalid syntax' });
    assert.deepEqual(parseInterval("-44"), { error: 'strconv.Atoi: parsing "": invalid syntax' });
  });
});
