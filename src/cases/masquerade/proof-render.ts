/**
 * @module cases/masquerade/proof-render — the change record as a document (report/document) whose
 * first evidence line is the proof; report/ renders it as text, Markdown (ready to paste into a
 * change ticket) and HTML.
 */
import {
  type Block,
  code,
  codeBlock,
  type Document,
  item,
  type ListItem,
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

/** "file:line" of a piece of evidence, as code. */
function at(e: { file: string; line: number }) {
  return code(`${e.file}:${e.line}`);
}

function yesNo(b: boolean | undefined): string {
  return b === undefined ? "unknown" : b ? "yes" : "no";
}

/** The head list: the proof, the verdict, per-node proofs, before/after and the known request. */
function headBlock(r: ChangeRecord): Block {
  const head: (Text | ListItem)[] = [
    ["Proof: ", code(r.proof)],
    ["Verdict: ", strong(VERDICT_TITLE[r.verdict]), ": ", r.verdictText],
  ];
  if (r.nodeProofs.length > 0)
    head.push(
      item(
        "Per node:",
        r.nodeProofs.map((l) => code(l)),
      ),
    );
  head.push([
    "Before: ",
    code(r.before),
    " · After: ",
    code(r.after),
    ...(r.destination ? [" · Known request: ", code(r.destination)] : []),
  ]);
  return list(head);
}

/** The change to nonMasqueradeCIDRs as a diff, and which other keys changed. */
function configMapBlock(r: ChangeRecord): Block {
  if (r.owner) return ownerBlock(r.owner);
  const cm = r.configMap;
  const unchanged =
    cm.removed.length === 0 && cm.added.length === 0 && cm.otherKeysChanged.length === 0;
  return section(
    "ConfigMap kube-system/ip-masq-agent",
    unchanged
      ? [paragraph("No change to nonMasqueradeCIDRs.")]
      : [
          codeBlock(
            [
              " nonMasqueradeCIDRs:",
              ...cm.removed.map((e) => `-  - ${e}`),
              ...cm.added.map((e) => `+  - ${e}`),
            ].join("\n"),
            "diff",
          ),
          ...(cm.otherKeysChanged.length
            ? [paragraph(`Other keys changed: ${cm.otherKeysChanged.join(", ")}`)]
            : []),
        ],
  );
}

/** The owner's settings that changed, as a diff with their lines. */
function ownerBlock(o: NonNullable<ChangeRecord["owner"]>): Block {
  const text = (key: string, side: readonly { key: string; value?: string }[]) => {
    const v = side.find((x) => x.key === key)?.value;
    return `${key}${v !== undefined ? `=${v}` : " (not set)"}`;
  };
  return section(
    `Settings of ${o.name}`,
    o.changed.length === 0
      ? [paragraph("No change to its settings.")]
      : [
          codeBlock(
            o.changed
              .flatMap((k) => [`- ${text(k, o.before)}`, `+ ${text(k, o.after)}`])
              .join("\n"),
            "diff",
          ),
        ],
  );
}

/** Per node: picked up, rules changed, restarted; then each changed agent chain (collapsed). */
function nodesBlock(r: ChangeRecord): Block {
  const chains: Block[] = [];
  for (const n of r.nodes) {
    if (!n.rulesChanged || !n.rulesBefore || !n.rulesAfter) continue;
    const before = n.rulesBefore;
    const after = n.rulesAfter;
    chains.push({
      kind: "section",
      title: `${n.node}: ${r.owner ? `${r.owner.name}'s rules` : "agent chain"} before → after`,
      collapsed: true,
      blocks: [
        codeBlock(
          [
            ...before.filter((l) => !after.includes(l)).map((l) => `- ${l}`),
            ...after.filter((l) => !before.includes(l)).map((l) => `+ ${l}`),
          ].join("\n"),
          "diff",
        ),
      ],
    });
  }
  return section("Nodes", [
    table(
      [
        "node",
        r.owner ? "owner's rules followed" : "agent picked it up",
        "rules changed",
        "agent pod restarted",
        "note",
      ],
      r.nodes.map((n) => [
        n.node,
        n.pickedUp,
        yesNo(n.rulesChanged),
        yesNo(n.agentRestarted),
        n.note,
      ]),
    ),
    ...chains,
  ]);
}

/** The known request on the wire in each phase, and the reverse direction. */
function wireBlock(r: ChangeRecord): Block {
  return section("The wire", [
    r.wire.length === 0
      ? paragraph("No capture of the known request in either snapshot.")
      : table(
          ["phase", "capture", "point", "source", "what happened"],
          r.wire.map((w) => [
            w.phase,
            at(w.evidence),
            w.point ?? "?",
            [code(w.source), ` (${w.sourceKind})`],
            w.progress,
          ]),
        ),
    paragraph(`Reverse direction: ${r.reverse}`),
  ]);
}

/** Connections that keep the old translation, the evidence, and what would decide more. */
function closingBlocks(r: ChangeRecord): Block[] {
  const blocks: Block[] = [];
  if (r.staleConnections.length > 0) {
    blocks.push(
      section("Connections that keep the old translation", [
        paragraph([
          "New connections use the new rules; these keep their pod source until they expire (or are cleared with ",
          code("conntrack -D -s POD_IP -d DEST"),
          "):",
        ]),
        list(
          r.staleConnections.map((s) => [`${s.node}: `, code(s.entry), " (", at(s.evidence), ")"]),
        ),
      ]),
    );
  }
  blocks.push(
    section("Evidence", [
      list(r.evidence.map((e) => [at(e), ...(e.text ? [" ", code(e.text.trim())] : [])])),
    ]),
  );
  if (r.missing.length > 0) {
    blocks.push(section("What would decide more", [list(r.missing.map(missingItem))]));
  }
  return blocks;
}

/** The change record as a document: the proof first, then the ConfigMap, nodes, wire, evidence. */
export function changeRecordDocument(r: ChangeRecord): Document {
  const blocks: Block[] = [
    headBlock(r),
    configMapBlock(r),
    nodesBlock(r),
    wireBlock(r),
    ...closingBlocks(r),
  ];
  return {
    question: "verify",
    title: r.owner
      ? `Change record: ${r.owner.name}'s settings`
      : "Change record: ip-masq-agent non-masquerade list",
    blocks,
  };
}

/** The change record as Markdown; its first evidence line is the proof. */
export function renderChangeRecordMarkdown(r: ChangeRecord): string {
  return renderDocumentMarkdown(changeRecordDocument(r));
}

/** The change record as text. */
export function renderChangeRecordText(r: ChangeRecord): string {
  return renderDocumentText(changeRecordDocument(r));
}
