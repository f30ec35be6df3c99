import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { decodeMasqConfig, defaultMasqConfig, syncMasqConfig } from "./config.ts";
import type { GoValue } from "./go-json.ts";
import { goFormatFloat, goYamlToJson, resolvePlainScalar } from "./go-yaml.ts";

function json(v: GoValue): string {
  switch (v.kind) {
    case "null":
      return "null";
    case "bool":
      return String(v.value);
    case "number":
      return v.text;
    case "string":
      return JSON.stringify(v.value);
    case "array":
      return `[${v.items.map(json).join(",")}]`;
    case "object":
      return `{${v.entries.map((e) => `${JSON.stringify(e.key)}:${json(e.value)}`).join(",")}}`;
  }
}

const toJson = (text: string): string => {
  const r = goYamlToJson(text);
  if ("error" in r) return `error: ${r.error.message}`;
  return json(r.value);
};

describe("goYamlToJson (sigs.k8s.io/yaml over yaml.v2)", () => {
  it("resolves plain scalars by YAML 1.1 rules and keeps quoted ones as strings", () => {
    assert.equal(
      toJson(
        "a: yes\nb: 'yes'\nc: ~\nd: 0x1F\ne: 0o17\nf: -0b101\ng: 1.5e3\nh: .5\ni: 1e400\nj: 2024-01-02\nk: 9223372036854775808\n",
      ),
      '{"a":true,"b":"yes","c":null,"d":31,"e":15,"f":-5,"g":1500,"h":0.5,"i":"1e400","j":"2024-01-02","k":9223372036854775808}',
    );
  });

  it("sorts keys as json.Marshal does and keeps the last duplicate", () => {
    assert.equal(toJson("b: 1\na: 2\nB: 3\nb: 4\n"), '{"B":3,"a":2,"b":4}');
  });

  it("turns non-string keys into strings as YAMLToJSON does", () => {
    assert.equal(toJson("1: a\ntrue: b\non: c\n"), '{"1":"a","true":"c"}');
  });

  it("applies merge keys, later explicit keys winning", () => {
    assert.equal(
      toJson("base: &b {p: 1, q: 2}\nm:\n  <<: *b\n  q: 3\n"),
      '{"base":{"p":1,"q":2},"m":{"p":1,"q":3}}',
    );
    // yaml.v2 resolves a plain `y` key to the boolean true, so YAMLToJSON names it "true"
    assert.equal(toJson("y: 1\n"), '{"true":1}');
  });

  it("reads only the first document", () => {
    assert.equal(toJson("a: 1\n---\nb: 2\n"), '{"a":1}');
  });

  it("refuses infinities, which json.Marshal cannot encode", () => {
    assert.equal(toJson("a: .inf\n"), "error: json: unsupported value: +Inf");
  });

  it("refuses alias bombs and self-containing anchors", () => {
    const bomb = ["a: &a [x, x, x, x, x, x, x, x, x]"]
      .concat(
        "bcdefgh"
          .split("")
          .map((k, i) => `${k}: &${k} [${Array(9).fill(`*${"abcdefgh"[i]}`).join(", ")}]`),
      )
      .join("\n");
    assert.equal(toJson(bomb), "error: yaml: document contains excessive aliasing");
    assert.equal(toJson("a: &a [*a]\n"), "error: yaml: anchor 'a' value contains itself");
  });

  it("words the agent's upstream YAML error", () => {
    assert.equal(toJson("*"), "error: yaml: did not find expected alphabetic or numeric character");
  });

  it("formats floats as encoding/json does", () => {
    assert.equal(goFormatFloat(1e21), "1e+21");
    assert.equal(goFormatFloat(1e-7), "1e-7");
    assert.equal(goFormatFloat(-0), "-0");
    assert.equal(goFormatFloat(64), "64");
  });

  it("resolves the YAML 1.1 booleans yaml.v2 knows and nothing more", () => {
    for (const t of ["y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"]) {
      assert.deepEqual(resolvePlainScalar(t), { kind: "bool", value: true }, t);
    }
    for (const t of ["yES", "tRUE", "oN"]) assert.equal(resolvePlainScalar(t).kind, "string", t);
  });
});

describe("decodeMasqConfig on arbitrary input (fuzz)", () => {
  const arbText = fc.oneof(
    fc.string({ maxLength: 80 }),
    fc
      .array(
        fc.constantFrom(
          "nonMasqueradeCIDRs:",
          "  - 10.0.0.0/8",
          "  - fc00::/7",
          "- ",
          "cidrLimit: ",
          "masqLinkLocal: yes",
          "resyncInterval: 5s",
          "{",
          "}",
          "[",
          "]",
          ":",
          "&a ",
          "*a",
          "<<: ",
          "\t",
          '"',
          "'",
          "#",
          "!!str ",
          "---",
          "|",
          ">",
        ),
        { maxLength: 12 },
      )
      .map((parts) => parts.join(Math.random() < 0.5 ? "\n" : " ")),
  );

  it("never throws, and either decodes or reports an error text", () => {
    fc.assert(
      fc.property(arbText, (text) => {
        const r = decodeMasqConfig(text);
        if ("error" in r) assert.ok(r.error.message.length > 0);
        else assert.ok(r.config.cidrLimit !== undefined);
        const s = syncMasqConfig(
          defaultMasqConfig(),
          { present: true, content: text },
          {
            enableIpv6: false,
            nomasqAllReservedRanges: false,
          },
        );
        assert.equal(s.applied, s.error === undefined);
      }),
      { numRuns: 3000 },
    );
  });
});
