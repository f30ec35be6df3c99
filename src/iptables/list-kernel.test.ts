/**
 * Every listing iptables prints, read back: rule sets (a kube-proxy node with ip-masq-agent, the
 * ip-masq-agent's IPv6 chain, the reference node dumps) are loaded with the real iptables-restore
 * (nf_tables and legacy variants) in a throw-away network namespace, printed in every form people
 * paste (`-L` with and without `-n`, `-v`, `-x`, `--line-numbers`, one chain, `-S`, iptables-save
 * with and without `-c`, with and without a prompt line) and read with readIptablesText. Each
 * reading must give the rules the iptables-save reading gives wherever the form shows them, hide
 * exactly what the form does not show, and never lead the nat evaluator to a different decided
 * answer than the iptables-save reading.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { kernelSkip } from "../lab/kernel-guard.ts";
import type { Family } from "../net/cidr.ts";
import type { TableName } from "./dump.ts";
import { BUILTIN_CHAINS } from "./dump.ts";
import { readIptablesText } from "./read-iptables-text.ts";
import { renderDump, renderRule } from "./render.ts";
import { parseIptablesSave } from "./save-parser.ts";
import { hasCommand, installedVariants, iptablesNamespace } from "./test-helpers/iptables-netns.ts";
import { compare, type Form, sameAnswers } from "./test-helpers/list-compare.ts";

const skip = kernelSkip();
const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");

/** A reference dump (iptables -S, a grep, a cut save) as iptables-restore input. */
function restoreInput(name: string): string {
  return renderDump(parseIptablesSave(fixture(name), name, { table: "nat" }).value);
}

interface RuleSet {
  readonly name: string;
  readonly family: Family;
  readonly text: string;
}

const RULE_SETS: readonly RuleSet[] = [
  { name: "kube-proxy", family: 4, text: fixture("list/kube-proxy-rules.txt") },
  { name: "ip-masq-agent v6", family: 6, text: fixture("list/ip-masq-agent6-rules.txt") },
  {
    name: "GKE Dataplane V2",
    family: 4,
    text: restoreInput("gke-dpv2-1.29_iptables-S-nat_IP-MASQ-default-snat_cilium.txt"),
  },
  {
    name: "GKE kubenet",
    family: 4,
    text: restoreInput("gke-legacy-kubenet_iptables-S-nat_kube-proxy_kubenet-snat.txt"),
  },
  {
    name: "k8s#64212",
    family: 4,
    text: restoreInput("k8s-issue-64212_gke-1.10_IP-MASQ-plus-IP-MASQ-AGENT_grep.txt"),
  },
  {
    name: "kubeadm docker",
    family: 4,
    text: restoreInput("kubeadm-docker_k8s-pr-75893_iptables-save-nat-header.txt"),
  },
];

function formsFor(table: TableName, userChain: string | undefined): Form[] {
  const l = (extra: string[], numeric: boolean, verbose: boolean, prompt: boolean): Form => ({
    args: ["-t", table, "-L", ...extra],
    kind: "list",
    numeric,
    verbose,
    prompt,
  });
  const hook = table === "nat" ? "POSTROUTING" : "FORWARD";
  const forms: Form[] = [
    l([], false, false, false),
    l(["-n"], true, false, true),
    l(["-n", "-v"], true, true, false),
    l(["-n", "-v", "-x"], true, true, true),
    l(["--line-numbers"], false, false, true),
    l(["-n", "-v", "--line-numbers"], true, true, false),
    l(["-v"], false, true, true),
    {
      args: ["-t", table, "-L", hook, "-n", "-v"],
      kind: "list",
      numeric: true,
      verbose: true,
      chain: hook,
      prompt: true,
    },
    { args: ["-t", table, "-S"], kind: "spec", numeric: true, verbose: true, prompt: true },
    {
      args: ["-t", table, "-S", hook],
      kind: "spec",
      numeric: true,
      verbose: true,
      chain: hook,
      prompt: true,
    },
  ];
  if (userChain !== undefined) {
    forms.push({
      args: ["-t", table, "-L", userChain, "-n", "--line-numbers"],
      kind: "list",
      numeric: true,
      verbose: false,
      chain: userChain,
      prompt: true,
    });
  }
  return forms;
}

describe("readIptablesText on every form iptables prints", { skip }, () => {
  const suite = iptablesNamespace("ppl");
  const variants = installedVariants();
  it("has both iptables variants to test", () => {
    assert.ok(variants.length > 0, "neither iptables-nft nor iptables-legacy is installed");
  });

  for (const v of variants) {
    for (const set of RULE_SETS) {
      it(`reads ${set.name} as printed by ${set.family === 6 ? "ip6" : "ip"}tables-${v} in every form`, async (t) => {
        const { ns } = suite;
        const tool = `${set.family === 6 ? "ip6tables" : "iptables"}-${v}`;
        const file = `nodes/n1/${set.family === 6 ? "ip6" : "ip"}tables-save.txt`;
        const run = async (argv: string[], input?: string) => {
          const r = await ns.exec(argv, { timeoutMs: 20_000, ...(input ? { input } : {}) });
          assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
          return r.stdout;
        };
        // iptables-restore replaces the tables it is given; tables left by an earlier set are
        // listed and saved alike
        await run([`${tool}-restore`], set.text);
        const savedText = await run([`${tool}-save`]);
        const saved = parseIptablesSave(savedText, "saved", { family: set.family });
        assert.deepEqual(
          saved.diagnostics.filter((d) => d.severity !== "info"),
          [],
        );
        let rules = 0;
        let decided = 0;
        for (const table of saved.value.tables.keys()) {
          const user = [...saved.value.tables.get(table)!.chains.values()].find(
            (c) => !c.builtin && c.rules.length > 0,
          )?.name;
          for (const form of formsFor(table, user)) {
            const out = await run([tool, ...form.args]);
            const text = form.prompt ? `# ${tool} ${form.args.join(" ")}\n${out}` : out;
            const r = readIptablesText(text, file, { family: set.family });
            const bad = r.diagnostics.filter((d) => d.severity !== "info");
            assert.deepEqual(bad, [], `${form.args.join(" ")}\n${text}`);
            assert.ok(r.value, form.args.join(" "));
            assert.equal(r.value.format, form.kind);
            if (form.chain !== undefined) {
              assert.ok(r.value.excerpt, `${form.args.join(" ")}: an excerpt`);
            } else assert.equal(r.value.excerpt, undefined, `${form.args.join(" ")}: whole`);
            rules += compare(r.value, saved.value, table, form);
            if (table === "nat" && form.chain === undefined) {
              decided += sameAnswers(r.value, saved.value, form);
            }
          }
        }
        // iptables-save itself, with counters and a prompt, and with the legacy warning
        for (const args of [[], ["-c"]]) {
          const out = await run([`${tool}-save`, ...args]);
          for (const text of [
            `$ sudo ${tool}-save ${args.join(" ")}\n${out}`,
            `# Warning: iptables-legacy tables present, use iptables-legacy-save to see them\n${out}`,
          ]) {
            const r = readIptablesText(text, file, { family: set.family });
            assert.deepEqual(
              r.diagnostics.filter((d) => d.severity !== "info"),
              [],
            );
            assert.equal(r.value?.format, "save");
            assert.equal(r.value?.excerpt, undefined);
            for (const [name, tb] of saved.value.tables) {
              for (const [cn, c] of tb.chains) {
                assert.deepEqual(
                  r
                    .value!.tables.get(name)!
                    .chains.get(cn)!
                    .rules.map((x) => renderRule(x)),
                  c.rules.map((x) => renderRule(x)),
                );
              }
            }
          }
        }
        t.diagnostic(`${rules} listed rules compared; ${decided} decided answers agreed`);
        assert.ok(rules > 0);
        assert.ok(decided > 0, "some flows are decided on the listings");
      });
    }
  }

  it("reads the nf_tables variant's listing with its legacy-tables warning pasted in", async () => {
    // the nf_tables variant warns on every command when legacy tables exist beside it
    const { ns } = suite;
    if (!hasCommand("iptables-legacy") || !hasCommand("iptables-nft")) return;
    await ns.exec(["iptables-legacy", "-w", "-t", "nat", "-A", "POSTROUTING", "-j", "MASQUERADE"]);
    await ns.exec(["iptables-nft", "-w", "-t", "nat", "-F"]);
    await ns.exec([
      "iptables-nft",
      "-w",
      "-t",
      "nat",
      "-A",
      "POSTROUTING",
      "-o",
      "eth0",
      "-j",
      "RETURN",
    ]);
    const r = await ns.exec(["sh", "-c", "iptables-nft -t nat -L -n -v 2>&1"]);
    assert.match(r.stdout, /# Warning: iptables-legacy tables present/);
    const read = readIptablesText(`# iptables -t nat -L -n -v\n${r.stdout}`, "f", { family: 4 });
    assert.deepEqual(
      read.diagnostics.filter((d) => d.severity !== "info"),
      [],
    );
    assert.equal(read.value?.legacyTablesPresent, true);
    const rule = read.value?.tables.get("nat")?.chains.get("POSTROUTING")?.rules[0];
    assert.equal(rule?.outIface?.name, "eth0");
    assert.equal(rule?.target?.name, "RETURN");
    assert.ok(BUILTIN_CHAINS.nat.every((c) => read.value?.tables.get("nat")?.chains.has(c)));
  });
});
