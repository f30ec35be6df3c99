/**
 * @module cases/masquerade/undecided — `masq/source-undecided`: the pod's source on the wire
 * turns on facts the snapshot does not state. Each outcome is shown with what it takes for true,
 * with the fact that separates them and the command that collects it; and, for decided answers,
 * the sentence saying which facts from other evidence (or which unknowns that did not matter)
 * they rest on.
 */
import type { AddressFact, Assumption } from "../../iptables/nat-trace.ts";
import { type Evidence, type Finding, refToEvidence, type SourceRef } from "../../model/types.ts";
import { formatCidr, formatIp } from "../../net/cidr.ts";
import type { TracedDestination } from "./destinations.ts";
import type { Alternative, FlowOutcome } from "./flow.ts";
import type { Source } from "./sources.ts";

const at = (r: SourceRef) => `${r.file}:${r.line}`;

function condition(list: readonly Assumption[]): string {
  if (list.length === 0) return "Otherwise";
  return `If ${list.map((a) => (a.holds ? a.fact : `not (${a.fact})`)).join(" and ")}`;
}

function result(a: Alternative, src: Source): string {
  // a chain an excerpt does not show has no line (0): nothing to cite
  const rule = a.decidingRule && a.decidingRule.line > 0 ? ` (${at(a.decidingRule)})` : "";
  switch (a.decision) {
    case "keep":
      return a.delivery === "local"
        ? "the packet is delivered on the node itself and never leaves it"
        : `it leaves with ${src.kind === "pod" ? "the pod's own address" : "its own address"} ${formatIp(src.ip)}${rule}`;
    case "masquerade":
    case "snat":
      return a.sourceOut
        ? `it leaves as ${formatIp(a.sourceOut)}, ${a.decision === "masquerade" ? "masqueraded" : "SNATed"}${rule}`
        : `its source is rewritten${rule}, to an address the snapshot does not show`;
    case "dropped":
      return `the nat table drops it${rule}`;
    case "cannot-decide":
      return `podpath cannot follow it further: ${a.undecided ?? "a rule it cannot evaluate"}`;
  }
}

function factText(f: AddressFact): string {
  return `${formatCidr(f.cidr)} ${f.local ? "is the node's own" : "is not the node's"} (${f.what}, ${at(f.source)})`;
}

/**
 * What a decided answer rests on beyond the rules: facts from other evidence, and unknowns whose
 * every outcome leads to the same answer. Empty when neither was needed.
 */
export function factsSentence(o: FlowOutcome, node: string): string {
  const parts: string[] = [];
  if (o.factsUsed && o.factsUsed.length > 0) {
    parts.push(
      `The node's address list (ip addr) is not in the snapshot; which addresses are its own was read from other evidence: ${o.factsUsed.map(factText).join("; ")}. `,
    );
  }
  if (o.unknownButSettled && o.unknownButSettled.length > 0) {
    parts.push(
      `Not known on ${node}, and it does not change the answer (every outcome leads to the same rule): ${o.unknownButSettled.map((u) => `${u.fact} (${at(u.rule)})`).join("; ")}. `,
    );
  }
  return parts.join("");
}

const MAX_LISTED = 6;

/**
 * One sentence per outcome; past a handful, the outcomes that end alike are grouped (a listing
 * that hides every rule's interfaces forks at every rule).
 */
function describeAlternatives(alternatives: readonly Alternative[], src: Source): string[] {
  if (alternatives.length <= MAX_LISTED)
    return alternatives.map((a) => `${condition(a.assumptions)}: ${result(a, src)}.`);
  const groups = new Map<string, Alternative[]>();
  for (const a of alternatives) {
    const r = result(a, src);
    const g = groups.get(r);
    if (g) g.push(a);
    else groups.set(r, [a]);
  }
  return [...groups.entries()].map(
    ([r, list]) =>
      `In ${list.length} of the ${alternatives.length} outcomes (for one: ${condition(list[0]!.assumptions).replace(/^If /, "if ")}), ${r}.`,
  );
}

/** `masq/source-undecided`: every outcome, the facts that separate them, the commands. */
export function undecidedFinding(
  src: Source,
  target: TracedDestination,
  o: FlowOutcome,
  snapshot: string,
): Finding {
  const alternatives = o.alternatives ?? [];
  const asked = new Map<string, Assumption>();
  for (const a of alternatives) for (const x of a.assumptions) asked.set(x.fact, x);
  const facts = [...asked.values()];
  const evidence: Evidence[] = [];
  const seen = new Set<string>();
  // a chain an excerpt does not show has no line of its own to cite (line 0): its file is cited
  // through the rules the outcomes rest on, or its first line
  const cite = (r: SourceRef | undefined) => {
    if (!r || r.line < 1 || seen.has(at(r))) return;
    seen.add(at(r));
    evidence.push(refToEvidence(r));
  };
  for (const f of facts) cite(f.rule);
  for (const a of alternatives) cite(a.decidingRule);
  if (src.evidence) cite(src.evidence);
  if (evidence.length === 0) {
    const file = [
      ...facts.map((f) => f.rule.file),
      ...alternatives.map((x) => x.decidingRule?.file),
    ].find((f) => f !== undefined && f !== "");
    if (file) evidence.push({ file, line: 1 });
  }
  const dstText = `${formatIp(target.ip)}${target.port ? `:${target.port}` : ""}`;
  const who = src.kind === "pod" ? `pod ${formatIp(src.ip)}` : `node ${src.node}`;
  const lines = describeAlternatives(alternatives, src);
  const decided = alternatives.filter((a) => a.decision !== "cannot-decide");
  const sources = new Set(decided.map((a) => (a.sourceOut ? formatIp(a.sourceOut) : "?")));
  // an outcome delivered on the node itself puts nothing on the wire: no agreement to speak of
  const agreeOnSource =
    decided.length > 0 && sources.size === 1 && !decided.some((a) => a.delivery === "local");
  return {
    id: "masq/source-undecided",
    severity: "info",
    title: `The source address of ${who}'s packets to ${dstText} on ${src.node} is not decided: it turns on whether ${facts
      .slice(0, 3)
      .map((f) => f.fact)
      .join("; whether ")}${facts.length > 3 ? ` (and ${facts.length - 3} more)` : ""}`,
    subject: `node/${src.node}`,
    explanation:
      `podpath followed every outcome of what the snapshot does not state. ${lines.join(" ")} ` +
      (agreeOnSource
        ? decided.length < alternatives.length
          ? `Every outcome podpath can follow gives the same source (${[...sources][0]}); the others turn on rules the snapshot does not show. `
          : `Every outcome gives the same source (${[...sources][0]}); they differ in the rule that decides it. `
        : "") +
      `What separates them: ${facts
        .slice(0, MAX_LISTED)
        .map(
          (f) =>
            `whether ${f.fact}${f.rule.line > 0 ? `, asked at ${at(f.rule)}` : ""} (${f.reason})`,
        )
        .join(
          "; ",
        )}${facts.length > MAX_LISTED ? `; and ${facts.length - MAX_LISTED} more` : ""}. ` +
      `Collect it and run podpath diagnose ${snapshot} again.` +
      (o.factsUsed && o.factsUsed.length > 0
        ? ` ${factsSentence({ ...o, unknownButSettled: [] }, src.node)}`
        : ""),
    evidence,
    next: [...new Set(facts.map((f) => f.decide.command))],
  };
}
