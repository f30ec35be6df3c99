import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { ChainIndex } from "./chain-index.ts";
import { SavedChain } from "./saved-chain.ts";

describe("ChainIndex", () => {
  it("finds what a Map finds, by a stretch of the text or by name, through growth", () => {
    const arbName = fc.string({
      unit: fc.constantFrom("A", "B", "K", "-", "1"),
      minLength: 1,
      maxLength: 6,
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(arbName, { maxLength: 3000 }),
        fc.array(arbName, { maxLength: 200 }),
        fc.boolean(),
        (declared, asked, inText) => {
          // the names as a dump's text would hold them, one per line
          const text =
            declared.map((n) => `:${n} - [0:0]\n`).join("") +
            asked.map((n) => `-j ${n}\n`).join("");
          const idx = new ChainIndex(text);
          const map = new Map<string, SavedChain>();
          let at = 0;
          for (const n of declared) {
            const c = new SavedChain(n, false);
            idx.add(c, inText ? at + 1 : -1);
            map.set(n, c);
            at += n.length + 10;
          }
          for (const n of asked) {
            const p = at + 3;
            assert.equal(idx.find(p, p + n.length), map.get(n), n);
            assert.equal(idx.has(p, p + n.length), map.has(n), n);
            assert.equal(idx.get(n), map.get(n), n);
            at += n.length + 4;
          }
          for (const n of declared) assert.equal(idx.get(n), map.get(n));
        },
      ),
      { numRuns: 200 },
    );
  });

  it("finds what a Map finds when asked in the order declared, between additions, when presized", () => {
    const arbName = fc.string({
      unit: fc.constantFrom("A", "B", "K", "-", "1"),
      minLength: 1,
      maxLength: 5,
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(arbName, { maxLength: 2500, size: "max" }),
        fc.array(fc.oneof(arbName, fc.constant("")), { maxLength: 300, size: "max" }),
        fc.oneof(fc.constant(0), fc.nat({ max: 4000 })),
        fc.nat({ max: 100 }),
        (declared, extra, expected, cut) => {
          // asked: every declared name in order (as a dump's rules come), with others between
          // ("" stands for the next declared name)
          const asked: string[] = [];
          let k = 0;
          for (const n of extra) asked.push(n === "" ? (declared[k++] ?? "X") : n);
          for (; k < declared.length; k++) asked.push(declared[k]!);
          const text =
            declared.map((n) => `:${n} - [0:0]\n`).join("") +
            asked.map((n) => `-A ${n}\n`).join("");
          const idx = new ChainIndex(text, expected);
          const map = new Map<string, SavedChain>();
          const starts: number[] = [];
          let at = 0;
          for (const n of declared) {
            starts.push(at + 1);
            at += n.length + 10;
          }
          const askAll = (upTo: number) => {
            let p = at;
            for (const n of asked.slice(0, upTo)) {
              assert.equal(idx.find(p + 3, p + 3 + n.length), map.get(n), n);
              assert.equal(idx.has(p + 3, p + 3 + n.length), map.has(n), n);
              p += n.length + 4;
            }
          };
          // some declared, some asked (with the rest not there yet), the rest declared, all asked
          const half = Math.floor((declared.length * cut) / 100);
          declared.forEach((n, i) => {
            if (i === half) askAll(asked.length);
            const c = new SavedChain(n, false);
            idx.add(c, starts[i]!);
            map.set(n, c);
          });
          askAll(asked.length);
          for (const n of declared) assert.equal(idx.get(n), map.get(n));
        },
      ),
      { numRuns: 60, endOnFailure: true },
    );
  });
});
