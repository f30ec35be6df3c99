/** @module evidence/json-error.test — jsonErrorOffset agrees with JSON.parse on what is valid. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { jsonErrorOffset, lineColAt } from "./json-error.ts";

const valid = (t: string) => {
  try {
    JSON.parse(t);
    return true;
  } catch {
    return false;
  }
};

describe("jsonErrorOffset", () => {
  it("accepts exactly what JSON.parse accepts (valid JSON and mutations of it)", () => {
    const mutated = fc
      .tuple(
        fc.json(),
        fc.nat(),
        fc.constantFrom("", ",", "}", "]", '"', ":", "x", "\n", "[", "{"),
        fc.nat(3),
      )
      .map(([j, at, ins, del]) => {
        const p = at % (j.length + 1);
        return j.slice(0, p) + ins + j.slice(p + del);
      });
    fc.assert(
      fc.property(fc.oneof(fc.json(), mutated, fc.string({ maxLength: 20 })), (t) => {
        assert.equal(jsonErrorOffset(t) === undefined, valid(t), JSON.stringify(t));
      }),
      { numRuns: 5000 },
    );
  });

  it("points at the offending byte", () => {
    const t = '[{"ifindex":1,\n"ifname": }]';
    assert.deepEqual(lineColAt(t, jsonErrorOffset(t)!), { line: 2, col: 11 });
    assert.equal(jsonErrorOffset("[1,2"), 4);
    assert.equal(jsonErrorOffset("{}x"), 2);
  });

  it("survives deep nesting", () => {
    assert.equal(jsonErrorOffset("[".repeat(200_000)), 200_000);
    assert.equal(jsonErrorOffset(`${"[".repeat(100_000)}${"]".repeat(100_000)}`), undefined);
  });
});
