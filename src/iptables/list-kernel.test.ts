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
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { createLab, type Lab, type Namespace } from "../lab/netns.ts";
import { type Family, formatIp, parseIp } from "../net/cidr.ts";
import type { Chain, IptablesDump, Match, Rule, TableName } from "./dump.ts";
import { BUILTIN_CHAINS } from "./dump.ts";
import { interpretMatch } from "./match-spec.ts";
import { compileNat } from "./nat-eval.ts";
import type { Flow, NatContext, NatTrace } from "./nat-trace.ts";
import { readIptablesText } from "./read-iptables-text.ts";
import { renderDump, renderRule } from "./render.ts";
import { parseIptablesSave } from "./save-parser.ts";

const skip = kernelSkip();
const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");

const has = (cmd: string) => {
  try {
    execFileSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
};

/** The modules whose `iptables -L` print is read back; others are hidden matches. */
const READ_MODULES = new Set([
  "comment",
  "addrtype",
  "mark",
  "connmark",
  "statistic",
  "tcp",
  "udp",
  "udplite",
  "sctp",
  "dccp",
  "multiport",
  "conntrack",
  "state",
  "set",
  "icmp",
  "icmp6",
]);

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

interface Form {
  readonly args: readonly string[];
  readonly kind: "list" | "spec";
  readonly numeric: boolean;
  readonly verbose: boolean;
  /** Only this chain is printed. */
  readonly chain?: string;
  /** Paste the command line above the output. */
  readonly prompt: boolean;
}

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

/** Adjacent conntrack matches whose options come in print order read as one (as -L shows them). */
function mergeConntrack(matches: readonly Match[], family: Family): Match[] {
  const out: Match[] = [];
  for (const m of matches) {
    const prev = out[out.length - 1];
    if (m.kind === "conntrack" && prev?.kind === "conntrack" && m.module === "conntrack") {
      if (prev.module === "conntrack") {
        const merged = interpretMatch("conntrack", [...prev.options, ...m.options], family);
        const names = merged.match.options.map((o) => o.name);
        if (merged.problems.length === 0 && new Set(names).size === names.length) {
          out[out.length - 1] = merged.match;
          continue;
        }
      }
    }
    out.push(m);
  }
  return out;
}

/** The save reading's rule with what the listing hides taken out, rendered. */
function masked(rule: Rule, hidden: readonly string[], family: Family): string {
  const drop = (p: string) => hidden.includes(p);
  const r: Rule = {
    table: rule.table,
    chain: rule.chain,
    index: rule.index,
    source: rule.source,
    ...(rule.protocol ? { protocol: rule.protocol } : {}),
    ...(rule.src && !drop("source") ? { src: rule.src } : {}),
    ...(rule.dst && !drop("destination") ? { dst: rule.dst } : {}),
    ...(rule.inIface && !drop("in-interface") ? { inIface: rule.inIface } : {}),
    ...(rule.outIface && !drop("out-interface") ? { outIface: rule.outIface } : {}),
    ...(rule.fragment ? { fragment: rule.fragment } : {}),
    matches: drop("match") ? [] : mergeConntrack(rule.matches, family),
    ...(rule.target && !drop("target") ? { target: rule.target } : {}),
  };
  return renderRule(r);
}

function maskedListed(rule: Rule, family: Family): string {
  return masked(
    rule,
    (rule.hidden ?? []).map((h) => h.part).filter((p) => p === "match" || p === "target"),
    family,
  );
}

function hooksOf(chain: string): { inIface: boolean; outIface: boolean } {
  if (chain === "OUTPUT" || chain === "POSTROUTING") return { inIface: false, outIface: true };
  if (chain === "PREROUTING" || chain === "INPUT") return { inIface: true, outIface: false };
  return { inIface: true, outIface: true };
}

/** Compares a listing's reading with the save reading, table by table, chain by chain. */
function compare(listed: IptablesDump, saved: IptablesDump, table: TableName, form: Form): number {
  const lt = listed.tables.get(table);
  const st = saved.tables.get(table);
  assert.ok(lt, `table ${table} read`);
  assert.ok(st);
  const chains = form.chain !== undefined ? [form.chain] : [...st.chains.keys()];
  assert.deepEqual(
    [...lt.chains.keys()].filter((c) => form.chain === undefined || c === form.chain).sort(),
    [...chains].sort(),
  );
  let compared = 0;
  for (const name of chains) {
    const lc: Chain = lt.chains.get(name)!;
    const sc: Chain = st.chains.get(name)!;
    assert.equal(lc.builtin, sc.builtin, name);
    if (sc.builtin) assert.equal(lc.policy, sc.policy, name);
    assert.notEqual(lc.partial, true, `${name} shown whole`);
    assert.equal(lc.rules.length, sc.rules.length, `${name}: rule count`);
    lc.rules.forEach((lr, k) => {
      const sr = sc.rules[k]!;
      const where = `${form.args.join(" ")}: ${name} #${k + 1}\n${lr.source.text}\n${sr.source.text}`;
      assert.equal(lr.index, k + 1);
      const hidden = (lr.hidden ?? []).map((h) => h.part);
      if (form.kind === "spec") assert.deepEqual(hidden, [], where);
      // interfaces: hidden exactly when the form has no in/out columns and the chain can have one
      const hooks = hooksOf(name);
      assert.equal(hidden.includes("in-interface"), !form.verbose && hooks.inIface, where);
      assert.equal(hidden.includes("out-interface"), !form.verbose && hooks.outIface, where);
      // addresses: hidden only when printed as a name, which -n never does
      if (form.numeric) {
        assert.ok(!hidden.includes("source") && !hidden.includes("destination"), where);
      }
      if (hidden.includes("source")) assert.ok(sr.src, where);
      if (hidden.includes("destination")) assert.ok(sr.dst, where);
      // matches: hidden only for extensions whose print is not read back
      const unread = sr.matches.filter((m) => !READ_MODULES.has(m.module));
      assert.equal(hidden.includes("match"), unread.length > 0 && form.kind === "list", where);
      assert.equal(maskedListed(lr, saved.family), masked(sr, hidden, saved.family), where);
      if (form.kind === "list" && form.verbose && lr.counters && sr.counters) {
        assert.deepEqual(lr.counters, sr.counters, where);
      }
      compared++;
    });
  }
  return compared;
}

/** Flows through a nat table, from the addresses and ports its rules name plus outsiders. */
function flowsFor(saved: IptablesDump): Flow[] {
  const v6 = saved.family === 6;
  const nat = saved.tables.get("nat");
  const addrs = new Set<string>(
    v6
      ? ["2001:db8::9", "fd00:10::7", "fe80::1", "2600::1"]
      : ["8.8.8.8", "10.20.30.40", "169.254.169.254", "192.168.1.9"],
  );
  const ports = new Set<number>([53, 80, 443, 8080]);
  for (const c of nat?.chains.values() ?? []) {
    for (const r of c.rules) {
      for (const a of [r.dst, r.src])
        if (a && !a.negated) addrs.add(formatIp({ family: a.cidr.family, value: a.cidr.start }));
      for (const m of r.matches) {
        if (m.kind === "ports" && m.dport) for (const p of m.dport.ranges) ports.add(p.from);
      }
    }
  }
  const sources = v6
    ? ["fd00:10::5", "fd00:10::9", "2001:db8:1::1"]
    : ["10.244.1.2", "10.244.1.7", "172.17.0.2", "10.128.0.20", "10.28.0.7", "10.32.1.5"];
  const dsts = [...addrs];
  const arb = fc.record({
    src: fc.constantFrom(...sources),
    dst: fc.constantFrom(...dsts),
    proto: fc.constantFrom("tcp", "udp"),
    dport: fc.constantFrom(...ports),
    origin: fc.constantFrom("pod" as const, "host" as const, "forwarded" as const),
    outIface: fc.constantFrom("eth0", "docker0", undefined),
    mark: fc.constantFrom(0, 0x4000, undefined),
  });
  return fc.sample(arb, { numRuns: 120, seed: 7 }).map((f) => ({
    src: parseIp(f.src),
    dst: parseIp(f.dst),
    proto: f.proto,
    dport: f.dport,
    origin: f.origin,
    ...(f.outIface !== undefined ? { outIface: f.outIface } : {}),
    ...(f.mark !== undefined ? { mark: f.mark } : {}),
  }));
}

const DECIDED = new Set(["masquerade", "snat", "keep", "dropped"]);
const answer = (t: NatTrace) =>
  `${t.decision} src=${t.sourceOut?.ip ? formatIp(t.sourceOut.ip) : "?"} dst=${t.dstOut ? `${formatIp(t.dstOut.ip)}:${t.dstOut.port ?? ""}` : "-"}`;

/** The listing never leads the evaluator to a different decided answer; returns how many agreed. */
function sameAnswers(listed: IptablesDump, saved: IptablesDump, form: Form): number {
  const v6 = saved.family === 6;
  const node = parseIp(v6 ? "fd00:10::1" : "10.128.0.20");
  const ctx: NatContext = {
    localAddresses: [node],
    interfaces: [{ name: "eth0", primary: node, addresses: [{ ip: node, prefix: v6 ? 64 : 32 }] }],
    nodeInternalIp: node,
  };
  const a = compileNat(listed, ctx);
  const b = compileNat(saved, ctx);
  let decided = 0;
  for (const f of flowsFor(saved)) {
    const x = a.evaluate(f);
    if (!DECIDED.has(x.decision)) continue;
    const y = b.evaluate(f);
    assert.equal(
      answer(x),
      answer(y),
      `${form.args.join(" ")}: flow ${JSON.stringify(f, (_k, v) => (typeof v === "bigint" ? v.toString() : v))}`,
    );
    decided++;
  }
  return decided;
}

describe("readIptablesText on every form iptables prints", { skip }, () => {
  let lab: Lab | undefined;
  let ns: Namespace;
  before(async () => {
    lab = await createLab({ prefix: "ppl" });
    ns = await lab.addNamespace("ipt");
  });
  after(async () => {
    await lab?.destroy();
  });

  const variants = (["nft", "legacy"] as const).filter((v) => has(`iptables-${v}-restore`));
  it("has both iptables variants to test", () => {
    assert.ok(variants.length > 0, "neither iptables-nft nor iptables-legacy is installed");
  });

  for (const v of variants) {
    for (const set of RULE_SETS) {
      it(`reads ${set.name} as printed by ${set.family === 6 ? "ip6" : "ip"}tables-${v} in every form`, async (t) => {
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
    if (!has("iptables-legacy") || !has("iptables-nft")) return;
    await ns.exec(["iptables-legacy", "-t", "nat", "-A", "POSTROUTING", "-j", "MASQUERADE"]);
    await ns.exec(["iptables-nft", "-t", "nat", "-F"]);
    await ns.exec(["iptables-nft", "-t", "nat", "-A", "POSTROUTING", "-o", "eth0", "-j", "RETURN"]);
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
