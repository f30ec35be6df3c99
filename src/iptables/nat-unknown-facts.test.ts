/**
 * Property of the evaluator under partial evidence: on random rule sets (the lab's generator, the
 * same the differential suite loads into the kernel), hiding any one fact — the node's addresses,
 * the incoming or outgoing interface, a rule's interface, whether a chain is complete, a chain
 * itself — gives either the same answer as with the fact, or a fork one of whose branches is that
 * answer (or, where the hidden fact is a whole chain or the interfaces of a listing, an explicit
 * "cannot follow" branch: a listing without -v is one fact, "no rule tests an interface it hides",
 * whose other side podpath does not walk rule by rule). Never a different single answer.
 *
 * Reproduce one seed: PODPATH_FACTS_SEED=<seed> PODPATH_FACTS_SETS=1 node scripts/test.mjs nat-unknown
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  GEN_IN_IFACE,
  GEN_NODE_IP,
  GEN_OUT_IFACE,
  generateFlows,
  generateRuleSet,
  renderRuleSet,
} from "../lab/nat-gen.ts";
import { sandboxContext, sandboxFlow } from "../lab/replay.ts";
import type { IptablesDump, Rule } from "./dump.ts";
import { compileNat } from "./nat-eval.ts";
import type { Flow, NatContext, NatTrace } from "./nat-trace.ts";
import { parseIptablesSave } from "./save-parser.ts";

const BASE_SEED = Number(process.env["PODPATH_FACTS_SEED"] ?? 20261202);
const SETS = Number(process.env["PODPATH_FACTS_SETS"] ?? 300);
const FLOWS = 8;

const full = sandboxContext(GEN_NODE_IP, GEN_IN_IFACE, GEN_OUT_IFACE);

/** What the question asks of an answer: decision, where it ends, the source, the deciding rule. */
function answerOf(t: NatTrace): string | undefined {
  if (t.decision === "branches" || t.decision === "cannot-decide") return undefined;
  let rule = t.decidingRule;
  if (t.decision === "keep") {
    const ret = [...t.steps].reverse().find((s) => s.kind === "return" && s.ruleIndex > 0);
    if (ret) rule = ret.source;
  }
  const ip = t.sourceOut?.ip;
  return [
    t.decision,
    t.delivery,
    ip ? `${ip.family}:${ip.value}` : "?",
    rule ? rule.line : "-",
  ].join(" ");
}

/** Every decided answer among the branches (nested ones too), and whether one is undecided. */
function outcomes(t: NatTrace): { answers: Set<string>; open: boolean } {
  const answers = new Set<string>();
  let open = false;
  const visit = (x: NatTrace) => {
    if (x.decision === "branches") for (const b of x.branches ?? []) visit(b.trace);
    else {
      const a = answerOf(x);
      if (a === undefined) open = true;
      else answers.add(a);
    }
  };
  visit(t);
  return { answers, open };
}

interface Case {
  readonly seed: number;
  readonly what: string;
  readonly flow: string;
  readonly known: string;
  readonly hidden: NatTrace;
  /** An undecided branch stands for what the hidden fact would have done (a chain, interfaces). */
  readonly openAllowed?: boolean;
}

function holds(c: Case): string | undefined {
  const single = answerOf(c.hidden);
  if (single !== undefined) {
    return single === c.known
      ? undefined
      : `a different single answer: ${single} instead of ${c.known}`;
  }
  if (c.hidden.decision !== "branches")
    return `${c.hidden.decision}: ${c.hidden.undecided?.reason ?? "?"}`;
  const { answers, open } = outcomes(c.hidden);
  if (answers.has(c.known)) return undefined;
  if (c.openAllowed && open) return undefined;
  return `a fork without the answer ${c.known}: ${[...answers].join(" | ")}${open ? " | (undecided)" : ""}`;
}

const withoutAddresses: NatContext = {
  interfaces: (full.interfaces ?? []).map((i) => ({
    name: i.name,
    ...(i.primary ? { primary: i.primary } : {}),
  })),
  ...(full.nodeInternalIp ? { nodeInternalIp: full.nodeInternalIp } : {}),
};

function parse(text: string): IptablesDump {
  return parseIptablesSave(text, "generated").value;
}

describe("nat evaluator with one fact hidden (random rule sets)", () => {
  it(`never gives a different single answer on ${SETS} rule sets x ${FLOWS} flows from seed ${BASE_SEED}`, (t) => {
    const failures: string[] = [];
    const counts = new Map<string, { same: number; fork: number; checked: number }>();
    const tally = (c: Case) => {
      const k = counts.get(c.what) ?? { same: 0, fork: 0, checked: 0 };
      k.checked++;
      if (c.hidden.decision === "branches") k.fork++;
      else k.same++;
      counts.set(c.what, k);
      const bad = holds(c);
      if (bad) failures.push(`seed ${c.seed}, ${c.what}, flow ${c.flow}: ${bad}`);
    };
    for (let s = 0; s < SETS; s++) {
      const seed = BASE_SEED + s;
      const set = generateRuleSet(seed);
      const text = renderRuleSet(set);
      const dump = parse(text);
      const known = compileNat(dump, full);
      const flows = generateFlows(seed, FLOWS).map((f) =>
        sandboxFlow(f, GEN_IN_IFACE, GEN_OUT_IFACE),
      );
      const variants: { what: string; eval: (f: Flow) => NatTrace; openAllowed?: boolean }[] = [];
      const noAddr = compileNat(dump, withoutAddresses);
      variants.push({ what: "the node's addresses", eval: (f) => noAddr.evaluate(f) });
      variants.push({
        what: "the incoming interface",
        eval: (f) => {
          const { inIface: _i, ...rest } = f;
          return known.evaluate(rest);
        },
      });
      variants.push({
        what: "the outgoing interface",
        eval: (f) => {
          const { outIface: _o, ...rest } = f;
          return known.evaluate(rest);
        },
      });
      // an excerpt: every chain may be missing rules (here it is not)
      const excerpt = parse(text);
      for (const c of excerpt.tables.get("nat")?.chains.values() ?? []) c.partial = true;
      const asExcerpt = compileNat({ ...excerpt, excerpt: { reasons: ["a test"] } }, full);
      variants.push({
        what: "whether the chains are complete",
        eval: (f) => asExcerpt.evaluate(f),
      });
      // one rule's -o hidden, as iptables -L without -v prints it
      const lines = text.split("\n");
      const withOut = lines.findIndex((l) => / -o \S+/.test(l));
      if (withOut >= 0) {
        const cut = [...lines];
        cut[withOut] = cut[withOut]!.replace(/ (! )?-o \S+/, "");
        const d = parse(cut.join("\n"));
        const chainName = lines[withOut]!.split(" ")[1]!;
        const chain = d.tables.get("nat")?.chains.get(chainName);
        const rule = chain?.rules.find((r) => r.source.line === withOut + 1) as
          | (Rule & { hidden?: Rule["hidden"] })
          | undefined;
        assert.ok(rule, `rule at line ${withOut + 1}`);
        rule.hidden = [{ part: "out-interface", why: "not shown in this test" }];
        const ev = compileNat(d, full);
        variants.push({ what: "one rule's -o", eval: (f) => ev.evaluate(f), openAllowed: true });
      }
      // a user chain gone (jumped to, not in the dump)
      if (set.chains.length > 1) {
        const gone = set.chains[set.chains.length - 1]!;
        const d = parse(text);
        d.tables.get("nat")?.chains.delete(gone);
        const ev = compileNat(d, full);
        variants.push({ what: "a user chain", eval: (f) => ev.evaluate(f), openAllowed: true });
      }
      for (const f of flows) {
        const k = answerOf(known.evaluate(f));
        if (k === undefined) continue;
        const flowText = `${f.proto} ${f.src.value}->${f.dst.value}:${f.dport ?? ""} ${f.origin}`;
        for (const v of variants) {
          tally({
            seed,
            what: v.what,
            flow: flowText,
            known: k,
            hidden: v.eval(f),
            ...(v.openAllowed ? { openAllowed: true } : {}),
          });
        }
      }
    }
    for (const [what, k] of counts) {
      t.diagnostic(`${what}: ${k.checked} flows, ${k.same} answered alike, ${k.fork} forked`);
      // each kind of hidden fact was exercised, and some of them really forked
      assert.ok(k.checked > 20, `${what}: only ${k.checked} flows checked`);
    }
    assert.ok(
      [...counts.values()].reduce((a, k) => a + k.fork, 0) > 100,
      "hidden facts led to forks",
    );
    assert.deepEqual(failures.slice(0, 10), []);
  });
});
