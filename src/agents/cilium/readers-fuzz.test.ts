/**
 * Cilium's readers under fuzz, as evidence/readers-fuzz.test.ts does for the node files: random
 * bytes, mutated real outputs, every prefix, huge lines. None may throw; every diagnostic names
 * the file and a line inside the input, and long lines are cited without their text.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import { mutatedText } from "../../lab/test-helpers/text-mutations.ts";
import type { Diagnostic, Parsed } from "../../model/types.ts";
import { readCiliumConfig } from "./config.ts";
import { readEgressNatPolicies } from "./egress-nat-policy.ts";
import { readCiliumIpMasqIntent } from "./ip-masq-agent.ts";
import { readIpMasqList } from "./ipmasq-list.ts";
import { readCiliumStatus } from "./status.ts";

const FILE = "fuzz/input.txt";
const fixture = (f: string) => readFileSync(new URL(`fixtures/${f}`, import.meta.url), "utf8");

const OBJECTS = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cilium-config
  namespace: kube-system
data:
  enable-bpf-masquerade: "true"
  enable-ip-masq-agent: "true"
  ipv4-native-routing-cidr: 10.0.0.0/16
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ip-masq-agent
  namespace: kube-system
data:
  config: |
    nonMasqueradeCIDRs:
    - 10.20.0.0/16
    masqLinkLocal: false
---
apiVersion: networking.gke.io/v1
kind: EgressNATPolicy
metadata:
  name: default
spec:
  action: NoSNAT
  destinations:
  - cidr: 10.0.0.0/8
`;

/** The object readers over whatever readKubeObjects makes of the text. */
function readObjects(text: string, file: string): Parsed<unknown> {
  const objs = readKubeObjects(text, file).value;
  return {
    value: undefined,
    diagnostics: [
      ...readCiliumConfig(objs).diagnostics,
      ...readCiliumIpMasqIntent(objs).diagnostics,
      ...readEgressNatPolicies(objs).diagnostics,
    ],
  };
}

const readers = [
  {
    name: "readIpMasqList",
    read: readIpMasqList,
    corpus: [fixture("ipmasq-list-docs.txt"), fixture("ipmasq-list-json.txt")],
  },
  {
    name: "readCiliumStatus",
    read: readCiliumStatus,
    corpus: [fixture("status-bpf-ip-masq-agent.txt"), fixture("status-iptables.txt")],
  },
  { name: "cilium object readers", read: readObjects, corpus: [OBJECTS] },
] as const;

function check(text: string, diagnostics: readonly Diagnostic[]): void {
  const lines = text.split("\n").length;
  for (const d of diagnostics) {
    assert.match(d.code, /^[A-Z][A-Z0-9_]*$/);
    assert.ok(d.message.length > 0);
    if (d.severity === "info") continue;
    assert.ok(d.source, d.message);
    assert.equal(d.source.file, FILE);
    assert.ok(d.source.line >= 1 && d.source.line <= lines, `line ${d.source.line} of ${lines}`);
    assert.ok((d.source.text?.length ?? 0) <= 500);
  }
}

const randomText = fc.oneof(
  fc.string({ maxLength: 400 }),
  fc.uint8Array({ maxLength: 400 }).map((b) => Buffer.from(b).toString("latin1")),
  fc
    .array(
      fc.constantFrom(
        "Masquerading:",
        "BPF",
        "(ip-masq-agent)",
        "[eth0]",
        "IPTables",
        "[IPv4:",
        "Enabled,",
        "IPv6:",
        "Disabled]",
        "10.0.0.0/8",
        "IP PREFIX/ADDRESS",
        "No entries found.",
        "[",
        "]",
        '"',
        ",",
        "\n",
        " ",
        "\t",
      ),
      { maxLength: 60 },
    )
    .map((p) => p.join(" ")),
);

for (const r of readers) {
  describe(`${r.name} under fuzz`, () => {
    it("never throws on random and mutated input", { timeout: 60_000 }, () => {
      const mutated = mutatedText(r.corpus, ["\n", "/", ":", "[", "]", "-", "\t", '"', " "], 40);
      fc.assert(
        fc.property(fc.oneof(randomText, mutated), (text) =>
          check(text, r.read(text, FILE).diagnostics),
        ),
        { numRuns: 300 },
      );
    });
    it("every prefix, a huge line, many lines", { timeout: 60_000 }, () => {
      const text = r.corpus[0]!;
      for (let i = 0; i <= text.length; i += 5)
        check(text.slice(0, i), r.read(text.slice(0, i), FILE).diagnostics);
      const huge = "x".repeat(1_000_000);
      for (const t of [huge, `Masquerading: ${huge}`, `${text}\n${huge}`, "\n".repeat(200_000)]) {
        check(t, r.read(t, FILE).diagnostics);
      }
    });
  });
}
