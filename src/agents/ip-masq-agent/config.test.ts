import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  decodeMasqConfig,
  defaultMasqConfig,
  fileLocator,
  type MasqConfig,
  RESERVED_NON_MASQ_CIDRS,
  renderMasqConfigJson,
  syncMasqConfig,
  validateMasqConfig,
} from "./config.ts";
import { parseGoDuration } from "./go-duration.ts";
import { loadVectors, type VectorConfig } from "./test-helpers/vectors.ts";

const vectors = loadVectors();

/** A vector's config object, decoded the way the agent decodes a JSON file. */
function configOf(v: VectorConfig): MasqConfig {
  const r = decodeMasqConfig(JSON.stringify(v));
  if ("error" in r) throw new Error(`vector config does not decode: ${r.error.message}`);
  return r.config;
}

function assertConfigEquals(actual: MasqConfig, expected: VectorConfig, id: string): void {
  assert.deepEqual(
    actual.nonMasqueradeCIDRs === null ? null : actual.nonMasqueradeCIDRs.map((e) => e.text),
    expected.nonMasqueradeCIDRs,
    `${id}: nonMasqueradeCIDRs`,
  );
  assert.equal(actual.cidrLimit, BigInt(expected.cidrLimit!), `${id}: cidrLimit`);
  assert.equal(actual.masqLinkLocal, expected.masqLinkLocal, `${id}: masqLinkLocal`);
  assert.equal(actual.masqLinkLocalIPv6, expected.masqLinkLocalIPv6, `${id}: masqLinkLocalIPv6`);
  const d = parseGoDuration(expected.resyncInterval!);
  assert.ok("ns" in d);
  assert.equal(actual.resyncIntervalNs, d.ns, `${id}: resyncInterval`);
}

describe("validateMasqConfig (upstream TestConfigValidate + derived vectors)", () => {
  for (const v of vectors.validate_config) {
    it(`${v.id}: ${v.expected_error ?? "accepted"}`, () => {
      const err = validateMasqConfig(configOf(v.config), {
        enableIpv6: v.flags?.["enable-ipv6"] ?? false,
      });
      assert.equal(err?.message ?? null, v.expected_error);
    });
  }
});

describe("syncMasqConfig (upstream TestSyncConfig + derived vectors)", () => {
  for (const v of vectors.sync_config) {
    it(`${v.id}: ${v.expected_error ?? "applied"}`, () => {
      const previous = configOf(v.previous_config);
      const out = syncMasqConfig(
        previous,
        v.fs === "not_exist" ? { present: false } : { present: true, content: v.file_content! },
        {
          enableIpv6: v.flags["enable-ipv6"] ?? false,
          nomasqAllReservedRanges: v.flags["nomasq-all-reserved-ranges"] ?? false,
        },
      );
      assert.equal(out.error?.message ?? null, v.expected_error);
      assert.equal(out.applied, v.expected_error === null);
      assertConfigEquals(out.config, v.expected_config, v.id);
      if (v.expected_error !== null)
        assert.equal(out.config, previous, "keeps the previous config");
    });
  }
});

describe("decodeMasqConfig", () => {
  it("reads YAML 1.1 booleans the way yaml.v2 does", () => {
    for (const [text, want] of [
      ["yes", true],
      ["On", true],
      ["y", true],
      ["NO", false],
      ["off", false],
      ["n", false],
    ] as const) {
      const r = decodeMasqConfig(`masqLinkLocal: ${text}\n`);
      assert.ok("config" in r, text);
      assert.equal(r.config.masqLinkLocal, want, text);
    }
  });

  it("rejects a quoted boolean with Go's type error", () => {
    const r = decodeMasqConfig(`masqLinkLocal: "yes"\n`);
    assert.ok("error" in r);
    assert.equal(
      r.error.message,
      "json: cannot unmarshal string into Go struct field MasqConfig.masqLinkLocal of type bool",
    );
  });

  it("reads YAML 1.1 integers: hex, octal, underscores", () => {
    for (const [text, want] of [
      ["0x10", 16n],
      ["010", 8n],
      ["1_000", 1000n],
      ["+7", 7n],
      ["08", 8n],
    ] as const) {
      const r = decodeMasqConfig(`cidrLimit: ${text}\n`);
      assert.ok("config" in r, text);
      assert.equal(r.config.cidrLimit, want, text);
    }
  });

  it("rejects a fractional cidrLimit naming the number", () => {
    const r = decodeMasqConfig("cidrLimit: 1.5\n");
    assert.ok("error" in r);
    assert.equal(
      r.error.message,
      "json: cannot unmarshal number 1.5 into Go struct field MasqConfig.cidrLimit of type int",
    );
  });

  it("turns an empty resyncInterval into Go's invalid duration error", () => {
    const r = decodeMasqConfig("resyncInterval:\n");
    assert.ok("error" in r);
    assert.equal(r.error.message, 'time: invalid duration ""');
  });

  it("reports a missing duration unit as time.ParseDuration does", () => {
    const r = decodeMasqConfig('{"resyncInterval": "60"}');
    assert.ok("error" in r);
    assert.equal(r.error.message, 'time: missing unit in duration "60"');
  });

  it("applies duplicate JSON keys in order, the last one winning", () => {
    const r = decodeMasqConfig('{"masqLinkLocal": true, "MASQLINKLOCAL": false}');
    assert.ok("config" in r);
    assert.equal(r.config.masqLinkLocal, false);
  });

  it("keeps the default entry where a list element is null, as encoding/json does (the real agent agrees: test/components)", () => {
    const texts = (text: string, nomasqAllReservedRanges = false) => {
      const r = decodeMasqConfig(text, { nomasqAllReservedRanges });
      assert.ok("config" in r);
      return r.config.nonMasqueradeCIDRs?.map((e) => e.text);
    };
    assert.deepEqual(texts("nonMasqueradeCIDRs: [192.168.0.0/16, null]\n"), [
      "192.168.0.0/16",
      "172.16.0.0/12",
    ]);
    assert.deepEqual(texts("nonMasqueradeCIDRs: [a, b, c, null]\n"), ["a", "b", "c", ""]);
    assert.deepEqual(
      texts("nonMasqueradeCIDRs: [null, null, null, null]\n", true),
      RESERVED_NON_MASQ_CIDRS.slice(0, 4),
    );
  });

  it("refuses a top-level list with Go's type error", () => {
    const r = decodeMasqConfig("- 10.0.0.0/8\n");
    assert.ok("error" in r);
    assert.equal(
      r.error.message,
      "json: cannot unmarshal array into Go value of type main.MasqConfig",
    );
  });

  it("keeps the file line of each nonMasqueradeCIDRs entry", () => {
    const text = "# comment\nnonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 172.16.0.0/12\n";
    const r = decodeMasqConfig(text, { locate: fileLocator("cfg.yaml", text) });
    assert.ok("config" in r);
    const refs = r.config.nonMasqueradeCIDRs!.map((e) => [e.source?.line, e.source?.text]);
    assert.deepEqual(refs, [
      [3, "  - 10.0.0.0/8"],
      [4, "  - 172.16.0.0/12"],
    ]);
    assert.equal(r.config.sources.nonMasqueradeCIDRs?.line, 2);
  });

  it("keeps JSON entry lines too", () => {
    const text = '{\n  "nonMasqueradeCIDRs": [\n    "10.0.0.0/8",\n    "fc00::/7"\n  ]\n}\n';
    const r = decodeMasqConfig(text, { locate: fileLocator("cfg.json", text) });
    assert.ok("config" in r);
    assert.deepEqual(
      r.config.nonMasqueradeCIDRs!.map((e) => e.source?.line),
      [3, 4],
    );
  });

  it("names the line of a YAML syntax error as yaml.v2 does", () => {
    const r = decodeMasqConfig("nonMasqueradeCIDRs:\n  - 10.0.0.0/8\nmasqLinkLocal: [true\n");
    assert.ok("error" in r);
    assert.match(r.error.message, /^yaml: line \d+: did not find expected ',' or ']'$/);
  });
});

describe("defaultMasqConfig", () => {
  it("uses the reserved ranges with --nomasq-all-reserved-ranges", () => {
    assert.deepEqual(
      defaultMasqConfig(true).nonMasqueradeCIDRs!.map((e) => e.text),
      [...RESERVED_NON_MASQ_CIDRS],
    );
  });
});

describe("renderMasqConfigJson", () => {
  it("prints the agent's Using-config JSON: struct order, Go duration text", () => {
    assert.equal(
      renderMasqConfigJson(defaultMasqConfig()),
      '{"nonMasqueradeCIDRs":["10.0.0.0/8","172.16.0.0/12","192.168.0.0/16"],"cidrLimit":64,"masqLinkLocal":false,"masqLinkLocalIPv6":false,"resyncInterval":"1m0s"}',
    );
  });

  it("prints a nil list as null", () => {
    const r = decodeMasqConfig("nonMasqueradeCIDRs:\n");
    assert.ok("config" in r);
    assert.match(renderMasqConfigJson(r.config), /^\{"nonMasqueradeCIDRs":null,/);
  });
});
