import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { formatCidr } from "../net/cidr.ts";
import { type IpRule, readIpRule } from "./ip-rule.ts";

const DIR = join(import.meta.dirname, "fixtures/ip-rule");
const read = (f: string) => readIpRule(readFileSync(join(DIR, f), "utf8"), f);

/** The facts of a rule, without where it was read. */
function facts(r: IpRule) {
  const { source: _s, from, to, ...rest } = r;
  return {
    ...rest,
    ...(from ? { from: formatCidr(from) } : {}),
    ...(to ? { to: formatCidr(to) } : {}),
  };
}

describe("ip rule, as iproute2 prints it", () => {
  it("reads every selector and action of the text form, with its line", () => {
    const { value, diagnostics } = read("rules.txt");
    assert.deepEqual(diagnostics, []);
    assert.deepEqual(
      value.map((r) => [r.priority, r.action, r.table ?? r.goto ?? null]),
      [
        [0, "lookup", "local"],
        [100, "lookup", "100"],
        [200, "lookup", "200"],
        [300, "prohibit", null],
        [400, "goto", 32766],
        [500, "lookup", "main"],
        [600, "blackhole", null],
        [700, "lookup", "300"],
        [800, "nop", null],
        [900, "unreachable", null],
        [32766, "lookup", "main"],
        [32767, "lookup", "default"],
      ],
    );
    const r400 = value.find((r) => r.priority === 400)!;
    assert.deepEqual(facts(r400), {
      priority: 400,
      not: false,
      iif: "d0",
      oif: "d0",
      uidrange: { from: 1000, to: 2000 },
      ipproto: "tcp",
      sport: { from: 1000, to: 2000 },
      dport: { from: 5432, to: 5432 },
      action: "goto",
      goto: 32766,
      attributes: {},
    });
    const r300 = value.find((r) => r.priority === 300)!;
    assert.equal(r300.not, true);
    assert.equal(r300.iif, "lo");
    assert.equal(formatCidr(r300.to!), "192.0.2.0/24");
    assert.deepEqual(value.find((r) => r.priority === 200)!.fwmark, {
      value: 0x4000,
      mask: 0x4000,
    });
    assert.deepEqual(value.find((r) => r.priority === 700)!.fwmark, { value: 7, mask: 0xffffffff });
    assert.equal(value.find((r) => r.priority === 500)!.suppressPrefixLength, 0);
    assert.equal(value.find((r) => r.priority === 600)!.tos, 0x10);
    assert.equal(r400.source.line, 5);
    assert.match(r400.source.text ?? "", /^400:/);
  });

  it("gives the same rules from -d (with its proto words) and from -j (JSON)", () => {
    const text = read("rules.txt").value.map(facts);
    const details = read("rules-details.txt");
    assert.deepEqual(details.diagnostics, []);
    assert.deepEqual(
      details.value.map((r) => {
        const { proto, ...rest } = r.attributes;
        assert.ok(proto === "kernel" || proto === "unspec" || proto === "boot", String(proto));
        return { ...facts(r), attributes: rest };
      }),
      text,
    );
    const json = read("rules.json");
    assert.deepEqual(json.diagnostics, []);
    assert.deepEqual(json.value.map(facts), text);
  });

  it("reads ip -6 rule, and passes over prompts and blank lines", () => {
    const six = read("rules-v6.txt");
    assert.deepEqual(
      six.value.map((r) => r.table),
      ["local", "main"],
    );
    const pasted = readIpRule(
      "$ ip rule\n\n0:\tfrom all lookup local\nroot@node:~# ip rule show\n",
      "p.txt",
    );
    assert.deepEqual(pasted.diagnostics, []);
    assert.equal(pasted.value.length, 1);
  });

  it("names the file, line and what was expected for a line it cannot read, and reads on", () => {
    const { value, diagnostics } = readIpRule(
      "0:\tfrom all lookup local\nnot a rule\n100:\tfrom 10.4.0.0/99 lookup 100\n32766:\tfrom all lookup main\n",
      "ip-rule.txt",
    );
    assert.deepEqual(
      value.map((r) => r.priority),
      [0, 32766],
    );
    assert.deepEqual(
      diagnostics.map((d) => d.message),
      [
        'ip-rule.txt:2: expected a rule line: PRIORITY:<tab>[not] from SELECTOR ... ACTION, found "not a rule"',
        'ip-rule.txt:3: expected a value after "from", found "100:\\tfrom 10.4.0.0/99 lookup 100"',
      ],
    );
    const bad = readIpRule("[{", "j.json");
    assert.equal(bad.diagnostics[0]?.code, "IP_RULE_JSON_UNREADABLE");
  });
});
