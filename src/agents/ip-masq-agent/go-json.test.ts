import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type GoValue, goQuoteChar, parseGoJson } from "./go-json.ts";

const parse = (s: string) => parseGoJson(Buffer.from(s, "utf8"));

function toJs(v: GoValue): unknown {
  switch (v.kind) {
    case "null":
      return null;
    case "bool":
    case "string":
      return v.value;
    case "number":
      return Number(v.text);
    case "array":
      return v.items.map(toJs);
    case "object":
      return Object.fromEntries(v.entries.map((e) => [e.key, toJs(e.value)]));
  }
}

describe("parseGoJson", () => {
  it("words syntax errors as encoding/json's scanner does", () => {
    const cases: [string, string][] = [
      ["{*", "invalid character '*' looking for beginning of object key string"],
      ["", "unexpected end of JSON input"],
      ['{"a":1', "unexpected end of JSON input"],
      ['{"a":1,}', "invalid character '}' looking for beginning of object key string"],
      ["[1,]", "invalid character ']' looking for beginning of value"],
      ['{"a" 1}', "invalid character '1' after object key"],
      ['{"a":1 "b":2}', "invalid character '\"' after object key:value pair"],
      ["[1 2]", "invalid character '2' after array element"],
      ['{"a":tru}', "invalid character '}' in literal true (expecting 'e')"],
      ['{"a":nul}', "invalid character '}' in literal null (expecting 'l')"],
      ['{"a":01}', "invalid character '1' after object key:value pair"],
      ['{"a":-}', "invalid character '}' in numeric literal"],
      ['{"a":1.}', "invalid character '}' after decimal point in numeric literal"],
      ['{"a":1e}', "invalid character '}' in exponent of numeric literal"],
      ['{"a":"\\x"}', "invalid character 'x' in string escape code"],
      ['{"a":"\\u12g4"}', "invalid character 'g' in \\u hexadecimal character escape"],
      ['{"a":"\n"}', "invalid character '\\n' in string literal"],
      ["{} x", "invalid character 'x' after top-level value"],
      ["{'a':1}", "invalid character '\\'' looking for beginning of object key string"],
      ['{"a":1}\v', "invalid character '\\v' after top-level value"],
    ];
    for (const [input, want] of cases) {
      const r = parse(input);
      assert.ok("error" in r, JSON.stringify(input));
      assert.equal(r.error.message, want, JSON.stringify(input));
    }
  });

  it("refuses nesting deeper than Go's 10000 levels without exhausting the stack", () => {
    assert.ok("value" in parse(`${"[".repeat(10000)}${"]".repeat(10000)}`));
    const r = parse(`${"[".repeat(10001)}${"]".repeat(10001)}`);
    assert.ok("error" in r);
    assert.equal(r.error.message, "invalid character '[' exceeded max depth");
  });

  it("decodes escapes, surrogate pairs and lone surrogates as Go does", () => {
    const r = parse('["\\u0035\\u006d", "\\ud83d\\ude00", "\\ud83d", "a\\/b"]');
    assert.ok("value" in r);
    assert.deepEqual(toJs(r.value), ["5m", "😀", "\ufffd", "a/b"]);
  });

  it("keeps duplicate keys in document order with their offsets", () => {
    const r = parse('{"a":1,"A":2,"a":3}');
    assert.ok("value" in r && r.value.kind === "object");
    assert.deepEqual(
      r.value.entries.map((e) => [e.key, e.keyOffset]),
      [
        ["a", 1],
        ["A", 7],
        ["a", 13],
      ],
    );
  });

  it("reads every JSON document JSON.parse reads, to the same value", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = JSON.stringify(v);
        const r = parse(text);
        assert.ok("value" in r, text);
        assert.deepEqual(toJs(r.value), JSON.parse(text));
      }),
    );
  });

  it("never throws and never accepts what JSON.parse refuses (fuzz)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const r = parseGoJson(bytes);
        let ok = true;
        try {
          JSON.parse(new TextDecoder().decode(bytes));
        } catch {
          ok = false;
        }
        // both accept invalid UTF-8 inside strings (replaced by U+FFFD), so anything Go's
        // scanner accepts JSON.parse accepts too
        if ("value" in r) assert.ok(ok, Buffer.from(bytes).toString("hex"));
      }),
      { numRuns: 2000 },
    );
  });

  it("quotes bytes as Go's quoteChar", () => {
    assert.equal(goQuoteChar(0x27), "'\\''");
    assert.equal(goQuoteChar(0x22), "'\"'");
    assert.equal(goQuoteChar(0x01), "'\\x01'");
    assert.equal(goQuoteChar(0xc3), "'Ã'");
    assert.equal(goQuoteChar(0x85), "'\\u0085'");
  });
});
