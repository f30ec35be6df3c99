/**
 * The iptables -L reader and the entry point that tells the forms apart get random text, truncated
 * and mutated real listings, and huge lines: they must not throw, must finish (each test has a
 * timeout), and every diagnostic must name the file and a line inside the input.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { mutatedText } from "../lab/test-helpers/text-mutations.ts";
import type { Diagnostic } from "../model/types.ts";
import { parseIptablesList } from "./list-parser.ts";
import { readIptablesText } from "./read-iptables-text.ts";

const FILE = "fuzz/iptables-save.txt";
const dir = new URL("fixtures/list/", import.meta.url);
const corpus = readdirSync(dir)
  .filter((f) => f.endsWith(".txt") && !f.endsWith("-rules.txt"))
  .map((f) => readFileSync(new URL(f, dir), "utf8"));
const runs = Number(process.env["PODPATH_FUZZ_RUNS"] ?? 300);

function checkDiagnostics(text: string, diagnostics: readonly Diagnostic[], cited = true): void {
  const lines = text.split("\n").length;
  for (const d of diagnostics) {
    assert.ok(d.message.length > 0);
    assert.match(d.code, /^[A-Z][A-Z0-9_]*$/);
    if (d.severity === "info") continue;
    assert.ok(d.source, `no source: ${d.message}`);
    assert.equal(d.source.file, FILE);
    assert.ok(d.source.line >= 1 && d.source.line <= lines, `line ${d.source.line} of ${lines}`);
    if (cited) assert.ok((d.source.text?.length ?? 0) <= 500, "long lines are cited without text");
  }
}

const mutated = mutatedText(
  corpus,
  ["\n", "/*", "*/", " ", "!", ":", "Chain ", "# iptables -L\n", "\t", "\r\n"],
  60,
);

const words = fc
  .array(
    fc.constantFrom(
      "Chain",
      "POSTROUTING",
      "(policy ACCEPT)",
      "(1 references)",
      "target",
      "prot",
      "opt",
      "source",
      "destination",
      "MASQUERADE",
      "all",
      "--",
      "0.0.0.0/0",
      "anywhere",
      "/*",
      "*/",
      "tcp",
      "dpt:80",
      "to:1.2.3.4",
      "mark match",
      "!",
      "\n",
      "# iptables -t nat -L -n",
      "-A",
      "*nat",
      "COMMIT",
    ),
    { maxLength: 120 },
  )
  .map((p) => p.join(" "));

const readers = [
  {
    name: "parseIptablesList",
    read: (t: string) => parseIptablesList(t, FILE).diagnostics,
    cited: true,
  },
  {
    name: "readIptablesText",
    read: (t: string) => readIptablesText(t, FILE, { family: 4 }).diagnostics,
    cited: false,
  },
];

for (const r of readers) {
  describe(`${r.name} under fuzz`, () => {
    it("never throws on random text and listing words", { timeout: 60_000 }, () => {
      fc.assert(
        fc.property(fc.oneof(fc.string({ maxLength: 400 }), words), (text) => {
          checkDiagnostics(text, r.read(text), r.cited);
        }),
        { numRuns: runs },
      );
    });

    it("never throws on truncated and mutated real listings", { timeout: 60_000 }, () => {
      fc.assert(
        fc.property(mutated, (text) => checkDiagnostics(text, r.read(text), r.cited)),
        { numRuns: runs },
      );
    });

    it("reads every prefix of a real listing", { timeout: 60_000 }, () => {
      const text = corpus.find((c) => c.startsWith("#") && c.includes("Chain "))!.slice(0, 3000);
      for (let i = 0; i <= text.length; i += 7)
        checkDiagnostics(text.slice(0, i), r.read(text.slice(0, i)), r.cited);
    });

    it("finishes on a huge line, many comments and many lines", { timeout: 60_000 }, () => {
      const rule = "MASQUERADE  all  --  anywhere             anywhere             ";
      for (const text of [
        "x".repeat(2_000_000),
        `Chain POSTROUTING (policy ACCEPT)\ntarget prot opt source destination\n${rule}${"/* a */ ".repeat(50_000)}`,
        `Chain POSTROUTING (policy ACCEPT)\ntarget prot opt source destination\n${rule}/* ${"*/ ".repeat(50_000)}`,
        (corpus[0] ?? "").repeat(100),
        "\n".repeat(300_000),
        "Chain X (1 references)\n".repeat(20_000),
      ]) {
        checkDiagnostics(text, r.read(text), r.cited);
      }
    });
  });
}
