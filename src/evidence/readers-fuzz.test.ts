/**
 * @module evidence/readers-fuzz.test — every reader of this folder gets random bytes, truncated and
 * mutated real inputs, and huge lines: it must not throw, must finish (each test has a timeout),
 * and every diagnostic must name the file, a line inside the input, and what was expected.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { mutatedText } from "../lab/test-helpers/text-mutations.ts";
import type { Diagnostic, Parsed } from "../model/types.ts";
import { readCaptureMeta } from "./capture-meta.ts";
import { readConntrack } from "./conntrack.ts";
import { readIpAddr } from "./ip-addr.ts";
import { readIpRoute } from "./ip-route.ts";
import { readIpRule } from "./ip-rule.ts";
import { readKubeObjects } from "./kube-objects.ts";
import { readRemoteSites } from "./remote-site.ts";
import { readSysctl } from "./sysctl.ts";

const FILE = "fuzz/input.txt";
const dir = new URL("fixtures/", import.meta.url);
const kubeDir = new URL("fixtures/kube/", import.meta.url);
const read = (base: URL, f: string) => readFileSync(new URL(f, base), "utf8");
const samples = (prefix: string, base = dir) =>
  readdirSync(base, { withFileTypes: true })
    .filter((f) => f.isFile() && f.name.startsWith(prefix))
    .map((f) => read(base, f.name));

const REMOTE = `kind: RemoteSite
name: onprem-dc1
prefixes: [10.20.0.0/16]
routesBack: [10.128.0.0/20]
vpn:
  kind: cloud-vpn-classic
  localTrafficSelectors: [10.128.0.0/20]
  remoteTrafficSelectors: [10.20.0.0/16]
allowlists:
  - name: db-firewall
    sources: [10.128.0.0/20]
    destinations: [10.20.30.40/32]
    ports: [tcp/5432]
`;

interface Reader {
  readonly name: string;
  readonly read: (text: string, file: string) => Parsed<unknown>;
  readonly corpus: readonly string[];
}

const readers: Reader[] = [
  {
    name: "readSysctl",
    read: (t, f) => readSysctl(t, f),
    corpus: [...samples("sysctl"), ...samples("proc-ip")],
  },
  {
    name: "readIpRoute",
    read: (t, f) => readIpRoute(t, f),
    corpus: samples("ip-").filter((s) => !s.startsWith("[")),
  },
  { name: "readIpAddr", read: (t, f) => readIpAddr(t, f), corpus: samples("ip-") },
  {
    name: "readIpRule",
    read: (t, f) => readIpRule(t, f),
    corpus: samples("rules", new URL("fixtures/ip-rule/", import.meta.url)),
  },
  {
    name: "readConntrack",
    read: (t, f) => readConntrack(t, f),
    corpus: [...samples("conntrack"), ...samples("proc-nf")],
  },
  {
    name: "readKubeObjects",
    read: (t, f) => readKubeObjects(t, f),
    corpus: readdirSync(kubeDir).map((f) => read(kubeDir, f).slice(0, 20_000)),
  },
  { name: "readRemoteSites", read: (t, f) => readRemoteSites(t, f), corpus: [REMOTE] },
  {
    name: "readCaptureMeta",
    read: (t, f) => readCaptureMeta(t, f),
    corpus: [
      "point: pod/vpn/openvpn-0\nphase: before\ntime: 2026-11-29T14:05:00Z\ncommand: tcpdump -ni any\n",
    ],
  },
];

function checkDiagnostics(text: string, diagnostics: readonly Diagnostic[]): void {
  const lines = text.split("\n").length;
  for (const d of diagnostics) {
    assert.ok(d.message.length > 0);
    assert.ok(["error", "warning", "info"].includes(d.severity));
    assert.match(d.code, /^[A-Z][A-Z0-9_]*$/);
    if (d.severity !== "info") {
      assert.ok(d.source, `no source: ${d.message}`);
      assert.equal(d.source.file, FILE);
      assert.ok(
        d.source.line >= 1 && d.source.line <= lines,
        `line ${d.source.line} of ${lines}: ${d.message}`,
      );
    }
  }
}

/** Text mutations that keep real structure around: cut, duplicate, splice bytes in. */
const mutated = (corpus: readonly string[]) =>
  mutatedText(corpus, ["\n", "=", "/", ":", "[", "{", "-", "\\", "\t", '"', "  ", "\r\n"], 40);

const randomText = fc.oneof(
  fc.string({ maxLength: 400 }),
  fc.string({ unit: "binary", maxLength: 400 }),
  fc.uint8Array({ maxLength: 400 }).map((b) => Buffer.from(b).toString("latin1")),
  fc
    .array(
      fc.constantFrom(
        "default",
        "via",
        "dev",
        "src=",
        "dst=",
        "inet",
        "kind:",
        "- ",
        "= ",
        "10.0.0.1",
        "::1",
        "/24",
        "\n",
        " ",
        "[",
        "]",
        "{",
        "}",
        "&a",
        "*a",
      ),
      { maxLength: 80 },
    )
    .map((p) => p.join(" ")),
);

for (const r of readers) {
  describe(`${r.name} under fuzz`, () => {
    it("never throws on random text, and cites lines inside the input", { timeout: 60_000 }, () => {
      fc.assert(
        fc.property(randomText, (text) => {
          const p = r.read(text, FILE);
          checkDiagnostics(text, p.diagnostics);
        }),
        { numRuns: 400 },
      );
    });

    it("never throws on truncated and mutated real input", { timeout: 60_000 }, () => {
      fc.assert(
        fc.property(mutated(r.corpus), (text) => {
          const p = r.read(text, FILE);
          checkDiagnostics(text, p.diagnostics);
        }),
        { numRuns: 400 },
      );
    });

    it("reads every prefix of a real input without throwing", { timeout: 60_000 }, () => {
      const text = r.corpus[0]!.slice(0, 3000);
      for (let i = 0; i <= text.length; i += 7)
        checkDiagnostics(text.slice(0, i), r.read(text.slice(0, i), FILE).diagnostics);
    });

    it("finishes on a huge line and on many lines", { timeout: 60_000 }, () => {
      const huge = "x".repeat(2_000_000);
      for (const text of [
        huge,
        `${huge}\n${r.corpus[0]}`,
        (r.corpus[0] ?? "").repeat(200),
        "[".repeat(100_000),
        "\n".repeat(500_000),
        "- ".repeat(100_000),
      ]) {
        const p = r.read(text, FILE);
        checkDiagnostics(text, p.diagnostics);
        // Long lines are cited without their text.
        for (const d of p.diagnostics) assert.ok((d.source?.text?.length ?? 0) <= 500);
      }
    });
  });
}
