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
});
