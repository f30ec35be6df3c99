/**
 * @module cases/vpn/proof-render — the VPN change record as a document (report/document) whose
 * first evidence line is the proof; report/ renders it as text, Markdown (ready to paste into a
 * change ticket) and HTML.
 */
import type { Evidence } from "../../model/types.ts";
import {
  type Block,
  code,
  type Document,
  list,
  missingItem,
  paragraph,
  section,
  strong,
  type Text,
  table,
} from "../../report/document.ts";
import { renderDocumentMarkdown } from "../../report/document-markdown.ts";
import { renderDocumentText } from "../../report/document-text.ts";
import type { HopSide, MasqueradeSide, VpnChangeRecord } from "./proof.ts";

const VERDICT_TITLE: Record<VpnChangeRecord["verdict"], string> = {
  intended: "INTENDED",
  "not-intended": "NOT INTENDED",
};

const at = (e: Evidence | undefined) => (e ? `${e.file}:${e.line}` : "not read");

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

/** The VPN change record as a document: the proof first, forwarding, the client's walk, masquerade. */
export function vpnChangeRecordDocument(r: VpnChangeRecord): Document {
  const blocks: Block[] = [
    list([
      ["Proof: ", code(r.proof)],
      ["Verdict: ", strong(VERDICT_TITLE[r.verdict]), ": ", r.verdictText],
      ["Before: ", code(r.before), " · After: ", code(r.after)],
    ]),
    section("Forwarding in the VPN pod's own namespace", [
      table(
        ["", "pod", "net.ipv4.ip_forward", "evidence"],
        (["before", "after"] as const).map((phase) => {
          const f = r.forwarding[phase];
          return [
            phase,
            f.pod ?? "?",
            f.value === undefined ? "unknown" : String(f.value),
            f.evidence ? code(at(f.evidence)) : "not read",
          ];
        }),
      ),
      paragraph(`Durable after the change: ${durableText(r)}`),
    ]),
  ];
  const hops = [...new Set([...r.client.before, ...r.client.after].map((h) => h.hop))];
  const cell = (h: HopSide | undefined): Text =>
    h
      ? [`${h.state}: `, code(`${h.command} → ${h.result}`), " (", code(at(h.evidence)), ")"]
      : "not probed";
  blocks.push(
    section("The client's walk", [
      paragraph([
        "First silent hop: before ",
        code(hopText(r.firstSilentHop.before)),
        " · after ",
        code(hopText(r.firstSilentHop.after)),
        ` (${r.firstSilentHop.moved})`,
      ]),
      table(
        ["hop", "before", "after"],
        hops.map((hop) => [
          hop,
          cell(r.client.before.find((h) => h.hop === hop)),
          cell(r.client.after.find((h) => h.hop === hop)),
        ]),
      ),
    ]),
    section(`Masquerade of the client pool${r.masquerade.pool ? ` ${r.masquerade.pool}` : ""}`, [
      list([`Before: ${masqText(r.masquerade.before)}`, `After: ${masqText(r.masquerade.after)}`]),
    ]),
  );
  if (r.missing.length > 0) {
    blocks.push(section("Missing evidence", [list(r.missing.map(missingItem))]));
  }
  if (r.diagnostics.length > 0) {
    blocks.push(
      section("Diagnostics", [
        list(
          r.diagnostics.map((d) => [
            ...(d.source ? [code(`${d.source.file}:${d.source.line}`), ": "] : []),
            d.message,
          ]),
        ),
      ]),
    );
  }
  return { question: "verify", title: "Change record: VPN pod forwarding", blocks };
}

/** The VPN change record as text. */
export function renderVpnChangeRecordText(r: VpnChangeRecord): string {
  return renderDocumentText(vpnChangeRecordDocument(r));
}

/** The VPN change record as Markdown; its first evidence line is the proof. */
export function renderVpnChangeRecordMarkdown(r: VpnChangeRecord): string {
  return renderDocumentMarkdown(vpnChangeRecordDocument(r));
}
