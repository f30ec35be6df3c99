/**
 * @module iptables/test-helpers/list-compare — compares the reading of an iptables listing (-L, -S)
 * with the iptables-save reading of the same rules: equal rules wherever the form shows them,
 * hidden parts exactly where it does not, and never a different decided nat answer.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { type Family, formatIp, parseIp } from "../../net/cidr.ts";
import type { Chain, IptablesDump, Match, Rule, TableName } from "../dump.ts";
import { interpretMatch } from "../match-spec.ts";
import { compileNat } from "../nat-eval.ts";
import type { Flow, NatContext, NatTrace } from "../nat-trace.ts";
import { renderRule } from "../render.ts";

/** The modules whose `iptables -L` print is read back; others are hidden matches. */
export const READ_MODULES = new Set([
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

/** How a listing was printed. */
export interface Form {
  readonly args: readonly string[];
  readonly kind: "list" | "spec";
  readonly numeric: boolean;
  readonly verbose: boolean;
  /** Only this chain is printed. */
  readonly chain?: string;
  /** Paste the command line above the output. */
  readonly prompt: boolean;
}

/** Adjacent conntrack matches whose options come in print order read as one (as -L shows them). */
export function mergeConntrack(matches: readonly Match[], family: Family): Match[] {
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
export function masked(rule: Rule, hidden: readonly string[], family: Family): string {
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

export function maskedListed(rule: Rule, family: Family): string {
  return masked(
    rule,
    (rule.hidden ?? []).map((h) => h.part).filter((p) => p === "match" || p === "target"),
    family,
  );
}

export function hooksOf(chain: string): { inIface: boolean; outIface: boolean } {
  if (chain === "OUTPUT" || chain === "POSTROUTING") return { inIface: false, outIface: true };
  if (chain === "PREROUTING" || chain === "INPUT") return { inIface: true, outIface: false };
  return { inIface: true, outIface: true };
}

/** Compares a listing's reading with the save reading, table by table, chain by chain. */
export function compare(
  listed: IptablesDump,
  saved: IptablesDump,
  table: TableName,
  form: Form,
): number {
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
export function flowsFor(saved: IptablesDump): Flow[] {
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
export function sameAnswers(listed: IptablesDump, saved: IptablesDump, form: Form): number {
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
