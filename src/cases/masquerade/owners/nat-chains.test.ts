/**
 * @module cases/masquerade/owners/nat-chains.test — matching nat chain names: in the dump's order,
 * the same answer asked again, and a fresh answer once the dump has another chain.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { readIptablesText } from "../../../iptables/read-iptables-text.ts";
import { natChainsMatching } from "./nat-chains.ts";

const DUMP = `*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SVC-AAA - [0:0]
:CILIUM_POST_nat - [0:0]
:KUBE-SEP-BBB - [0:0]
:IP-MASQ-AGENT - [0:0]
COMMIT
`;

test("the nat chains a pattern matches, in the dump's order, asked twice", () => {
  const dump = readIptablesText(DUMP, "iptables-save.txt", { family: 4 }).value;
  assert.ok(dump);
  assert.deepEqual(natChainsMatching(dump, /^KUBE-/), ["KUBE-SVC-AAA", "KUBE-SEP-BBB"]);
  assert.deepEqual(natChainsMatching(dump, /^KUBE-/), ["KUBE-SVC-AAA", "KUBE-SEP-BBB"]);
  assert.deepEqual(natChainsMatching(dump, /MASQ/), ["IP-MASQ-AGENT"]);
  assert.deepEqual(natChainsMatching(dump, /^cali-/), []);
  assert.deepEqual(natChainsMatching(undefined, /^KUBE-/), []);
});

test("a chain added after a first answer is counted", () => {
  const dump = readIptablesText(DUMP, "iptables-save.txt", { family: 4 }).value;
  assert.ok(dump);
  assert.deepEqual(natChainsMatching(dump, /^cali-/), []);
  const nat = dump.tables.get("nat");
  assert.ok(nat);
  const chain = nat.chains.get("KUBE-SVC-AAA");
  assert.ok(chain);
  nat.chains.set("cali-nat-outgoing", { ...chain, name: "cali-nat-outgoing" });
  assert.deepEqual(natChainsMatching(dump, /^cali-/), ["cali-nat-outgoing"]);
});

test("a global pattern answers the same for every name", () => {
  const dump = readIptablesText(DUMP, "iptables-save.txt", { family: 4 }).value;
  assert.deepEqual(natChainsMatching(dump, /^KUBE-/g), ["KUBE-SVC-AAA", "KUBE-SEP-BBB"]);
});

test("searching the names as one text answers as testing each name alone would", () => {
  const dump = readIptablesText(DUMP, "iptables-save.txt", { family: 4 }).value;
  assert.ok(dump);
  const names = [...(dump.tables.get("nat")?.chains.keys() ?? [])];
  const patterns = [
    /MASQ|^AWS-SNAT-CHAIN-/,
    /^KUBE-[^X]*$/,
    /[^Z]+/,
    /ING$/,
    /^.*$/s,
    /^[\s\S]*-B/,
    /(?<!KUBE-)SEP/,
    /AGENT(?!.)/,
    /^$/,
    /a/i,
    /\bPOST/,
  ];
  for (const p of patterns)
    assert.deepEqual(
      natChainsMatching(dump, p),
      names.filter((n) => p.test(n)),
      String(p),
    );
});
