import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import { formatCidr } from "../net/cidr.ts";
import type { IptablesDump, Rule } from "./dump.ts";
import { renderDump, renderRule } from "./render.ts";
import { parseRuleArgs } from "./rule-args.ts";
import { parseRuleText } from "./rule-fast.ts";
import { parseIptablesSave } from "./save-parser.ts";
import { tokenize } from "./tokenize.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const rulesOf = (d: IptablesDump, table = "nat" as const): Rule[] =>
  [...(d.tables.get(table)?.chains.values() ?? [])].flatMap((c) => c.rules);
const chain = (d: IptablesDump, name: string) => d.tables.get("nat")!.chains.get(name)!;

describe("parseIptablesSave on real dumps", () => {
  it("reads GKE Dataplane V2's `iptables -S -t nat` as the nat table, every rule cited", () => {
    const f = "gke-dpv2-1.29_iptables-S-nat_IP-MASQ-default-snat_cilium.txt";
    const { value: d, diagnostics } = parseIptablesSave(fixture(f), f);
    assert.equal(d.format, "spec");
    assert.equal(d.family, 4);
    assert.deepEqual([...d.tables.keys()], ["nat"]);
    assert.deepEqual(
      diagnostics.map((x) => x.code),
      ["IPTABLES_TABLE_ASSUMED"],
    );
    const ipMasq = chain(d, "IP-MASQ");
    assert.equal(ipMasq.rules.length, 13);
    const first = ipMasq.rules[0]!;
    assert.equal(first.source.line, 22);
    assert.equal(formatCidr(first.dst!.cidr), "169.254.0.0/16");
    assert.deepEqual(first.target, { kind: "verdict", name: "RETURN" });
    const jump = chain(d, "POSTROUTING").rules[1]!;
    const addrtype = jump.matches.find((m) => m.kind === "addrtype");
    assert.deepEqual(addrtype?.kind === "addrtype" && addrtype.dst, {
      types: ["LOCAL"],
      negated: true,
    });
    assert.equal(chain(d, "POSTROUTING").policy, "ACCEPT");
  });

  it("reads the legacy kubenet node: marks, statistic, recent, DNAT", () => {
    const f = "gke-legacy-kubenet_iptables-S-nat_kube-proxy_kubenet-snat.txt";
    const { value: d } = parseIptablesSave(fixture(f), f);
    assert.equal(rulesOf(d).length, 66);
    const mark = chain(d, "KUBE-MARK-MASQ").rules[0]!.target;
    assert.deepEqual(mark, { kind: "MARK", name: "MARK", op: { value: 0x4000, mask: 0x4000 } });
    const post = chain(d, "KUBE-POSTROUTING").rules[0]!;
    const m = post.matches.find((x) => x.kind === "mark");
    assert.deepEqual(m?.kind === "mark" && m.mark, { value: 0x4000, mask: 0x4000, negated: false });
    const svc = chain(d, "KUBE-SVC-TCOU7JCQXEZGVUNU").rules[0]!;
    const st = svc.matches.find((x) => x.kind === "statistic");
    assert.equal(st?.kind === "statistic" && st.probability, 0.5);
    const sep = chain(d, "KUBE-SEP-CXUJ2M5ZPG4H3H7X").rules[1]!;
    assert.equal(sep.target?.kind, "DNAT");
    assert.ok(sep.matches.some((x) => x.kind === "opaque" && x.module === "recent"));
    const kubenet = chain(d, "POSTROUTING").rules[1]!;
    assert.equal(kubenet.dst?.negated, true);
    assert.equal(kubenet.target?.kind, "MASQUERADE");
  });

  it("reads a grep excerpt without a table header as nat, keeping both POSTROUTING jumps in order", () => {
    const f = "k8s-issue-64212_gke-1.10_IP-MASQ-plus-IP-MASQ-AGENT_grep.txt";
    const { value: d } = parseIptablesSave(fixture(f), f);
    const post = chain(d, "POSTROUTING");
    assert.equal(post.policy, undefined);
    assert.deepEqual(
      post.rules.map((r) => (r.target?.kind === "chain" ? r.target.name : "")),
      ["IP-MASQ", "IP-MASQ-AGENT"],
    );
    assert.deepEqual(
      post.rules.map((r) => r.index),
      [1, 2],
    );
  });

  it("reports the truncated kubeadm dump (no COMMIT) and keeps its rules", () => {
    const f = "kubeadm-docker_k8s-pr-75893_iptables-save-nat-header.txt";
    const { value: d, diagnostics } = parseIptablesSave(fixture(f), f);
    assert.equal(d.format, "save");
    assert.equal(d.version, "1.6.0");
    assert.equal(chain(d, "OUTPUT").counters?.packets, 1n);
    assert.equal(chain(d, "OUTPUT").counters?.bytes, 76n);
    const trunc = diagnostics.find((x) => x.code === "IPTABLES_TRUNCATED");
    assert.ok(trunc);
    assert.equal(trunc.severity, "error");
    assert.equal(trunc.source?.file, f);
    const docker = chain(d, "POSTROUTING").rules[1]!;
    assert.equal(renderRule(docker), "-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE");
    assert.equal(rulesOf(d).length, 8);
  });

  it("renders every rule of every real dump back to its own text", () => {
    for (const f of [
      "gke-dpv2-1.29_iptables-S-nat_IP-MASQ-default-snat_cilium.txt",
      "gke-legacy-kubenet_iptables-S-nat_kube-proxy_kubenet-snat.txt",
      "k8s-issue-64212_gke-1.10_IP-MASQ-plus-IP-MASQ-AGENT_grep.txt",
      "kubeadm-docker_k8s-pr-75893_iptables-save-nat-header.txt",
    ]) {
      for (const r of rulesOf(parseIptablesSave(fixture(f), f).value))
        assert.equal(renderRule(r), r.source.text);
    }
  });
});

describe("renderRule against the kernel's iptables-save", () => {
  it("prints non-canonical input exactly as iptables-nft-save printed it after loading", () => {
    const input = parseIptablesSave(fixture("kernel-input.txt"), "kernel-input.txt").value;
    const saved = parseIptablesSave(fixture("kernel-canonical.txt"), "kernel-canonical.txt").value;
    const mine = rulesOf(input).map((r) => renderRule(r));
    const kernel = rulesOf(saved).map((r) => r.source.text);
    assert.equal(mine.length, 32);
    assert.deepEqual(mine, kernel);
  });

  it("quantises statistic probabilities as libxt_statistic stores them", () => {
    const { value } = parseIptablesSave(
      "-A X -m statistic --mode random --probability 0.469292562840114 -j RETURN\n-A X -m statistic --mode random --probability 0.33333 -j RETURN\n",
      "t",
      { table: "nat" },
    );
    assert.deepEqual(
      rulesOf(value).map((r) => renderRule(r)),
      [
        "-A X -m statistic --mode random --probability 0.46929256292 -j RETURN",
        "-A X -m statistic --mode random --probability 0.33332999982 -j RETURN",
      ],
    );
  });
});

describe("parseIptablesSave formats", () => {
  it("reads all tables, nf_tables header, legacy warning and rule counters", () => {
    const text = [
      "# Warning: iptables-legacy tables present, use iptables-legacy-save to see them",
      "# Generated by iptables-nft-save v1.8.9 (nf_tables) on Thu Nov 27 10:00:00 2025",
      "*raw",
      ":PREROUTING ACCEPT [5:300]",
      ":OUTPUT ACCEPT [0:0]",
      "COMMIT",
      "*mangle",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "COMMIT",
      "*security",
      ":INPUT ACCEPT [0:0]",
      ":FORWARD ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "COMMIT",
      "*filter",
      ":INPUT DROP [1:2]",
      ":FORWARD DROP [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      "[10:600] -A INPUT -i lo -j ACCEPT",
      "COMMIT",
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      "[3:180] -A POSTROUTING -o eth0 -j MASQUERADE",
      "COMMIT",
      "",
    ].join("\n");
    const { value: d, diagnostics } = parseIptablesSave(text, "n/iptables-save");
    assert.deepEqual(diagnostics, []);
    assert.deepEqual([...d.tables.keys()], ["raw", "mangle", "security", "filter", "nat"]);
    assert.equal(d.backend, "nf_tables");
    assert.equal(d.version, "1.8.9");
    assert.equal(d.legacyTablesPresent, true);
    assert.equal(d.tables.get("filter")!.chains.get("INPUT")!.policy, "DROP");
    const r = d.tables.get("nat")!.chains.get("POSTROUTING")!.rules[0]!;
    assert.deepEqual(r.counters, { packets: 3n, bytes: 180n });
    assert.equal(r.source.line, 30);
    assert.equal(renderRule(r, { counters: true }), "[3:180] -A POSTROUTING -o eth0 -j MASQUERADE");
    assert.equal(
      parseIptablesSave(renderDump(d, { counters: true }), "again").diagnostics.length,
      0,
    );
  });

  it("reads ip6tables-save (family from the header) and legacy headers", () => {
    const text = [
      "# Generated by ip6tables-save v1.8.7 (legacy) on Mon Jan  1 00:00:00 2024",
      "*nat",
      ":PREROUTING ACCEPT [0:0]",
      ":INPUT ACCEPT [0:0]",
      ":OUTPUT ACCEPT [0:0]",
      ":POSTROUTING ACCEPT [0:0]",
      ":IP-MASQ-AGENT - [0:0]",
      '-A IP-MASQ-AGENT -d fe80::/10 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN',
      "-A IP-MASQ-AGENT -j MASQUERADE",
      "-A PREROUTING -p tcp -j DNAT --to-destination [fd00::1]:8080",
      "COMMIT",
    ].join("\n");
    const { value: d, diagnostics } = parseIptablesSave(text, "ip6");
    assert.deepEqual(diagnostics, []);
    assert.equal(d.family, 6);
    assert.equal(d.backend, "legacy");
    const r = chain(d, "IP-MASQ-AGENT").rules[0]!;
    assert.equal(formatCidr(r.dst!.cidr), "fe80::/10");
    assert.equal(
      renderRule(chain(d, "PREROUTING").rules[0]!),
      "-A PREROUTING -p tcp -j DNAT --to-destination [fd00::1]:8080",
    );
  });

  it("reads `iptables -S -v` counters and takes the table from the option", () => {
    const text = "-P INPUT ACCEPT -c 10 20\n-N KUBE-FIREWALL\n-A INPUT -j KUBE-FIREWALL -c 1 2\n";
    const { value: d, diagnostics } = parseIptablesSave(text, "s", { table: "filter" });
    assert.deepEqual(diagnostics, []);
    const input = d.tables.get("filter")!.chains.get("INPUT")!;
    assert.deepEqual(input.counters, { packets: 10n, bytes: 20n });
    assert.deepEqual(input.rules[0]!.counters, { packets: 1n, bytes: 2n });
  });

  it("reads ip-masq-agent's --to-ports rules with target options before the matches", () => {
    const line =
      '-A IP-MASQ-AGENT -m comment --comment "x" -j MASQUERADE --random-fully -p tcp -m statistic --mode random --probability 0.469292562840114 --to-ports 1024-29999';
    const { value: d, diagnostics } = parseIptablesSave(`-N IP-MASQ-AGENT\n${line}\n`, "t", {
      table: "nat",
    });
    assert.deepEqual(diagnostics, []);
    assert.equal(
      renderRule(rulesOf(d)[0]!),
      "-A IP-MASQ-AGENT -p tcp -m comment --comment x -m statistic --mode random --probability 0.46929256292 -j MASQUERADE --to-ports 1024-29999 --random-fully",
    );
  });
});

describe("option arguments", () => {
  it("gives an option its required argument even when it looks like an option (getopt)", () => {
    const { value, diagnostics } = parseIptablesSave(
      "-N C\n-A C -m comment --comment -A -j RETURN\n",
      "t",
      {
        table: "nat",
      },
    );
    assert.deepEqual(diagnostics, []);
    const r = rulesOf(value)[0]!;
    const c = r.matches[0];
    assert.equal(c?.kind === "comment" && c.comment, "-A");
    assert.equal(renderRule(r), "-A C -m comment --comment -A -j RETURN");
  });
});

describe("parseIptablesSave diagnostics", () => {
  const diagsOf = (text: string) => parseIptablesSave(text, "bad.txt").diagnostics;

  it("names file, line and what was expected for a rule outside a table", () => {
    const d = diagsOf("*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n-A POSTROUTING -j MASQUERADE\n");
    assert.equal(d.length, 1);
    assert.equal(d[0]!.code, "IPTABLES_OUTSIDE_TABLE");
    assert.deepEqual(d[0]!.source && { file: d[0]!.source.file, line: d[0]!.source.line }, {
      file: "bad.txt",
      line: 4,
    });
    assert.match(d[0]!.message, /expected a "\*table" line/);
  });

  it("reports a jump to a chain that was never declared, at the jumping rule", () => {
    const d = diagsOf("*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -j NOPE\nCOMMIT\n");
    assert.equal(d.length, 1);
    assert.equal(d[0]!.code, "IPTABLES_UNDECLARED_CHAIN");
    assert.equal(d[0]!.source?.line, 3);
  });

  it("reports rules added to an undeclared chain and keeps them", () => {
    const { value, diagnostics } = parseIptablesSave("*nat\n-A FOO -j RETURN\nCOMMIT\n", "x");
    assert.equal(diagnostics[0]!.code, "IPTABLES_UNDECLARED_CHAIN");
    assert.equal(value.tables.get("nat")!.chains.get("FOO")!.rules.length, 1);
  });

  it("reports a table cut off by the next table", () => {
    const d = diagsOf("*nat\n:POSTROUTING ACCEPT [0:0]\n*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n");
    assert.deepEqual(
      d.map((x) => [x.code, x.source?.line]),
      [["IPTABLES_TRUNCATED", 3]],
    );
  });

  it("reports bad addresses, unknown options and an unterminated quote, and goes on", () => {
    const text = [
      "*nat",
      ":POSTROUTING ACCEPT [0:0]",
      "-A POSTROUTING -d 10.0.0.300/8 -j RETURN",
      '-A POSTROUTING -m comment --comment "open -j RETURN',
      "-A POSTROUTING -m mark --mark zz -j RETURN",
      "-A POSTROUTING -j MASQUERADE --to-sauce 1.2.3.4",
      "-A POSTROUTING -s 10.0.0.0/8 -j ACCEPT",
      "COMMIT",
    ].join("\n");
    const { value, diagnostics } = parseIptablesSave(text, "bad.txt");
    assert.deepEqual(
      diagnostics.map((x) => x.source?.line),
      [3, 4, 5, 6],
    );
    assert.match(diagnostics[0]!.message, /10\.0\.0\.300/);
    assert.match(diagnostics[1]!.message, /never closed/);
    assert.match(diagnostics[3]!.message, /--to-sauce/);
    assert.equal(chain(value, "POSTROUTING").rules.length, 5);
    assert.equal(chain(value, "POSTROUTING").rules[4]!.target?.kind, "verdict");
  });

  it("reports an unknown table and lines that are not iptables syntax", () => {
    const d = diagsOf("*natt\n-A X -j Y\nhello world\n");
    assert.equal(d[0]!.code, "IPTABLES_SYNTAX");
    assert.equal(d[0]!.source?.line, 1);
    assert.ok(d.some((x) => x.source?.line === 3));
  });
});

// ---- properties ------------------------------------------------------------------------------

const arbIp4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((a) => a.join("."));
const arbComment = fc
  .string({ unit: "binary-ascii", maxLength: 30 })
  .map((s) => s.replace(/[\r\n\0]/g, ""));
const quote = (s: string) => `"${s.replace(/[\\"']/g, (c) => `\\${c}`)}"`;
const arbRuleArgs = fc
  .record({
    neg: fc.boolean(),
    src: fc.option(fc.tuple(arbIp4, fc.integer({ min: 0, max: 32 }))),
    dst: fc.option(fc.tuple(arbIp4, fc.integer({ min: 0, max: 32 }))),
    oif: fc.option(fc.constantFrom("eth0", "eth+", "docker0")),
    proto: fc.option(fc.constantFrom("tcp", "udp")),
    dport: fc.option(fc.integer({ min: 1, max: 65535 })),
    comment: fc.option(arbComment),
    mark: fc.option(fc.tuple(fc.nat(0xffff), fc.boolean())),
    target: fc.constantFrom(
      "-j RETURN",
      "-j MASQUERADE --random-fully",
      "-j KUBE-MARK-MASQ",
      "-j MARK --set-xmark 0x4000/0x4000",
      "-j SNAT --to-source 1.2.3.4",
      "-j DNAT --to-destination 10.1.2.3:80",
      "-g KUBE-SEP-ABC",
    ),
  })
  .map((r) => {
    const a: string[] = [];
    if (r.src) a.push(...(r.neg ? ["!"] : []), "-s", `${r.src[0]}/${r.src[1]}`);
    if (r.dst) a.push("-d", `${r.dst[0]}/${r.dst[1]}`);
    if (r.oif) a.push("-o", r.oif);
    if (r.proto) a.push("-p", r.proto);
    if (r.comment !== null) a.push("-m", "comment", "--comment", quote(r.comment));
    if (r.proto && r.dport) a.push("-m", r.proto, "--dport", String(r.dport));
    if (r.mark)
      a.push(
        "-m",
        "mark",
        ...(r.mark[1] ? ["!"] : []),
        "--mark",
        `0x${r.mark[0].toString(16)}/0xffff`,
      );
    a.push(r.target);
    return a.join(" ");
  });

describe("rule reading properties", () => {
  it("the fast path reads every line exactly as the general reader does", () => {
    fc.assert(
      fc.property(arbRuleArgs, (args) => {
        const line = `-A C ${args}`;
        const p1: string[] = [];
        const fast = parseRuleText(line, 5, 4, p1);
        const tk = tokenize(line, 5);
        const p2: string[] = [];
        const slow = parseRuleArgs(tk.tokens, tk.quoted, 0, 4, p2);
        assert.deepEqual(fast, slow);
        assert.deepEqual(p1, p2);
      }),
      { numRuns: 500 },
    );
  });

  it("render then parse gives the same rule (rendering is canonical and idempotent)", () => {
    fc.assert(
      fc.property(arbRuleArgs, (args) => {
        const d1 = parseIptablesSave(`-A C ${args}\n`, "a", { table: "nat" }).value;
        const once = renderRule(rulesOf(d1)[0]!);
        const d2 = parseIptablesSave(`${once}\n`, "b", { table: "nat" }).value;
        assert.equal(renderRule(rulesOf(d2)[0]!), once);
      }),
      { numRuns: 500 },
    );
  });

  it("never throws on mutated dumps, and every diagnostic names a line of the file", () => {
    const base = fixture("gke-legacy-kubenet_iptables-S-nat_kube-proxy_kubenet-snat.txt");
    const lines = base.split("\n");
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.nat(lines.length - 1),
            fc.nat(200),
            fc.string({ unit: "binary", maxLength: 8 }),
          ),
          {
            maxLength: 6,
          },
        ),
        fc.boolean(),
        (edits, header) => {
          const ls = [...lines];
          for (const [li, col, ins] of edits) {
            const l = ls[li]!;
            ls[li] = l.slice(0, col) + ins + l.slice(col + ins.length);
          }
          const text = (header ? "*nat\n" : "") + ls.join("\n");
          const { value, diagnostics } = parseIptablesSave(text, "m.txt");
          const lineCount = text.split("\n").length;
          for (const d of diagnostics) {
            assert.equal(d.source?.file, "m.txt");
            assert.ok(d.source.line >= 0 && d.source.line <= lineCount, `${d.source.line}`);
          }
          for (const r of rulesOf(value)) renderRule(r);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("never throws on random text", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 400 }), (s) => {
        parseIptablesSave(s, "r");
        parseIptablesSave(`*nat\n${s}`, "r");
      }),
      { numRuns: 1000 },
    );
  });
});
