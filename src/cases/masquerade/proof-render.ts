/**
 * @module cases/masquerade/proof-render — the change record as Markdown ready to paste into a change ticket (its
 * first evidence line is the proof), and as plain text.
 */
import { mdEscape } from "../../report/markdown.ts";
import type { ChangeRecord } from "./proof.ts";

const VERDICT_TITLE: Record<ChangeRecord["verdict"], string> = {
  fixed: "FIXED",
  "rolled-back": "ROLLED BACK",
  "not-applied-on-node": "NOT APPLIED ON A NODE",
  "partly-applied": "PARTLY APPLIED",
  "not-fixed": "NOT FIXED",
  "no-change": "NO CHANGE",
  undecided: "UNDECIDED",
};

const code = (s: string) => `\`${s.replace(/`/g, "'")}\``;

export function renderChangeRecordMarkdown(r: ChangeRecord): string {
  const out: string[] = [];
  out.push(`# Change record: ip-masq-agent non-masquerade list`, "");
  out.push(`- Proof: ${code(r.proof)}`);
  out.push(`- Verdict: **${VERDICT_TITLE[r.verdict]}**: ${mdEscape(r.verdictText)}`);
  if (r.nodeProofs.length > 0) {
    out.push("- Per node:");
    for (const l of r.nodeProofs) out.push(`  - ${code(l)}`);
  }
  out.push(
    `- Before: ${code(r.before)} · After: ${code(r.after)}${r.destination ? ` · Known request: ${code(r.destination)}` : ""}`,
    "",
  );
  out.push("## ConfigMap kube-system/ip-masq-agent", "");
  if (
    r.configMap.removed.length === 0 &&
    r.configMap.added.length === 0 &&
    r.configMap.otherKeysChanged.length === 0
  ) {
    out.push("No change to nonMasqueradeCIDRs.", "");
  } else {
    out.push(
      "```diff",
      " nonMasqueradeCIDRs:",
      ...r.configMap.removed.map((e) => `-  - ${e}`),
      ...r.configMap.added.map((e) => `+  - ${e}`),
      "```",
    );
    if (r.configMap.otherKeysChanged.length)
      out.push("", `Other keys changed: ${r.configMap.otherKeysChanged.join(", ")}`);
    out.push("");
  }
  out.push(
    "## Nodes",
    "",
    "| node | agent picked it up | rules changed | agent pod restarted | note |",
    "|---|---|---|---|---|",
  );
  for (const n of r.nodes) {
    out.push(
      `| ${mdEscape(n.node)} | ${n.pickedUp} | ${n.rulesChanged === undefined ? "unknown" : n.rulesChanged ? "yes" : "no"} | ${
        n.agentRestarted === undefined ? "unknown" : n.agentRestarted ? "yes" : "no"
      } | ${mdEscape(n.note)} |`,
    );
  }
  out.push("");
  for (const n of r.nodes) {
    if (!n.rulesChanged || !n.rulesBefore || !n.rulesAfter) continue;
    out.push(
      `<details><summary>${mdEscape(n.node)}: agent chain before → after</summary>`,
      "",
      "```diff",
    );
    for (const l of n.rulesBefore) if (!n.rulesAfter.includes(l)) out.push(`- ${l}`);
    for (const l of n.rulesAfter) if (!n.rulesBefore.includes(l)) out.push(`+ ${l}`);
    out.push("```", "", "</details>", "");
  }
  out.push("## The wire", "");
  if (r.wire.length === 0) out.push("No capture of the known request in either snapshot.", "");
  else {
    out.push("| phase | capture | point | source | what happened |", "|---|---|---|---|---|");
    for (const w of r.wire) {
      out.push(
        `| ${w.phase} | ${code(`${w.evidence.file}:${w.evidence.line}`)} | ${mdEscape(w.point ?? "?")} | ${code(w.source)} (${w.sourceKind}) | ${mdEscape(w.progress)} |`,
      );
    }
    out.push("");
  }
  out.push(`Reverse direction: ${mdEscape(r.reverse)}`, "");
  if (r.staleConnections.length > 0) {
    out.push("## Connections that keep the old translation", "");
    out.push(
      "New connections use the new rules; these keep their pod source until they expire (or are cleared with `conntrack -D -s POD_IP -d DEST`):",
      "",
    );
    for (const s of r.staleConnections)
      out.push(
        `- ${mdEscape(s.node)}: ${code(s.entry)} (${code(`${s.evidence.file}:${s.evidence.line}`)})`,
      );
    out.push("");
  }
  out.push("## Evidence", "");
  for (const e of r.evidence)
    out.push(`- ${code(`${e.file}:${e.line}`)}${e.text ? ` ${code(e.text.trim())}` : ""}`);
  out.push("");
  if (r.missing.length > 0) {
    out.push("## What would decide more", "");
    for (const m of r.missing)
      out.push(
        `- ${code(m.file)}: ${mdEscape(m.would_decide)}${m.command ? ` (${code(m.command)})` : ""}`,
      );
    out.push("");
  }
  return out.join("\n");
}

export function renderChangeRecordText(r: ChangeRecord): string {
  const out = [
    `proof:   ${r.proof}`,
    `verdict: ${VERDICT_TITLE[r.verdict]}: ${r.verdictText}`,
    ...r.nodeProofs.map((l) => `node proof ${l}`),
    `config:  ${[...r.configMap.removed.map((e) => `-${e}`), ...r.configMap.added.map((e) => `+${e}`)].join(" ") || "no change"}`,
  ];
  for (const n of r.nodes) out.push(`node ${n.node}: picked up ${n.pickedUp}; ${n.note}`);
  for (const w of r.wire)
    out.push(
      `wire ${w.phase} ${w.evidence.file}:${w.evidence.line} ${w.point ?? ""} src ${w.source}: ${w.progress}`,
    );
  out.push(`reverse: ${r.reverse}`);
  for (const s of r.staleConnections) out.push(`stale ${s.node}: ${s.entry}`);
  for (const m of r.missing) out.push(`missing ${m.file}: ${m.would_decide}`);
  return `${out.join("\n")}\n`;
}
