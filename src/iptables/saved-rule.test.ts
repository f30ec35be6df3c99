import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { inspect } from "node:util";
import fc from "fast-check";
import type { Diagnostic } from "../model/types.ts";
import type { Family } from "../net/cidr.ts";
import type { IptablesDump, Rule } from "./dump.ts";
import { parseRuleArgs, type RuleParts } from "./rule-args.ts";
import {
  checkRuleAt,
  checkRuleText,
  materializeBase,
  materializeRule,
  NO_JUMP,
  NOT_CHECKED,
  newSegmentCache,
  parseRuleText,
  TextCursor,
} from "./rule-fast.ts";
import { parseIptablesSave } from "./save-parser.ts";
import { tokenize } from "./tokenize.ts";

const fixtureDir = new URL("./fixtures/", import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, fixtureDir), "utf8");

/** What the general reader (tokenize, then parseRuleArgs) makes of a line's arguments. */
function reference(line: string, from: number, family: Family) {
  const tk = tokenize(line, from);
  const problems: string[] = [];
  if (tk.unterminatedQuoteAt !== undefined) problems.push("unterminated quote");
  const parts = parseRuleArgs(tk.tokens, tk.quoted, 0, family, problems);
  return { parts, problems };
}

/** What each diagnostic is and where: `[code, line]`. */
const codesAndLines = (ds: readonly Diagnostic[]) => ds.map((d) => [d.code, d.source?.line]);

const jumpOf = (p: RuleParts) => (p.target?.kind === "chain" ? p.target.name : "");

const rulesOf = (d: IptablesDump): Rule[] =>
  [...d.tables.values()].flatMap((t) => [...t.chains.values()].flatMap((c) => c.rules));

// ---- lines: iptables-save's own forms, and the damage a hand-edited dump has ----------------

const arbOctet = fc.oneof(fc.nat(255).map(String), fc.constantFrom("01", "256", "999", ""));
const arbIp4 = fc.tuple(arbOctet, arbOctet, arbOctet, arbOctet).map((a) => a.join("."));
const arbAddr = fc.oneof(
  arbIp4,
  fc.tuple(arbIp4, fc.integer({ min: -1, max: 40 })).map(([a, p]) => `${a}/${p}`),
  fc
    .tuple(arbIp4, fc.constantFrom("255.255.0.0", "255.0.255.0", "0.0.0.0"))
    .map(([a, m]) => `${a}/${m}`),
  fc.constantFrom("fd00::1/128", "::/0", "10.0.0.0/8", "0.0.0.0/0", "1.2.3.4/032"),
);
const arbText = fc
  .string({ unit: fc.constantFrom("a", "b", " ", "-", "!", '"', "\\", "'", ":", "/", "\t", "é") })
  .map((s) => s.slice(0, 24));
const quote = (s: string) => `"${s.replace(/[\\"']/g, (c) => `\\${c}`)}"`;

const arbBase = fc.array(
  fc.oneof(
    fc
      .tuple(fc.boolean(), fc.constantFrom("-s", "-d"), arbAddr)
      .map(([n, o, a]) => `${n ? "! " : ""}${o} ${a}`),
    fc
      .tuple(
        fc.boolean(),
        fc.constantFrom("-i", "-o"),
        fc.constantFrom("eth0", "eth+", "lo", "x".repeat(17), '"eth0"'),
      )
      .map(([n, o, v]) => `${n ? "! " : ""}${o} ${v}`),
    fc
      .tuple(
        fc.boolean(),
        fc.constantFrom("tcp", "udp", "icmp", "sctp", "TCP", "6", "all", "0", "gre"),
      )
      .map(([n, p]) => `${n ? "! " : ""}-p ${p}`),
    fc.constantFrom("-f", "! -f", "! !", "!", "-4", "-c 1 2", "--source 10.0.0.1"),
  ),
  { maxLength: 4 },
);

const arbMatch = fc.oneof(
  arbText.map((t) => `-m comment --comment ${quote(t)}`),
  arbText.map((t) => `-m comment --comment "${t}"`),
  fc.constantFrom(
    "-m comment --comment",
    '-m comment --comment "',
    '-m comment --comment ""',
    "-m comment --comment plain",
    "-m tcp --dport 80",
    "-m tcp --dport 70000",
    "-m udp ! --sport 53",
    "-m multiport --dports 80,443",
    "-m statistic --mode random --probability 0.50000000000",
    "-m statistic --mode nth --every 3 --packet 0",
    "-m addrtype ! --dst-type LOCAL",
    "-m addrtype --src-type LOCAL --limit-iface-out",
    "-m mark --mark 0x4000/0x4000",
    "-m mark ! --mark 0x4000/0x4000",
    "-m conntrack --ctstate NEW,ESTABLISHED",
    "-m conntrack --ctstate BOGUS",
    "-m set --match-set KUBE-X dst",
    "-m recent --set --name x",
    "-m nosuchmodule --x y",
    "-m tcp",
    "-m",
  ),
);

const arbTarget = fc.oneof(
  fc.constantFrom(
    "-j RETURN",
    "-j ACCEPT",
    "-j MASQUERADE",
    "-j MASQUERADE --random-fully",
    "-j MASQUERADE --to-ports 1024-2048",
    "-j KUBE-MARK-MASQ",
    "-g KUBE-SEP-ABC",
    "-g RETURN",
    "-j MARK --set-xmark 0x4000/0x4000",
    "-j SNAT --to-source 1.2.3.4",
    "-j DNAT --to-destination 10.1.2.3:80",
    "-j DNAT --to-destination 10.1.2.3",
    "-j DNAT --to-destination 10.1.2.3:99999",
    "-j DNAT --to-destination 10.1.2.3:80-90",
    "-j DNAT --to-destination 10.1.2.3-10.1.2.9:80",
    "-j DNAT --to-destination 10.1.2.300:80",
    "-j DNAT --to-destination [fd00::1]:80",
    "-j DNAT --to-destination 10.1.2.3:80 --random",
    "-j REJECT --reject-with icmp-port-unreachable",
    "-j KUBE-X --bogus",
    "-j",
    "-j ",
    "",
  ),
  arbText.map((t) => `-j LOG --log-prefix ${quote(t)}`),
);

const arbArgs = fc
  .tuple(
    arbBase,
    fc.array(arbMatch, { maxLength: 3 }),
    arbTarget,
    fc.array(arbMatch, { maxLength: 1 }),
  )
  .map(([b, m, t, after]) => [...b, ...m, t, ...after].filter((x) => x !== "").join(" "));

/** Damage as an editor or a cut makes it: a character put in, taken out or changed. */
const arbDamaged = fc
  .tuple(
    arbArgs,
    fc.nat(200),
    fc.constantFrom("", " ", "  ", '"', "\\", "!", "-", "\t", "\r", "-m", "-j"),
  )
  .map(([s, at, ins]) => {
    const i = Math.min(at, s.length);
    return s.slice(0, i) + ins + s.slice(i + (at % 2));
  });

const arbLineArgs = fc.oneof(arbArgs, arbDamaged);

describe("checked rule lines", () => {
  for (const family of [4, 6] as const) {
    it(`accepts only lines the general reader reads without a problem, and builds them to the same parts (IPv${family})`, () => {
      fc.assert(
        fc.property(arbLineArgs, (args) => {
          const line = `-A C ${args}`;
          const cache = newSegmentCache();
          const jump = checkRuleText(line, 5, family, cache);
          const ref = reference(line, 5, family);
          // the line read whole (the fast builder where it can) is the general reader's reading
          const problems: string[] = [];
          assert.deepEqual(parseRuleText(line, 5, family, problems, cache), ref.parts, line);
          assert.equal(problems.length > 0, ref.problems.length > 0, line);
          if (jump === undefined) return;
          assert.deepEqual(ref.problems, [], `accepted a line with problems: ${line}`);
          assert.deepEqual(materializeRule(line, 5, family, cache), ref.parts, line);
          assert.equal(jump, jumpOf(ref.parts), line);
          // the base options read alone are the whole reading's
          const { matches: _m, target: _t, counters: _c, ...base } = ref.parts;
          assert.deepEqual({ ...materializeBase(line, 5, family, newSegmentCache()) }, base, line);
        }),
        { numRuns: Number(process.env.PODPATH_FUZZ_RUNS ?? 3000) },
      );
    });
  }

  it("takes the common forms (a check that refused everything would pass the property above)", () => {
    const cache = newSegmentCache();
    const accepted = [
      '-A KUBE-SEP-X -s 10.6.61.60/32 -m comment --comment "ns/web:http" -j KUBE-MARK-MASQ',
      '-A KUBE-SEP-X -p tcp -m comment --comment "ns/web:http" -m tcp -j DNAT --to-destination 10.6.61.60:8080',
      '-A KUBE-SVC-Y ! -s 10.4.0.0/14 -d 10.8.9.106/32 -p tcp -m comment --comment "ns/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ',
      '-A KUBE-SVC-Y -m comment --comment "ns/web:http -> 10.6.61.60:8080" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-X',
      "-A POSTROUTING -m addrtype ! --dst-type LOCAL -j IP-MASQ",
      "-A IP-MASQ -d 169.254.0.0/16 -j RETURN",
      "-A IP-MASQ -j MASQUERADE --random-fully",
      "-A KUBE-POSTROUTING",
    ];
    const args = (line: string) =>
      line.indexOf(" ", 3) < 0 ? line.length : line.indexOf(" ", 3) + 1;
    for (const line of accepted) {
      assert.notEqual(checkRuleText(line, args(line), 4, cache), undefined, line);
    }
    assert.equal(checkRuleText(accepted[0]!, args(accepted[0]!), 4, cache), "KUBE-MARK-MASQ");
    assert.equal(checkRuleText(accepted[1]!, args(accepted[1]!), 4, cache), "");
    assert.equal(checkRuleText(accepted[3]!, args(accepted[3]!), 4, cache), "KUBE-SEP-X");
  });

  it("gives every line of a text the answer it gives the line alone, checked in order with one cursor", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(arbLineArgs, fc.constantFrom("\n", "\r\n")), {
          minLength: 1,
          maxLength: 12,
        }),
        (lines) => {
          const text = lines.map(([a, eol]) => `-A C ${a}${eol}`).join("");
          const cur = new TextCursor(text);
          let pos = 0;
          for (const [args, eol] of lines) {
            const line = `-A C ${args}`;
            const stop = pos + line.length;
            const r = checkRuleAt(cur, pos + 5, stop, 4, newSegmentCache());
            const inText = r === NOT_CHECKED ? undefined : r === NO_JUMP ? "" : text.slice(r, stop);
            assert.equal(
              inText,
              checkRuleText(line, 5, 4, newSegmentCache()),
              JSON.stringify(line),
            );
            pos = stop + eol.length;
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe("a dump read lazily", () => {
  const fixtures = readdirSync(fixtureDir).filter((f) => f.endsWith(".txt"));

  it("has fixtures to read", () => {
    assert.ok(fixtures.length >= 5, fixtures.join(" "));
  });

  for (const f of fixtures) {
    it(`${f}: every rule equals what the general reader makes of its line`, () => {
      const text = fixture(f);
      const { value } = parseIptablesSave(text, f);
      const rules = rulesOf(value);
      assert.ok(rules.length > 0);
      for (const r of rules) {
        const line = r.source.text ?? "";
        assert.equal(line, text.split(/\r?\n/)[r.source.line - 1]!.trim());
        const at = line.indexOf("-A ") >= 0 ? line.indexOf("-A ") : line.indexOf("-I ");
        const from = line.indexOf(" ", at + 3) < 0 ? line.length : line.indexOf(" ", at + 3) + 1;
        const ref = reference(line, from, value.family);
        const got = (r as unknown as { toJSON(): Rule }).toJSON();
        assert.deepEqual(got.matches, ref.parts.matches, line);
        assert.deepEqual(got.target, ref.parts.target, line);
        assert.deepEqual(
          [got.protocol, got.src, got.dst, got.inIface, got.outIface, got.fragment],
          [
            ref.parts.protocol,
            ref.parts.src,
            ref.parts.dst,
            ref.parts.inIface,
            ref.parts.outIface,
            ref.parts.fragment,
          ],
          line,
        );
      }
    });
  }

  it("reports a problem on every line the general reader finds one in, and on no other", () => {
    fc.assert(
      fc.property(fc.array(arbLineArgs, { minLength: 1, maxLength: 20 }), (argsList) => {
        const lines = argsList.map((a) => `-A C ${a}`);
        const text = `*nat\n:C - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:KUBE-SEP-ABC - [0:0]\n:KUBE-X - [0:0]\n${lines.join("\n")}\nCOMMIT\n`;
        const { diagnostics } = parseIptablesSave(text, "t.txt", { family: 4 });
        // a problem in the arguments (IPTABLES_SYNTAX when the line had to be tokenized whole)
        const flagged = new Set(
          diagnostics
            .filter((d) => d.code === "IPTABLES_RULE" || d.code === "IPTABLES_SYNTAX")
            .map((d) => d.source?.line),
        );
        lines.forEach((line, i) => {
          const ref = reference(line, 5, 4);
          assert.equal(flagged.has(i + 6), ref.problems.length > 0, JSON.stringify(line));
        });
      }),
      { numRuns: Number(process.env.PODPATH_FUZZ_RUNS ?? 3000) / 5 },
    );
  });
});

describe("SavedRule", () => {
  const text = [
    "*nat",
    ":POSTROUTING ACCEPT [0:0]",
    ":KUBE-SEP-X - [0:0]",
    '[5:300] -A POSTROUTING -m comment --comment "masq" -j MASQUERADE',
    '-A KUBE-SEP-X -p tcp -m comment --comment "ns/web" -m tcp -j DNAT --to-destination 10.6.61.60:8080',
    "-A KUBE-SEP-X -j KUBE-NOWHERE",
    "COMMIT",
    "",
  ].join("\r\n");
  const { value, diagnostics } = parseIptablesSave(text, "n/iptables-save.txt");
  const nat = value.tables.get("nat")!;

  it("reads counters in front of a checked line, and cites the line without its line ending", () => {
    const r = nat.chains.get("POSTROUTING")!.rules[0]!;
    assert.deepEqual(r.counters, { packets: 5n, bytes: 300n });
    assert.equal(r.target?.kind, "MASQUERADE");
    assert.deepEqual(r.source, {
      file: "n/iptables-save.txt",
      line: 4,
      text: '[5:300] -A POSTROUTING -m comment --comment "masq" -j MASQUERADE',
    });
    assert.equal(r.table, "nat");
    assert.equal(r.chain, "POSTROUTING");
    assert.equal(r.index, 1);
  });

  it("builds a checked rule on first use, the same each time", () => {
    const r = nat.chains.get("KUBE-SEP-X")!.rules[0]!;
    assert.equal(r.target, r.target);
    assert.equal(r.source, r.source);
    assert.deepEqual(r.target, {
      kind: "DNAT",
      name: "DNAT",
      to: {
        from: { family: 4, value: 0x0a063d3cn },
        to: { family: 4, value: 0x0a063d3cn },
        ports: { from: 8080, to: 8080 },
      },
      random: false,
      randomFully: false,
      persistent: false,
    });
    assert.equal(r.counters, undefined);
  });

  it("hands out the same base options before and after the rest is read", () => {
    const d = parseIptablesSave(
      "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n-A KUBE-SERVICES -d 10.8.0.10/32 -p tcp -m tcp --dport 53 -j KUBE-SVC-A\nCOMMIT\n",
      "x",
    ).value;
    const r = d.tables.get("nat")!.chains.get("KUBE-SERVICES")!.rules[0]!;
    const dst = r.dst;
    const protocol = r.protocol;
    assert.equal(dst?.cidr.prefix, 32);
    assert.equal(r.target?.kind, "chain");
    assert.equal(r.dst, dst);
    assert.equal(r.protocol, protocol);
    assert.equal(r.matches.length, 1);
  });

  it("reports a jump to a chain never declared, once the table ends, at the jumping rule", () => {
    const d = diagnostics.filter((x) => x.code === "IPTABLES_UNDECLARED_CHAIN");
    assert.deepEqual(
      d.map((x) => [x.source?.line, x.message.includes("KUBE-NOWHERE")]),
      [[6, true]],
    );
  });

  it("shows and serialises as the plain rule it stands for", () => {
    const r = nat.chains.get("KUBE-SEP-X")!.rules[1]!;
    const plain = JSON.parse(JSON.stringify(r));
    assert.equal(plain.chain, "KUBE-SEP-X");
    assert.deepEqual(plain.target, { kind: "chain", name: "KUBE-NOWHERE", goto: false });
    assert.equal(plain.source.line, 6);
    assert.match(inspect(r), /KUBE-NOWHERE/);
  });
});

describe("big dumps", () => {
  // A hang guard, not a speed test (the benchmark measures speed): a search that is not bounded
  // by its line runs to the end of the text on every line, which at this size takes minutes.
  it("reads 60,000 chains and 120,000 rules with no tab, quote or backslash after the first lines", {
    timeout: 60_000,
  }, () => {
    const n = 60_000;
    const lines = [
      "*nat",
      ":POSTROUTING ACCEPT [0:0]",
      ":KUBE-MARK-MASQ - [0:0]",
      '-A POSTROUTING -m comment --comment "x" -j KUBE-MARK-MASQ',
    ];
    for (let i = 0; i < n; i++)
      lines.push(`:KUBE-SEP-${i.toString(36).toUpperCase().padStart(16, "0")} - [0:0]`);
    for (let i = 0; i < n; i++) {
      const c = `KUBE-SEP-${i.toString(36).toUpperCase().padStart(16, "0")}`;
      lines.push(`-A ${c} -s 10.6.${(i >> 8) & 255}.${i & 255}/32 -j KUBE-MARK-MASQ`);
      lines.push(
        `-A ${c} -p tcp -m tcp -j DNAT --to-destination 10.6.${(i >> 8) & 255}.${i & 255}:8080`,
      );
    }
    lines.push("COMMIT", "");
    const { value, diagnostics } = parseIptablesSave(lines.join("\n"), "big.txt");
    assert.deepEqual(diagnostics, []);
    const nat = value.tables.get("nat")!;
    assert.equal(nat.chains.size, n + 5);
    const last = nat.chains.get(
      `KUBE-SEP-${(n - 1).toString(36).toUpperCase().padStart(16, "0")}`,
    )!;
    assert.equal(last.rules[1]!.target?.kind, "DNAT");
    assert.equal(last.declared?.line, n + 4);
  });
});

describe("chains declared twice or used before declared", () => {
  it("keeps the first declaration and its rules, and says the second is one", () => {
    const { value, diagnostics } = parseIptablesSave(
      "*nat\n:KUBE-A - [0:0]\n-A KUBE-A -j RETURN\n:KUBE-A - [0:0]\n-A KUBE-A -j ACCEPT\nCOMMIT\n",
      "d.txt",
    );
    const a = value.tables.get("nat")!.chains.get("KUBE-A")!;
    assert.deepEqual(
      a.rules.map((r) => [r.index, r.target?.kind === "verdict" && r.target.name]),
      [
        [1, "RETURN"],
        [2, "ACCEPT"],
      ],
    );
    assert.equal(a.declared?.line, 2);
    assert.deepEqual(codesAndLines(diagnostics), [["IPTABLES_DUPLICATE_CHAIN", 4]]);
  });

  it("a chain used before its declaration is one chain, declared where the declaration is", () => {
    const { value, diagnostics } = parseIptablesSave(
      "-A KUBE-B -j RETURN\n-N KUBE-B\n-A POSTROUTING -j KUBE-B\n",
      "s.txt",
      { table: "nat" },
    );
    const b = value.tables.get("nat")!.chains.get("KUBE-B")!;
    assert.equal(b.rules.length, 1);
    assert.equal(b.declared?.line, 2);
    assert.deepEqual(codesAndLines(diagnostics), [["IPTABLES_UNDECLARED_CHAIN", 1]]);
  });
});

describe("lines the checker once let through", () => {
  it("a comment whose quote never closes at the end of the line is reported", () => {
    const { diagnostics } = parseIptablesSave(
      '*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -m comment --comment "\nCOMMIT\n',
      "x",
    );
    assert.deepEqual(codesAndLines(diagnostics), [["IPTABLES_RULE", 3]]);
  });

  it("a tab after the chain name separates it from the arguments, as iptables-restore reads it", () => {
    const { value, diagnostics } = parseIptablesSave(
      "*nat\n:POSTROUTING ACCEPT [0:0]\n:X - [0:0]\n-A X\t-j RETURN\n-A POSTROUTING\t-s 10.0.0.0/8 -j X\nCOMMIT\n",
      "t.txt",
    );
    assert.deepEqual(diagnostics, []);
    const nat = value.tables.get("nat")!;
    assert.deepEqual(nat.chains.get("X")!.rules[0]!.target, { kind: "verdict", name: "RETURN" });
    const r = nat.chains.get("POSTROUTING")!.rules[0]!;
    assert.equal(r.src?.cidr.prefix, 8);
    assert.deepEqual(r.target, { kind: "chain", name: "X", goto: false });
  });

  it('"!" twice in the base options is reported', () => {
    const { diagnostics } = parseIptablesSave(
      "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING ! ! -s 10.0.0.0/8 -j RETURN\nCOMMIT\n",
      "x",
    );
    assert.deepEqual(codesAndLines(diagnostics), [["IPTABLES_RULE", 3]]);
  });
});
