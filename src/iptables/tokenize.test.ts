import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { quoteArg, quoteSaveString, tokenize } from "./tokenize.ts";

describe("tokenize", () => {
  it("splits on spaces and keeps quoted comments whole", () => {
    const t = tokenize('-A X -m comment --comment "kubernetes service portals" -j KUBE-SERVICES');
    assert.deepEqual(t.tokens, [
      "-A",
      "X",
      "-m",
      "comment",
      "--comment",
      "kubernetes service portals",
      "-j",
      "KUBE-SERVICES",
    ]);
    assert.deepEqual(t.quoted, [5]);
  });

  it("reads \\\" \\\\ and \\' inside quotes as the character", () => {
    const t = tokenize(String.raw`--comment "it\'s a \"q\" and \\ back"`);
    assert.deepEqual(t.tokens, ["--comment", `it's a "q" and \\ back`]);
  });

  it("reads ip-masq-agent's doubly quoted jump comment", () => {
    const t = tokenize(
      String.raw`--comment "\"ip-masq-agent: ensure nat POSTROUTING\"" -j IP-MASQ-AGENT`,
    );
    assert.equal(t.tokens[1], '"ip-masq-agent: ensure nat POSTROUTING"');
  });

  it("keeps an empty quoted argument", () => {
    assert.deepEqual(tokenize('--comment "" -j RETURN').tokens, ["--comment", "", "-j", "RETURN"]);
  });

  it("treats a backslash outside quotes as an ordinary character", () => {
    assert.deepEqual(tokenize("a\\b c").tokens, ["a\\b", "c"]);
  });

  it("ends the argument at the closing quote", () => {
    assert.deepEqual(tokenize('x"a b"c').tokens, ["xa b", "c"]);
  });

  it("reports an unterminated quote with its column", () => {
    const t = tokenize('-m comment --comment "open');
    assert.equal(t.unterminatedQuoteAt, 21);
    assert.equal(t.tokens.at(-1), "open");
  });

  it("tokenizes from an offset", () => {
    assert.deepEqual(tokenize("-A CHAIN -j ACCEPT", 9).tokens, ["-j", "ACCEPT"]);
  });
});

describe("quoteSaveString", () => {
  it("prints plain words bare and everything else quoted, as iptables-save does", () => {
    assert.equal(quoteSaveString("foo"), "foo");
    assert.equal(quoteSaveString("a.b"), '"a.b"');
    assert.equal(quoteSaveString(""), '""');
    assert.equal(quoteSaveString(`it's "q" \\`), String.raw`"it\'s \"q\" \\"`);
  });

  it("round-trips any string through tokenize", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary-ascii" }), (s) => {
        const clean = s.replace(/[\r\n]/g, "");
        const t = tokenize(`--comment ${quoteSaveString(clean)} -j X`);
        assert.deepEqual(t.tokens, ["--comment", clean, "-j", "X"]);
      }),
    );
  });

  it("quoteArg round-trips values without line breaks", () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        const clean = s.replace(/[\r\n]/g, "");
        assert.deepEqual(tokenize(`a ${quoteArg(clean)} b`).tokens, ["a", clean, "b"]);
      }),
    );
  });
});

describe("tokenize fuzz", () => {
  it("never throws and never loops on arbitrary text", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 300 }), (s) => {
        const t = tokenize(s);
        assert.ok(Array.isArray(t.tokens));
      }),
      { numRuns: 2000 },
    );
  });
});
