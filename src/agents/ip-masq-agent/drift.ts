/**
 * @module agents/ip-masq-agent/drift — compares the chain the agent would write (intent) with the
 * rules installed on a node (an iptables-save dump): missing, extra, changed and reordered rules,
 * each naming the installed line, a missing POSTROUTING jump, or the chain absent entirely.
 *
 * Both sides are compared in the iptables-save canonical form: the expected lines go through the
 * same parser and renderer as the installed ones, so spacing and quoting never count as drift.
 */
import type { IptablesDump, Rule } from "../../iptables/dump.ts";
import { renderRule } from "../../iptables/render.ts";
import { parseIptablesSave } from "../../iptables/save-parser.ts";
import type { SourceRef } from "../../model/types.ts";
import type { AgentChain, AgentRule } from "./rules.ts";

export type AgentChainDrift =
  | { readonly kind: "chain-missing"; readonly chain: string; readonly message: string }
  | { readonly kind: "jump-missing"; readonly expected: string; readonly message: string }
  | {
      readonly kind: "jump-changed";
      readonly expected: string;
      readonly installed: string;
      readonly source: SourceRef;
      readonly message: string;
    }
  | {
      readonly kind: "missing";
      readonly expected: AgentRule;
      /** 1-based position the rule should have in the chain. */
      readonly position: number;
      readonly message: string;
    }
  | {
      readonly kind: "extra";
      readonly installed: string;
      readonly source: SourceRef;
      readonly message: string;
    }
  | {
      readonly kind: "changed";
      readonly expected: AgentRule;
      readonly installed: string;
      readonly source: SourceRef;
      readonly message: string;
    }
  | {
      readonly kind: "reordered";
      readonly expected: AgentRule;
      readonly installed: string;
      readonly source: SourceRef;
      readonly expectedPosition: number;
      readonly installedPosition: number;
      readonly message: string;
    };

export interface AgentChainComparison {
  /** No drift: the installed chain and jump are what the agent writes for this config. */
  readonly inSync: boolean;
  readonly drift: readonly AgentChainDrift[];
  /** Harmless observations (a legacy jump comment, a duplicated jump). */
  readonly notes: readonly string[];
}

/**
 * The canonical (iptables-save) rendering of the expected rules, via the shared parser, with the
 * parsed rules (to compare with a listed rule on the parts its listing shows).
 */
function canonicalExpected(expected: AgentChain): {
  jump: string;
  rules: string[];
  jumpRule?: Rule;
  parsed?: readonly Rule[];
} {
  const text = `*nat\n:POSTROUTING ACCEPT [0:0]\n:${expected.chain} - [0:0]\n${expected.jump.saved}\n${expected.rules.map((r) => `${r.saved}\n`).join("")}COMMIT\n`;
  const dump = parseIptablesSave(text, "<expected>", { family: expected.family }).value;
  const nat = dump.tables.get("nat");
  const render = (r: Rule) => renderRule(r);
  const jump = nat?.chains.get("POSTROUTING")?.rules[0];
  const rules = nat?.chains.get(expected.chain)?.rules ?? [];
  const whole = rules.length === expected.rules.length;
  return {
    jump: jump ? render(jump) : expected.jump.saved,
    rules: whole ? rules.map(render) : expected.rules.map((r) => r.saved),
    ...(jump ? { jumpRule: jump } : {}),
    ...(whole ? { parsed: rules } : {}),
  };
}

/** The rule without the parts `hidden` names, for comparing on what a listing shows. */
function withoutParts(r: Rule, hidden: NonNullable<Rule["hidden"]>): Rule {
  const parts = new Set(hidden.map((h) => h.part));
  return {
    table: r.table,
    chain: r.chain,
    index: r.index,
    source: r.source,
    protocol: parts.has("protocol") ? undefined : r.protocol,
    src: parts.has("source") ? undefined : r.src,
    dst: parts.has("destination") ? undefined : r.dst,
    inIface: parts.has("in-interface") ? undefined : r.inIface,
    outIface: parts.has("out-interface") ? undefined : r.outIface,
    fragment: r.fragment,
    matches: parts.has("match") ? [] : r.matches,
    target: parts.has("target") ? undefined : r.target,
  };
}

/**
 * Does an installed rule read as the expected one? On the parts its listing shows, when it hides
 * some (`iptables -L` without -v or -n): what a listing hides is not drift.
 */
function sameRule(
  installed: Rule,
  installedCanon: string,
  expectedCanon: string,
  expected: Rule | undefined,
): boolean {
  const hidden = installed.hidden;
  if (hidden === undefined || hidden.length === 0 || expected === undefined)
    return installedCanon === expectedCanon;
  return renderRule(withoutParts(installed, hidden)) === renderRule(withoutParts(expected, hidden));
}

function installedText(r: Rule): string {
  return r.source.text?.trim() || renderRule(r);
}

/** The quoted jump comment written by agent v2.10.0 – v2.12.1. */
function legacyJump(expectedJump: string, chain: string): string {
  const comment = `ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom ${chain} chain`;
  return expectedJump.replace(`"${comment}"`, `"\\"${comment}\\""`);
}

/** Longest increasing subsequence of `xs` (indices into xs). */
function lisIndices(xs: readonly number[]): Set<number> {
  const tails: number[] = [];
  const prev: number[] = new Array(xs.length).fill(-1);
  for (let i = 0; i < xs.length; i++) {
    let lo = 0;
    let hi = tails.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (xs[tails[mid]!]! < xs[i]!) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0) prev[i] = tails[lo - 1]!;
    tails[lo] = i;
  }
  const keep = new Set<number>();
  let k = tails.length > 0 ? tails[tails.length - 1]! : -1;
  while (k >= 0) {
    keep.add(k);
    k = prev[k]!;
  }
  return keep;
}

/**
 * Compares the agent's expected chain (from {@link expectedAgentChain}) with an installed
 * iptables-save dump of the same family.
 */
export function compareAgentChain(
  expected: AgentChain,
  installed: IptablesDump,
): AgentChainComparison {
  const drift: AgentChainDrift[] = [];
  const notes: string[] = [];
  const canon = canonicalExpected(expected);
  const nat = installed.tables.get("nat");
  const chain = nat?.chains.get(expected.chain);
  const where = `${installed.file}`;
  // an excerpt (a grep, a cut paste) shows some rules: what it does not show is not missing
  const mayLack = (name: string) =>
    installed.excerpt !== undefined && (nat?.chains.get(name)?.partial ?? true);

  compareJump(expected, canon, nat?.chains.get("POSTROUTING")?.rules ?? [], {
    where,
    postroutingMayLack: mayLack("POSTROUTING"),
    drift,
    notes,
  });

  if (!chain) {
    if (installed.excerpt !== undefined) return { inSync: drift.length === 0, drift, notes };
    drift.push({
      kind: "chain-missing",
      chain: expected.chain,
      message: `chain ${expected.chain} does not exist in the nat table of ${where}: the agent has not written its rules on this node`,
    });
    return { inSync: false, drift, notes };
  }
  const chainMayLack = mayLack(expected.chain);

  const installedRules = chain.rules;
  const { matchOf, used } = matchRules(canon, installedRules);
  reportReordered(expected, installedRules, matchOf, drift);
  reportMissingAndExtra(expected, canon, installedRules, matchOf, used, chainMayLack, drift);
  return { inSync: drift.length === 0, drift, notes };
}

type Canon = ReturnType<typeof canonicalExpected>;

/** The POSTROUTING jump to the agent's chain (EnsureRule appends it when missing). */
function compareJump(
  expected: AgentChain,
  canon: Canon,
  postrouting: readonly Rule[],
  out: {
    where: string;
    postroutingMayLack: boolean;
    drift: AgentChainDrift[];
    notes: string[];
  },
): void {
  const { drift, notes } = out;
  const jumps = postrouting.filter(
    (r) => r.target?.kind === "chain" && r.target.name === expected.chain,
  );
  const exact = jumps.filter((r) => sameRule(r, renderRule(r), canon.jump, canon.jumpRule));
  const legacy = jumps.filter((r) => renderRule(r) === legacyJump(canon.jump, expected.chain));
  if (jumps.length === 0) {
    if (!out.postroutingMayLack)
      drift.push({
        kind: "jump-missing",
        expected: canon.jump,
        message: `nat POSTROUTING has no jump to ${expected.chain} in ${out.where}: the agent's chain is never consulted, so none of its rules apply`,
      });
  } else if (exact.length === 0 && legacy.length === 0) {
    const r = jumps[0]!;
    drift.push({
      kind: "jump-changed",
      expected: canon.jump,
      installed: installedText(r),
      source: r.source,
      message: `the POSTROUTING jump to ${expected.chain} at ${r.source.file}:${r.source.line} is not the one the agent writes (expected: ${canon.jump})`,
    });
  } else {
    if (exact.length === 0) {
      notes.push(
        `the POSTROUTING jump at ${legacy[0]!.source.file}:${legacy[0]!.source.line} has the quoted comment of agent v2.10.0–v2.12.1; a newer agent appends a second, unquoted jump`,
      );
    }
    if (jumps.length > 1) {
      notes.push(
        `${jumps.length} POSTROUTING jumps to ${expected.chain} (lines ${jumps.map((r) => r.source.line).join(", ")}): harmless, the chain is evaluated once per jump`,
      );
    }
  }
}

/**
 * Matches expected and installed rules by canonical text, first unused occurrence: for each
 * expected rule the installed position it matched (undefined: none), and which installed rules
 * were used.
 */
function matchRules(
  canon: Canon,
  installedRules: readonly Rule[],
): { matchOf: (number | undefined)[]; used: boolean[] } {
  const installedCanon = installedRules.map((r) => renderRule(r));
  const used = new Array<boolean>(installedRules.length).fill(false);
  const matchOf: (number | undefined)[] = canon.rules.map((text, e) => {
    const want = canon.parsed?.[e];
    const i = installedCanon.findIndex(
      (t, j) => !used[j] && sameRule(installedRules[j]!, t, text, want),
    );
    if (i < 0) return undefined;
    used[i] = true;
    return i;
  });
  return { matchOf, used };
}

/** Matched rules outside the longest run in order are reordered: order decides which wins. */
function reportReordered(
  expected: AgentChain,
  installedRules: readonly Rule[],
  matchOf: readonly (number | undefined)[],
  drift: AgentChainDrift[],
): void {
  const matchedExpected = matchOf
    .map((inst, exp) => ({ exp, inst }))
    .filter((m): m is { exp: number; inst: number } => m.inst !== undefined);
  const inOrder = lisIndices(matchedExpected.map((m) => m.inst));
  matchedExpected.forEach((m, k) => {
    if (inOrder.has(k)) return;
    const r = installedRules[m.inst]!;
    drift.push({
      kind: "reordered",
      expected: expected.rules[m.exp]!,
      installed: installedText(r),
      source: r.source,
      expectedPosition: m.exp + 1,
      installedPosition: m.inst + 1,
      message: `${r.source.file}:${r.source.line}: rule ${m.inst + 1} of ${expected.chain} belongs at position ${m.exp + 1}; order decides which rule wins`,
    });
  });
}

/**
 * Unmatched rules: a missing expected rule and an extra installed rule in the same gap pair as
 * "changed"; the rest are "missing" (unless the dump may not show them) and "extra".
 */
function reportMissingAndExtra(
  expected: AgentChain,
  canon: Canon,
  installedRules: readonly Rule[],
  matchOf: readonly (number | undefined)[],
  used: readonly boolean[],
  chainMayLack: boolean,
  drift: AgentChainDrift[],
): void {
  const missing = matchOf.flatMap((inst, exp) => (inst === undefined ? [exp] : []));
  const extra = installedRules.flatMap((_, i) => (used[i] ? [] : [i]));
  const anchorBefore = (exp: number): number => {
    for (let e = exp - 1; e >= 0; e--) if (matchOf[e] !== undefined) return matchOf[e]!;
    return -1;
  };
  const anchorAfter = (exp: number): number => {
    for (let e = exp + 1; e < matchOf.length; e++) if (matchOf[e] !== undefined) return matchOf[e]!;
    return installedRules.length;
  };
  const extraLeft = new Set(extra);
  for (const exp of chainMayLack ? [] : missing) {
    const lo = anchorBefore(exp);
    const hi = anchorAfter(exp);
    const partner = [...extraLeft].find((i) => i > lo && i < hi);
    const want = expected.rules[exp]!;
    if (partner !== undefined) {
      extraLeft.delete(partner);
      const r = installedRules[partner]!;
      drift.push({
        kind: "changed",
        expected: want,
        installed: installedText(r),
        source: r.source,
        message: `${r.source.file}:${r.source.line}: rule ${partner + 1} of ${expected.chain} is not what the agent writes there (expected: ${canon.rules[exp]})`,
      });
    } else {
      drift.push({
        kind: "missing",
        expected: want,
        position: exp + 1,
        message: `${expected.chain} lacks rule ${exp + 1} the agent writes: ${canon.rules[exp]}`,
      });
    }
  }
  for (const i of extraLeft) {
    const r = installedRules[i]!;
    drift.push({
      kind: "extra",
      installed: installedText(r),
      source: r.source,
      message: `${r.source.file}:${r.source.line}: rule ${i + 1} of ${expected.chain} is not one the agent writes for this config`,
    });
  }
}
