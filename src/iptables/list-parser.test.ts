import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import type { TableName } from "./dump.ts";
import { parseIptablesList } from "./list-parser.ts";
import { readIptablesText } from "./read-iptables-text.ts";
import { parseIptablesSave } from "./save-parser.ts";
import { compare, type Form, sameAnswers } from "./test-helpers/list-compare.ts";

// real listings printed by iptables-nft 1.8.9, made by fixtures/list/make-fixtures.sh
const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/list/${name}`, import.meta.url), "utf8");
const FILE = "nodes/n1/iptables-save.txt";

interface Case {
  readonly file: string;
  readonly save: string;
  readonly table: TableName;
  readonly form: Form;
}

const form = (
  args: string[],
  numeric: boolean,
  verbose: boolean,
  chain?: string,
  kind: "list" | "spec" = "list",
): Form => ({ args, kind, numeric, verbose, prompt: true, ...(chain ? { chain } : {}) });

const CASES: readonly Case[] = [
  {
    file: "kube-proxy.nat-L.txt",
    save: "kube-proxy.save-c.txt",
    table: "nat",
    form: form(["-L"], false, false),
  },
  {
    file: "kube-proxy.nat-Ln-line.txt",
    save: "kube-proxy.save-c.txt",
    table: "nat",
    form: form(["-L", "-n", "--line-numbers"], true, false),
  },
  {
    file: "kube-proxy.nat-Lnvx.txt",
    save: "kube-proxy.save-c.txt",
    table: "nat",
    form: form(["-L", "-n", "-v", "-x"], true, true),
  },
  {
    file: "kube-proxy.nat-Lv.txt",
    save: "kube-proxy.save-c.txt",
    table: "nat",
    form: form(["-L", "-v"], false, true),
  },
  {
    file: "kube-proxy.nat-POSTROUTING-Lnv.txt",
    save: "kube-proxy.save-c.txt",
    table: "nat",
    form: form(["-L", "POSTROUTING", "-n", "-v"], true, true, "POSTROUTING"),
  },
  {
    file: "kube-proxy.filter-L.txt",
    save: "kube-proxy.save-c.txt",
    table: "filter",
    form: form(["-L"], false, false),
  },
  {
    file: "kube-proxy.nat-S-POSTROUTING.txt",
    save: "kube-proxy.save-c.txt",
    table: "nat",
    form: form(["-S", "POSTROUTING"], true, true, "POSTROUTING", "spec"),
  },
  {
    file: "masq6.nat-Lnv.txt",
    save: "masq6.save.txt",
    table: "nat",
    form: form(["-L", "-n", "-v"], true, true),
  },
  {
    file: "masq6.nat-L.txt",
    save: "masq6.save.txt",
    table: "nat",
    form: form(["-L"], false, false),
  },
  {
    file: "oddities.nat-Lnv.txt",
    save: "oddities.save.txt",
    table: "nat",
    form: form(["-L", "-n", "-v"], true, true),
  },
  {
    file: "oddities.nat-L-line.txt",
    save: "oddities.save.txt",
    table: "nat",
    form: form(["-L", "--line-numbers"], false, false),
  },
];

describe("readIptablesText on real iptables -L listings (fixtures)", () => {
  for (const c of CASES) {
    it(`reads ${c.file} as the iptables-save reading shows the rules, hiding what the form does not print`, () => {
      const family = c.file.startsWith("masq6") ? 6 : 4;
      const saved = parseIptablesSave(fixture(c.save), c.save, { family });
      const r = readIptablesText(fixture(c.file), FILE, { family });
      assert.deepEqual(
        r.diagnostics.filter((d) => d.severity !== "info"),
        [],
      );
      assert.ok(r.value);
      assert.equal(r.value.format, c.form.kind);
      assert.equal(r.value.excerpt !== undefined, c.form.chain !== undefined);
      assert.ok(compare(r.value, saved.value, c.table, c.form) > 0);
      if (c.table === "nat" && c.form.chain === undefined) {
        // without -v every rule may test an interface: answers may all be undecided then
        const decided = sameAnswers(r.value, saved.value, c.form);
        if (c.form.verbose) assert.ok(decided > 0, "flows decided on a -v listing");
      }
    });
  }

  it("cites each rule's line and checks --line-numbers against the rule's place", () => {
    const text = fixture("kube-proxy.nat-Ln-line.txt");
    const d = readIptablesText(text, FILE, { family: 4 }).value!;
    const rule = d.tables.get("nat")!.chains.get("KUBE-SVC-DNS")!.rules[1]!;
    assert.equal(rule.index, 2);
    assert.equal(text.split("\n")[rule.source.line - 1], rule.source.text);
    assert.match(
      rule.source.text ?? "",
      /^2 +KUBE-SEP-DNS1 .*statistic mode random probability 0\.5/,
    );
    // a listing with a rule taken out: the numbers no longer follow the places
    const lines = text.split("\n");
    const at = lines.indexOf(rule.source.text ?? "");
    lines.splice(at, 1);
    const cut = readIptablesText(lines.join("\n"), FILE, { family: 4 });
    const warn = cut.diagnostics.find((x) => x.code === "IPTABLES_LIST_NUMBER");
    assert.equal(warn?.source?.line, at + 1);
    assert.equal(cut.value?.tables.get("nat")?.chains.get("KUBE-SVC-DNS")?.partial, true);
  });

  it("reads policies, references and exact counters (-v -x)", () => {
    const d = readIptablesText(fixture("kube-proxy.nat-Lnvx.txt"), FILE, { family: 4 }).value!;
    const nat = d.tables.get("nat")!;
    assert.equal(nat.chains.get("POSTROUTING")?.policy, "ACCEPT");
    assert.deepEqual(nat.chains.get("POSTROUTING")?.counters, { packets: 0n, bytes: 0n });
    assert.equal(nat.chains.get("KUBE-MARK-MASQ")?.builtin, false);
    assert.deepEqual(nat.chains.get("KUBE-MARK-MASQ")?.rules[0]?.counters, {
      packets: 0n,
      bytes: 0n,
    });
  });

  it("without -v hides the interfaces a chain's rules can test, saying which command shows them", () => {
    const d = readIptablesText(fixture("kube-proxy.nat-L.txt"), FILE, { family: 4 }).value!;
    const nat = d.tables.get("nat")!;
    const post = nat.chains.get("POSTROUTING")!.rules[2]!;
    assert.match(post.source.text ?? "", /^MASQUERADE +all +-- +172\.17\.0\.0\/16/);
    assert.deepEqual(post.hidden, [
      {
        part: "out-interface",
        why: "iptables -L without -v does not print interfaces; iptables-save shows them",
      },
    ]);
    assert.equal(post.outIface, undefined);
    assert.deepEqual(
      nat.chains.get("PREROUTING")!.rules[0]!.hidden?.map((h) => h.part),
      ["in-interface"],
    );
    assert.deepEqual(
      nat.chains.get("KUBE-SEP-DNS1")!.rules[0]!.hidden?.map((h) => h.part),
      ["in-interface", "out-interface"],
    );
  });

  it("keeps names printed without -n as hidden addresses, and service names as ports", () => {
    const d = readIptablesText(fixture("oddities.nat-L-line.txt"), FILE, { family: 4 }).value!;
    const post = d.tables.get("nat")!.chains.get("POSTROUTING")!.rules;
    const ssh = post.find((r) => r.source.text?.includes("localhost"))!;
    assert.equal(ssh.src, undefined);
    assert.ok(ssh.hidden?.some((h) => h.part === "source" && /iptables -L -n/.test(h.why)));
    assert.equal(ssh.dst?.cidr.prefix, 32);
    const m = ssh.matches[0];
    assert.ok(m?.kind === "ports" && m.dport?.ranges[0]?.from === 22);
    const sccp = post.find((r) => r.source.text?.includes("cisco-sccp"))!;
    const p = sccp.matches[0];
    assert.ok(p?.kind === "ports");
    assert.deepEqual(p.sport?.ranges, [{ from: 1000, to: 2000 }]);
    const masq = d.tables.get("nat")!.chains.get("IP-MASQ-AGENT")!.rules[0]!;
    assert.ok(masq.hidden?.some((h) => h.part === "destination"));
  });

  it("reads a comment that holds */ and extensions it cannot read back as hidden matches", () => {
    const d = readIptablesText(fixture("oddities.nat-Lnv.txt"), FILE, { family: 4 }).value!;
    const pre = d.tables.get("nat")!.chains.get("PREROUTING")!.rules;
    const c = pre.find((r) => r.source.text?.includes("/* a */ b */"))!;
    assert.deepEqual(
      c.matches.map((m) => (m.kind === "comment" ? m.comment : m.kind)),
      ["a */ b"],
    );
    const post = d.tables.get("nat")!.chains.get("POSTROUTING")!.rules;
    const physdev = post.find((r) => r.source.text?.includes("PHYSDEV"))!;
    assert.equal(physdev.hidden?.[0]?.part, "match");
    assert.match(physdev.hidden?.[0]?.why ?? "", /PHYSDEV match --physdev-is-bridged/);
    // the target after an unread match is still read
    const recent = post.find((r) => r.source.text?.includes("recent:"))!;
    assert.deepEqual(recent.target, {
      kind: "MASQUERADE",
      name: "MASQUERADE",
      random: false,
      randomFully: true,
    });
  });

  it("marks a listing cut short: the last chain partial, the dump an excerpt", () => {
    const text = fixture("kube-proxy.nat-Lnvx.txt");
    const cut = text.slice(0, text.indexOf("Chain KUBE-MARK-MASQ") - 1);
    const d = readIptablesText(cut, FILE, { family: 4 }).value!;
    const nat = d.tables.get("nat")!;
    const chains = [...nat.chains.values()];
    assert.equal(chains[chains.length - 1]?.partial, true);
    assert.ok(chains.slice(0, -1).every((c) => c.partial !== true));
    assert.match(d.excerpt?.reasons.join(" ") ?? "", /cut short/);
  });

  it("assumes the table from the chains when no command line says it, and says so", () => {
    const r = readIptablesText(fixture("kube-proxy.nat-Lnvx.txt"), FILE, { family: 4 });
    const info = r.diagnostics.find((d) => d.code === "IPTABLES_TABLE_ASSUMED");
    assert.equal(info?.severity, "info");
    assert.match(info?.message ?? "", /read as table nat/);
    // iptables -L without -t lists the filter table
    const f = readIptablesText(fixture("kube-proxy.filter-L.txt"), FILE, { family: 4 });
    assert.ok(f.value?.tables.has("filter"));
    assert.equal(
      f.diagnostics.find((d) => d.code === "IPTABLES_TABLE_ASSUMED"),
      undefined,
    );
  });

  it("reads a rule without a target, and a service name it does not know as a hidden match", () => {
    const text = [
      "Chain OUTPUT (policy ACCEPT)",
      "target     prot opt source               destination         ",
      "           all  --  anywhere             anywhere             /* no target */",
      "RETURN     tcp  --  anywhere             anywhere             tcp dpt:my-service",
      "",
    ].join("\n");
    const r = parseIptablesList(text, "f", { table: "nat" });
    assert.deepEqual(
      r.diagnostics.map((d) => d.code),
      ["IPTABLES_EXCERPT"],
    );
    const [a, b] = r.value.tables.get("nat")!.chains.get("OUTPUT")!.rules;
    assert.equal(a?.target, undefined);
    assert.equal(a?.matches[0]?.kind, "comment");
    assert.deepEqual(
      b?.hidden?.map((h) => h.part),
      ["out-interface", "match"],
    );
    assert.equal(b?.target?.name, "RETURN");
  });

  it("reads older ip6tables listings, which print no opt column", () => {
    const text = [
      "Chain POSTROUTING (policy ACCEPT)",
      "target     prot opt source               destination         ",
      "IP-MASQ-AGENT  all      anywhere             anywhere             ADDRTYPE match dst-type !LOCAL",
      "           all      anywhere             anywhere             /* x */",
      "",
      "Chain IP-MASQ-AGENT (1 references)",
      "target     prot opt source               destination         ",
      "RETURN     udp     !fd00:10::/64         2001:db8::/32        udp dpt:53",
      "MASQUERADE  all      anywhere             anywhere             random-fully",
      "",
    ].join("\n");
    const r = parseIptablesList(text, "f", { family: 6 });
    assert.deepEqual(
      r.diagnostics.filter((d) => d.severity !== "info"),
      [],
    );
    const nat = r.value.tables.get("nat")!;
    const [jump, bare] = nat.chains.get("POSTROUTING")!.rules;
    assert.equal(jump?.target?.name, "IP-MASQ-AGENT");
    assert.equal(bare?.target, undefined);
    const [ret, masq] = nat.chains.get("IP-MASQ-AGENT")!.rules;
    assert.equal(ret?.src?.negated, true);
    assert.equal(ret?.src?.cidr.prefix, 64);
    assert.equal(ret?.protocol?.name, "udp");
    assert.ok(masq?.target?.kind === "MASQUERADE" && masq.target.randomFully);
  });

  it("says what is wrong with a line it cannot read, with file and line", () => {
    const text = "Chain OUTPUT (policy ACCEPT)\ntarget prot opt source destination\nRETURN bogus\n";
    const r = parseIptablesList(text, "f", { table: "nat" });
    assert.equal(r.diagnostics[0]?.code, "IPTABLES_LIST_SYNTAX");
    assert.deepEqual(r.diagnostics[0]?.source, { file: "f", line: 3, text: "RETURN bogus" });
    assert.match(r.diagnostics[0]?.message ?? "", /expected the columns/);
  });
});
