/**
 * @module agents/wireguard/readers-fuzz.test — the WireGuard readers get random text, truncated and
 * mutated real inputs (fixtures/), and huge lines: they must not throw, must finish, must never
 * let a private key's value into a diagnostic, and every warning must cite a line of the input.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { mutatedText } from "../../lab/test-helpers/text-mutations.ts";
import type { Diagnostic, Parsed } from "../../model/types.ts";
import { readAccessServerValues } from "./access-server-values.ts";
import { parseWgConfig } from "./config.ts";
import { hookRules } from "./hooks.ts";
import { readWgShow } from "./show.ts";

const FILE = "fuzz/wg.txt";
const fixture = (name: string) =>
  readFileSync(new URL(`fixtures/${name}`, import.meta.url), "utf8");
const SECRET = "c2VjcmV0LWtleS12YWx1ZS1uZXZlci1wcmludGVk";

interface Reader {
  readonly name: string;
  readonly read: (text: string, file: string) => Parsed<unknown>;
  readonly corpus: readonly string[];
}

const readers: Reader[] = [
  {
    name: "parseWgConfig (+ hookRules)",
    read: (t, f) => {
      const p = parseWgConfig(t, f);
      hookRules(p.value.hooks);
      return p;
    },
    corpus: [
      fixture("wg0.conf").replace(/^PrivateKey = .*$/m, `PrivateKey = ${SECRET}`),
      fixture("wg-showconf.txt"),
    ],
  },
  {
    name: "readWgShow",
    read: (t, f) => readWgShow(t, f),
    corpus: [fixture("wg-show-up.txt"), fixture("wg-show-no-handshake.txt")],
  },
  {
    name: "readAccessServerValues",
    read: (t, f) => readAccessServerValues(t, f),
    corpus: [
      "config:\n  vpn:\n    cidr: 10.44.0.0/24\n    allowedIPs: [10.96.0.0/12]\n    nat44: true\n",
    ],
  },
];

function check(text: string, diagnostics: readonly Diagnostic[]): void {
  const inputLines = text.split("\n");
  const lines = inputLines.length;
  for (const d of diagnostics) {
    assert.match(d.code, /^[A-Z][A-Z0-9_]*$/);
    // a line that still names a private key never shows its value
    const named = inputLines.some(
      (l) => /private\s*key\s*[=:]\s*\S/i.test(l) && l.includes(SECRET),
    );
    if (named) {
      assert.ok(!d.message.includes(SECRET) && !d.source?.text?.includes(SECRET), "a key leaked");
    }
    if (d.severity !== "info") {
      assert.ok(d.source, `no source: ${d.message}`);
      assert.equal(d.source.file, FILE);
      assert.ok(d.source.line >= 1 && d.source.line <= lines, `line ${d.source.line} of ${lines}`);
    }
  }
}

const randomText = fc.oneof(
  fc.string({ maxLength: 400 }),
  fc
    .array(
      fc.constantFrom(
        "[Interface]",
        "[Peer]",
        "Address =",
        "AllowedIPs =",
        "PostUp = iptables -t nat -A POSTROUTING",
        "-s",
        "!",
        "%i",
        ";",
        "interface:",
        "peer:",
        "latest handshake:",
        "transfer:",
        "10.8.0.1/24",
        ",",
        "\n",
        " ",
        "config:",
        "  vpn:",
        "cidr:",
        `PrivateKey = ${SECRET}`,
      ),
      { maxLength: 80 },
    )
    .map((p) => p.join(" ")),
);

for (const r of readers) {
  describe(`${r.name} under fuzz`, () => {
    it("never throws on random text, and cites lines inside the input", { timeout: 60_000 }, () => {
      fc.assert(
        fc.property(randomText, (text) => check(text, r.read(text, FILE).diagnostics)),
        { numRuns: 300 },
      );
    });

    it("never throws on truncated and mutated real input", { timeout: 60_000 }, () => {
      const mutated = mutatedText(r.corpus, ["\n", "=", "/", ":", "[", ";", ",", "  "], 40);
      fc.assert(
        fc.property(mutated, (text) => check(text, r.read(text, FILE).diagnostics)),
        { numRuns: 300 },
      );
    });

    it("finishes on a huge line and on many lines", { timeout: 60_000 }, () => {
      for (const text of ["x".repeat(1_000_000), r.corpus[0]!.repeat(300), "\n".repeat(200_000)]) {
        check(text, r.read(text, FILE).diagnostics);
      }
    });
  });
}
