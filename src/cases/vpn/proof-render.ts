/**
 * @module cases/vpn/proof-render — the VPN change record as Markdown ready to paste into a change
 * ticket (its first evidence line is the proof), and as plain text.
 */
import type { Evidence } from "../../model/types.ts";
import { mdEscape } from "../../report/markdown.ts";
import type { ForwardingSide, HopSide, MasqueradeSide, VpnChangeRecord } from "./proof.ts";

const VERDICT_TITLE: Record<VpnChangeRecord["verdict"], string> = {
  intended: "INTENDED",
  "not-intended": "NOT INTENDED",
};

const code = (s: string) => `\`${s.replace(/`/g, "'")}\``;
const at = (e: Evidence | undefined) => (e ? `${e.file}:${e.line}` : "not read");

function forwardingText(f: ForwardingSide): string {
  return f.value === undefined ? "unknown" : `${f.value} (${at(f.evidence)})`;
}

function hopText(h: HopSide | undefined): string {
  return h
    ? `${h.hop}${h.target ? ` ${h.target}` : ""}: ${h.command} → ${h.result} (${at(h.evidence)})`
    : "none";
}

function masqText(m: MasqueradeSide): string {
  return `${m.state}${m.why ? ` (${m.why})` : ""}${m.evidence ? ` ${at(m.evidence)}` : ""}`;
}

function durableText(r: VpnChangeRecord): string {
  const d = r.durable;
  if (d.state === "yes")
    return `yes: ${d.setters.map((s) => `${s.kind} ${s.value} (${at(s.evidence)})`).join("; ")}`;
  return d.state === "no"
    ? `no: nothing in ${d.workload ?? "the manifest"} sets net.ipv4.ip_forward at pod creation`
    : "unknown: no workload manifest in the after snapshot";
}

export function renderVpnChangeRecordText(r: VpnChangeRecord): string {
  const out = [
    `proof:   ${r.proof}`,
    `verdict: ${VERDICT_TITLE[r.verdict]}: ${r.verdictText}`,
    `forwarding in pod ${r.forwarding.after.pod ?? r.forwarding.before.pod ?? "?"}: before ${forwardingText(r.forwarding.before)} · after ${forwardingText(r.forwarding.after)}`,
    `durable after: ${durableText(r)}`,
    `first silent hop: before ${hopText(r.firstSilentHop.before)} · after ${hopText(r.firstSilentHop.after)} (${r.firstSilentHop.moved})`,
  ];
  for (const phase of ["before", "after"] as const) {
    for (const h of r.client[phase]) out.push(`client ${phase} ${h.state} ${hopText(h)}`);
  }
  out.push(
    `masquerade of ${r.masquerade.pool ?? "the client pool"}: before ${masqText(r.masquerade.before)} · after ${masqText(r.masquerade.after)}`,
  );
  for (const m of r.missing) out.push(`missing: ${m.file}: ${m.would_decide}`);
  for (const d of r.diagnostics)
    out.push(`diagnostic: ${d.source ? `${d.source.file}:${d.source.line}: ` : ""}${d.message}`);
  return `${out.join("\n")}\n`;
}

export function renderVpnChangeRecordMarkdown(r: VpnChangeRecord): string {
  const out: string[] = [];
  out.push("# Change record: VPN pod forwarding", "");
  out.push(`- Proof: ${code(r.proof)}`);
  out.push(`- Verdict: **${VERDICT_TITLE[r.verdict]}**: ${mdEscape(r.verdictText)}`);
  out.push(`- Before: ${code(r.before)} · After: ${code(r.after)}`, "");
  out.push(
    "## Forwarding in the VPN pod's own namespace",
    "",
    "| | pod | net.ipv4.ip_forward | evidence |",
    "|---|---|---|---|",
  );
  for (const phase of ["before", "after"] as const) {
    const f = r.forwarding[phase];
    out.push(
      `| ${phase} | ${mdEscape(f.pod ?? "?")} | ${f.value ?? "unknown"} | ${f.evidence ? code(at(f.evidence)) : "not read"} |`,
    );
  }
  out.push("", `Durable after the change: ${mdEscape(durableText(r))}`, "");
  out.push(
    "## The client's walk",
    "",
    `First silent hop: before ${code(hopText(r.firstSilentHop.before))} · after ${code(hopText(r.firstSilentHop.after))} (${r.firstSilentHop.moved})`,
    "",
    "| hop | before | after |",
    "|---|---|---|",
  );
  const hops = [...new Set([...r.client.before, ...r.client.after].map((h) => h.hop))];
  for (const hop of hops) {
    const cell = (h: HopSide | undefined) =>
      h
        ? `${h.state}: ${code(`${h.command} → ${h.result}`)} (${code(at(h.evidence))})`
        : "not probed";
    out.push(
      `| ${hop} | ${cell(r.client.before.find((h) => h.hop === hop))} | ${cell(r.client.after.find((h) => h.hop === hop))} |`,
    );
  }
  out.push(
    "",
    `## Masquerade of the client pool${r.masquerade.pool ? ` ${r.masquerade.pool}` : ""}`,
    "",
    `- Before: ${mdEscape(masqText(r.masquerade.before))}`,
    `- After: ${mdEscape(masqText(r.masquerade.after))}`,
  );
  if (r.missing.length > 0) {
    out.push("", "## Missing evidence", "");
    for (const m of r.missing)
      out.push(
        `- ${code(m.file)}: ${mdEscape(m.would_decide)}${m.command ? ` (${code(m.command)})` : ""}`,
      );
  }
  if (r.diagnostics.length > 0) {
    out.push("", "## Diagnostics", "");
    for (const d of r.diagnostics)
      out.push(
        `- ${d.source ? `${code(`${d.source.file}:${d.source.line}`)}: ` : ""}${mdEscape(d.message)}`,
      );
  }
  return `${out.join("\n")}\n`;
}
