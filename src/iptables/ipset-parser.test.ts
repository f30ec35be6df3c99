/**
 * The ipset reader on the real tool's output: sets made with the real `ipset` in a throw-away
 * network namespace (IP sets belong to a namespace) and printed by `ipset save`, `ipset list` and
 * `ipset list -t`; both full forms must read to the same sets and members, and membership
 * (hash:net most-specific entry and `nomatch`, hash:ip, bitmap:ip) must match the kernel's
 * `ipset test`. Bad input gives Diagnostics with the file and line, never a throw.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { kernelSkip } from "../lab/kernel-guard.ts";
import { parseIp } from "../net/cidr.ts";
import { ipsetMembership } from "./ipset-member.ts";
import { parseIpset } from "./ipset-parser.ts";
import { hasCommand, iptablesNamespace } from "./test-helpers/iptables-netns.ts";

const RESTORE = `create cali40masq-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576
add cali40masq-ipam-pools 10.244.0.0/16
create cali40all-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576
add cali40all-ipam-pools 10.244.0.0/16
add cali40all-ipam-pools 10.250.0.0/16
add cali40all-ipam-pools 10.250.3.0/24 nomatch
add cali40all-ipam-pools 10.250.3.128/25
create cali60masq-ipam-pools hash:net family inet6 hashsize 1024 maxelem 1048576 comment
add cali60masq-ipam-pools fd00:10:244::/64 comment "pool default-ipv6-ippool"
create pp-hosts hash:ip family inet
add pp-hosts 192.168.7.7
create pp-bitmap bitmap:ip range 192.168.9.0/24
add pp-bitmap 192.168.9.5
create pp-pairs hash:net,iface family inet
add pp-pairs 10.0.0.0/8,eth0
`;

const PROBES: readonly [string, string][] = [
  ["cali40masq-ipam-pools", "10.244.1.5"],
  ["cali40masq-ipam-pools", "10.20.30.40"],
  ["cali40all-ipam-pools", "10.250.1.1"],
  ["cali40all-ipam-pools", "10.250.3.7"],
  ["cali40all-ipam-pools", "10.250.3.200"],
  ["cali40all-ipam-pools", "10.251.0.1"],
  ["cali60masq-ipam-pools", "fd00:10:244::5"],
  ["cali60masq-ipam-pools", "fd00:10:245::5"],
  ["pp-hosts", "192.168.7.7"],
  ["pp-hosts", "192.168.7.8"],
  ["pp-bitmap", "192.168.9.5"],
  ["pp-bitmap", "192.168.9.6"],
];

const skip = kernelSkip() || (hasCommand("ipset") ? false : "ipset is not installed");

describe("parseIpset on the real ipset's output", { skip }, () => {
  const suite = iptablesNamespace("ppis");

  async function run(argv: string[], input?: string): Promise<string> {
    const r = await suite.ns.exec(argv, input === undefined ? {} : { input });
    assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
    return r.stdout;
  }

  it("reads save and list forms to the same sets, and answers membership as `ipset test`", async () => {
    await run(["ipset", "restore"], RESTORE);
    const save = parseIpset(await run(["ipset", "save"]), "ipset-save.txt");
    const list = parseIpset(await run(["ipset", "list"]), "ipset-list.txt");
    assert.deepEqual(save.diagnostics, []);
    assert.deepEqual(list.diagnostics, []);
    assert.equal(save.value.form, "save");
    assert.equal(list.value.form, "list");
    assert.deepEqual([...save.value.sets.keys()].sort(), [...list.value.sets.keys()].sort());
    for (const [name, s] of save.value.sets) {
      const l = list.value.sets.get(name);
      assert.equal(l?.type, s.type, name);
      assert.equal(l?.family, s.family, name);
      assert.deepEqual(
        l?.members?.map((m) => [m.element, m.nomatch]),
        s.members?.map((m) => [m.element, m.nomatch]),
        name,
      );
    }
    assert.equal(save.value.sets.get("cali60masq-ipam-pools")?.family, 6);
    for (const [name, addr] of PROBES) {
      const kernel = await suite.ns.exec(["ipset", "test", name, addr]);
      const ip = parseIp(addr);
      for (const dump of [save.value, list.value]) {
        const r = ipsetMembership(dump, name, ip.family, ip.value);
        assert.equal(r.kind, kernel.code === 0 ? "member" : "not-member", `${name} ${addr}`);
      }
    }
    // a two-dimensional set is kept, not decided
    const pair = ipsetMembership(save.value, "pp-pairs", 4, parseIp("10.1.1.1").value);
    assert.equal(pair.kind, "cannot-tell");
  });

  it("keeps the members of `ipset list -t` as not shown", async () => {
    const terse = parseIpset(await run(["ipset", "list", "-t"]), "ipset-t.txt");
    assert.deepEqual(terse.diagnostics, []);
    const s = terse.value.sets.get("cali40masq-ipam-pools");
    assert.equal(s?.members, undefined);
    const r = ipsetMembership(terse.value, "cali40masq-ipam-pools", 4, parseIp("10.244.0.1").value);
    assert.equal(r.kind, "cannot-tell");
    assert.match(r.kind === "cannot-tell" ? r.reason : "", /ipset save/);
  });
});

describe("parseIpset on bad input", () => {
  it("names the file and line of what it cannot read, and keeps the rest", () => {
    const text =
      "create s hash:net family inet\nadd s 10.0.0.0/8\nadd t 1.2.3.4\nadd s not-an-ip\nbogus line\n";
    const r = parseIpset(text, "nodes/n1/ipset.txt");
    assert.deepEqual(
      r.diagnostics.map((d) => [d.source?.file, d.source?.line]),
      [
        ["nodes/n1/ipset.txt", 3],
        ["nodes/n1/ipset.txt", 4],
        ["nodes/n1/ipset.txt", 5],
      ],
    );
    assert.equal(r.value.sets.get("s")?.members?.length, 2);
    const m = ipsetMembership(r.value, "s", 4, parseIp("10.1.1.1").value);
    assert.equal(m.kind, "cannot-tell");
  });

  it("never throws on random or mutated input, and every diagnostic names a line of it", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 400 }),
          fc
            .array(fc.integer({ min: 0, max: RESTORE.length }), { maxLength: 6 })
            .map((cuts) => cuts.reduce((t, c) => t.slice(0, c) + t.slice(c + 7), RESTORE)),
        ),
        (text) => {
          const r = parseIpset(text, "fuzz.txt");
          const lines = text.split(/\r?\n/).length;
          for (const d of r.diagnostics) {
            assert.equal(d.source?.file, "fuzz.txt");
            assert.ok((d.source?.line ?? 0) >= 1 && (d.source?.line ?? 0) <= lines);
            assert.ok(d.message.length > 10);
          }
          for (const s of r.value.sets.values()) {
            ipsetMembership(r.value, s.name, 4, 0x0a000001n);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
