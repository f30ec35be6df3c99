/**
 * @module agents/strongswan/readers-fuzz.test — every strongSwan reader gets random bytes,
 * truncated and mutated real inputs, and huge lines: it must not throw, must finish, and every
 * diagnostic must name the file, a line inside the input, and what was expected.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { mutatedText } from "../../lab/test-helpers/text-mutations.ts";
import type { Diagnostic, Parsed } from "../../model/types.ts";
import { parseIpsecConf } from "./ipsec-conf.ts";
import { parseSaStatus } from "./sa-status.ts";
import { parseSwanctlConf } from "./swanctl-conf.ts";
import { parseXfrmPolicy, parseXfrmState } from "./xfrm.ts";

const FILE = "fuzz/input.txt";
const dir = new URL("fixtures/", import.meta.url);
const samples = (prefix: string) =>
  readdirSync(dir)
    .filter((f) => f.startsWith(prefix))
    .map((f) => readFileSync(new URL(f, dir), "utf8"));

const STATE = `src 10.244.1.10 dst 192.0.2.10
\tproto esp spi 0xc1a2b3c4 reqid 1 mode tunnel
\treplay-window 0 flag af-unspec
\tencap type espinudp sport 4500 dport 4500 addr 0.0.0.0
\tsel src 0.0.0.0/0 dst 0.0.0.0/0
`;

interface Reader {
  readonly name: string;
  readonly read: (text: string, file: string) => Parsed<unknown>;
  readonly corpus: readonly string[];
}

const readers: Reader[] = [
  { name: "parseIpsecConf", read: (t, f) => parseIpsecConf(t, f), corpus: samples("ipsec.conf") },
  {
    name: "parseSwanctlConf",
    read: (t, f) => parseSwanctlConf(t, f),
    corpus: samples("swanctl.conf"),
  },
  {
    name: "parseSaStatus",
    read: (t, f) => parseSaStatus(t, f),
    corpus: [...samples("statusall"), ...samples("list-sas")],
  },
  {
    name: "parseXfrmPolicy",
    read: (t, f) => parseXfrmPolicy(t, f),
    corpus: samples("xfrm-policy"),
  },
  { name: "parseXfrmState", read: (t, f) => parseXfrmState(t, f), corpus: [STATE] },
];

function checkDiagnostics(text: string, diagnostics: readonly Diagnostic[]): void {
  const lines = text.split("\n").length;
  for (const d of diagnostics) {
    assert.ok(d.message.length > 0);
    assert.match(d.code, /^[A-Z][A-Z0-9_]*$/);
    if (d.severity !== "info") {
      assert.match(d.message, /expected/, d.message);
      assert.ok(d.source, `no source: ${d.message}`);
      assert.equal(d.source.file, FILE);
      assert.ok(d.source.line >= 1 && d.source.line <= lines, `line ${d.source.line} of ${lines}`);
    }
    assert.ok((d.source?.text?.length ?? 0) <= 500);
  }
}

const mutated = (corpus: readonly string[]) =>
  mutatedText(corpus, ["\n", "=", "/", "{", "}", "[", "]", "#", '"', ",", "===", "\t", "  "], 40);

const randomText = fc.oneof(
  fc.string({ maxLength: 400 }),
  fc.uint8Array({ maxLength: 400 }).map((b) => Buffer.from(b).toString("latin1")),
  fc
    .array(
      fc.constantFrom(
        "conn",
        "also=",
        "%default",
        "leftsubnet=",
        "rightsourceip=",
        "{",
        "}",
        "=",
        "local_ts",
        "src",
        "dst",
        "tmpl",
        "rw{1}:",
        "rw[1]:",
        "===",
        "10.0.0.0/8",
        "\n",
        "\n  ",
        " ",
        '"',
      ),
      { maxLength: 80 },
    )
    .map((p) => p.join(" ")),
);

for (const r of readers) {
  describe(`${r.name} under fuzz`, () => {
    it("never throws on random text, and cites lines inside the input", { timeout: 60_000 }, () => {
      fc.assert(
        fc.property(randomText, (text) => checkDiagnostics(text, r.read(text, FILE).diagnostics)),
        { numRuns: 300 },
      );
    });
    it("never throws on truncated and mutated real input", { timeout: 60_000 }, () => {
      fc.assert(
        fc.property(mutated(r.corpus), (text) =>
          checkDiagnostics(text, r.read(text, FILE).diagnostics),
        ),
        { numRuns: 300 },
      );
    });
    it("finishes on a huge line and on many lines", { timeout: 60_000 }, () => {
      for (const text of [
        "x".repeat(2_000_000),
        `conn a\n  leftsubnet=${"1".repeat(1_000_000)}\n`,
        (r.corpus[0] ?? "").repeat(200),
        "{".repeat(100_000),
        "\n".repeat(300_000),
      ]) {
        checkDiagnostics(text, r.read(text, FILE).diagnostics);
      }
    });
  });
}
