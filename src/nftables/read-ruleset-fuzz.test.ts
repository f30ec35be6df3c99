/**
 * @module nftables/read-ruleset-fuzz.test — the nftables reader (text and JSON) gets random text,
 * truncated and mutated real listings, and huge inputs: it must not throw, must finish, and every
 * diagnostic must name the file, a line inside the input and what was expected; the evaluator
 * must not throw on what the reader kept.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { mutatedText } from "../lab/test-helpers/text-mutations.ts";
import type { Diagnostic } from "../model/types.ts";
import { parseIp } from "../net/cidr.ts";
import { compileNftNat } from "./nat-eval.ts";
import { readNftRuleset } from "./read-ruleset.ts";

const FILE = "fuzz/nft-ruleset.txt";
const dir = new URL("fixtures/", import.meta.url);
const corpus = readdirSync(dir)
  .filter((f) => f.endsWith(".nft") || f.endsWith(".json"))
  .map((f) => readFileSync(new URL(f, dir), "utf8").slice(0, 12_000));

function check(text: string, diagnostics: readonly Diagnostic[]): void {
  const lines = text.split("\n").length;
  for (const d of diagnostics) {
    assert.ok(d.message.length > 0);
    assert.match(d.code, /^NFT_[A-Z_]+$/);
    assert.ok(d.source, `no source: ${d.message}`);
    assert.equal(d.source.file, FILE);
    assert.ok(d.source.line >= 1 && d.source.line <= lines, `line ${d.source.line} of ${lines}`);
    assert.ok((d.source.text?.length ?? 0) <= 500);
  }
}

function readAndEvaluate(text: string): void {
  const r = readNftRuleset(text, FILE);
  check(text, r.diagnostics);
  const nat = compileNftNat(r.value, { nodeInternalIp: parseIp("10.128.0.2") });
  for (const origin of ["pod", "host"] as const) {
    nat.evaluate({
      src: parseIp("10.4.0.9"),
      dst: parseIp("10.96.0.10"),
      proto: "udp",
      dport: 53,
      origin,
    });
  }
}

const words = fc
  .array(
    fc.constantFrom(
      "table",
      "ip",
      "chain",
      "set",
      "map",
      "{",
      "}",
      "type",
      "nat",
      "hook",
      "elements",
      "=",
      "ip daddr",
      ".",
      ":",
      "vmap",
      "@s",
      "goto",
      "jump",
      "dnat to",
      "10.0.0.1",
      "numgen random mod 2",
      "meta mark",
      "&",
      "0x4000",
      "\n",
      "\t",
      '"',
      ";",
      "policy",
      '{"nftables": [',
    ),
    { maxLength: 80 },
  )
  .map((p) => p.join(" "));

describe("readNftRuleset under fuzz", () => {
  it("never throws on random text, and cites lines inside the input", { timeout: 60_000 }, () => {
    fc.assert(fc.property(fc.oneof(fc.string({ maxLength: 400 }), words), readAndEvaluate), {
      numRuns: 400,
    });
  });

  it("never throws on truncated and mutated real listings", { timeout: 120_000 }, () => {
    const pieces = ["\n", "{", "}", ".", ":", ",", '"', "@", "#", "  ", "vmap", "goto x"];
    fc.assert(fc.property(mutatedText(corpus, pieces, 40), readAndEvaluate), { numRuns: 400 });
  });

  it("finishes on a huge line and on many lines", { timeout: 60_000 }, () => {
    const huge = "x".repeat(2_000_000);
    for (const text of [
      huge,
      `${huge}\n${corpus[0]}`,
      "{".repeat(100_000),
      `table ip t {\n\tset s {\n\t\ttype ipv4_addr\n\t\telements = { ${"10.0.0.1,\n".repeat(200_000)}`,
      "\n".repeat(500_000),
      `{"nftables": [${'{"table": {"family": "ip", "name": "t"}},'.repeat(50_000)}{}]}`,
    ]) {
      const r = readNftRuleset(text, FILE);
      check(text, r.diagnostics);
    }
  });
});
