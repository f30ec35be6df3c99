/**
 * @module cases/masquerade/plan-render — the masquerade plan as a document (report/document) that
 * report/ renders as text, Markdown and HTML, and as YAML; JSON is the plan itself.
 */
import { stringify } from "yaml";
import {
  type Block,
  code,
  codeBlock,
  type Document,
  fields,
  type Inline,
  list,
  paragraph,
  section,
  type Text,
  toned,
} from "../../report/document.ts";
import { renderDocumentText } from "../../report/document-text.ts";
import type { Paint } from "../../report/text.ts";
import { PLAIN } from "../../report/text.ts";
import type { OwnerPlan } from "./owners/index.ts";
import type { OwnerSetting } from "./owners/owner.ts";
import type { MasqueradePlan } from "./plan.ts";

export interface ReplayLine {
  readonly node: string;
  readonly flow: string;
  readonly kernelSource?: string;
  readonly predicted: string;
  readonly agree?: boolean;
  readonly note?: string;
}

type Located = { file: string; line: number } | undefined;

/** " (file:line)" after a sentence, or nothing when the evidence has no place. */
function at(s: Located): Inline[] {
  return s ? [" (", code(`${s.file}:${s.line}`), ")"] : [];
}

/** One command to run: a comment line dimmed, anything else as `$ command`. */
function cmd(c: string): Block {
  return paragraph(c.startsWith("#") ? toned("dim", c) : code(`$ ${c}`));
}

/** The blockers: what breaks when the fix is applied alone (printed first). */
function blockerBlocks(plan: MasqueradePlan): Block[] {
  if (plan.blockers.length === 0) return [];
  return [
    section(
      "FIRST: the fix alone breaks the connection",
      plan.blockers.flatMap((b) => [
        paragraph([toned("bad", b.breaks), ...at(b)]),
        codeBlock(b.combined.join("\n"), "diff"),
      ]),
    ),
  ];
}

/** Each destination and whether it is exempt from masquerade today. */
function destinationsBlock(plan: MasqueradePlan): Block {
  return section("Destinations", [
    ...plan.destinations.map((d) =>
      paragraph([
        code(`${d.ip}${d.port ? `:${d.port}` : ""}`),
        "  ",
        ...(d.exemptToday
          ? [
              `exempt today by ${d.exemptBy ?? "the agent's rules"}`,
              ...at(d.exemptBySource),
              ": pods reach it with their own address",
            ]
          : ["masqueraded today"]),
      ]),
    ),
    paragraph(
      `pod range: ${plan.podRanges.length > 0 ? plan.podRanges.join(", ") : "not known from the snapshot"}`,
    ),
  ]);
}

/** The ordered steps, then the warnings the plan's diagnostics raised. */
function stepsAndWarningsBlocks(plan: MasqueradePlan): Block[] {
  const blocks: Block[] = [];
  if (plan.steps.length > 0) {
    blocks.push(
      section(
        "Steps, in the order they must be done",
        plan.steps.map((st, i) =>
          section(`${i + 1}. ${st.title}`, [
            paragraph([st.why, ...at(st.evidence[0])]),
            ...st.apply.map(cmd),
            ...(st.rollback.length ? [paragraph("Rollback:"), ...st.rollback.map(cmd)] : []),
          ]),
        ),
      ),
    );
  }
  const warnings = plan.diagnostics.filter((d) => d.severity !== "info");
  if (warnings.length > 0) {
    blocks.push(
      section(
        "Warnings",
        warnings.map((w) =>
          paragraph([
            ...(w.source ? [code(`${w.source.file}:${w.source.line}`), ": "] : []),
            w.message,
          ]),
        ),
      ),
    );
  }
  return blocks;
}

/** The change itself: the narrowed exception list, and/or the far side's diffs. */
function changeBlocks(plan: MasqueradePlan): Block[] {
  const blocks: Block[] = [];
  if (plan.owner) blocks.push(ownerChangeBlock(plan.owner));
  if (plan.narrow) {
    const n = plan.narrow;
    blocks.push(
      section("Change: nonMasqueradeCIDRs", [
        ...n.dropped.map((d) =>
          paragraph([toned("bad", `- ${d.text}`), ...at(d.source), `  ${d.why}`]),
        ),
        ...n.newList.map((k) => paragraph([toned("good", `+ ${k.cidr}`), `  ${k.why}`])),
        paragraph(
          n.validationError
            ? toned("bad", `The agent would refuse this config: ${n.validationError}`)
            : "The agent accepts this config (validated with its own rules); every other key is left as it is.",
        ),
      ]),
    );
  }
  if (plan.keepPodIdentity) {
    const sites = plan.keepPodIdentity.sites;
    blocks.push(
      section("Change on the far side (keep pod identity)", [
        ...(sites.length === 0
          ? [
              paragraph(
                "no remote/*.yaml covers the destination: the site's file would say what to change",
              ),
            ]
          : sites.map((s) => section(`${s.site}:`, [codeBlock(s.diff.join("\n"), "diff")]))),
      ]),
    );
  }
  return blocks;
}

/** The owner's knob before and after, each setting with the line it is written on. */
function ownerChangeBlock(o: OwnerPlan): Block {
  const text = (x: OwnerSetting) =>
    `${x.key}${x.value !== undefined ? `=${x.value}` : " (not set)"}`;
  const lines: Block[] = [];
  for (const b of o.change.before) {
    const a = o.change.after.find((x) => x.key === b.key);
    if (a && a.value === b.value) continue;
    lines.push(paragraph([toned("bad", `- ${text(b)}`), ...at(b.source)]));
    if (a) lines.push(paragraph(toned("good", `+ ${text(a)}`)));
  }
  for (const a of o.change.after) {
    if (!o.change.before.some((b) => b.key === a.key))
      lines.push(paragraph(toned("good", `+ ${text(a)}`)));
  }
  if (lines.length === 0) lines.push(paragraph(`nothing changes in ${o.name}'s settings`));
  return section(`Change: ${o.knob}`, lines);
}

/** Impact (what stops matching) and coverage (which node pools the agent reaches). */
function impactAndCoverageBlocks(plan: MasqueradePlan): Block[] {
  const impact: Block[] = [paragraph(plan.impact.announcement)];
  if (plan.impact.namesPodAddresses.length > 0) {
    impact.push(
      section(
        "Names pod addresses and will silently stop matching:",
        plan.impact.namesPodAddresses.flatMap((r) => [
          paragraph([
            code(`${r.file}:${r.line}`),
            `  ${r.what}`,
            ...(r.text ? ["  ", toned("dim", r.text.trim())] : []),
          ]),
          list([r.consequence], false),
        ]),
      ),
    );
  }
  const coverage: Block[] =
    plan.coverage.length === 0
      ? [paragraph("no Nodes in the snapshot: cannot tell which nodes the agent reaches")]
      : plan.coverage.map((c) =>
          paragraph([
            `${c.pool} (${c.nodes.join(", ")}): `,
            c.reached ? toned("good", "reached") : toned("bad", "NOT reached"),
            `: ${c.why}`,
          ]),
        );
  if (plan.coverage.some((c) => !c.reached)) {
    coverage.push(
      paragraph(
        "Nodes in a pool marked NOT reached keep the rules they have: nothing in the ConfigMap changes them, and their pods' requests keep their current source address (podpath verify names such nodes).",
      ),
    );
  }
  return [
    section("Impact (announce it as a behaviour change)", impact),
    // the agent's coverage means nothing when another owner decides the pods' source
    ...(plan.owner ? [] : [section("Coverage", coverage)]),
  ];
}

/** The what-if replay on a real kernel, when one was run. */
function replayBlocks(plan: MasqueradePlan, replay: readonly ReplayLine[]): Block[] {
  if (replay.length === 0) return [];
  return [
    section(
      plan.narrow || plan.owner
        ? "What-if on a real kernel (proposed rules)"
        : "What-if on a real kernel (the rules as they are: keep-pod-identity leaves them alone)",
      [
        ...replay.map((r) =>
          paragraph([
            `${r.node}: ${r.flow}: kernel puts ${r.kernelSource ?? "nothing"} on the wire; evaluator: ${r.predicted}`,
            ...(r.agree === undefined
              ? []
              : [" ", r.agree ? toned("good", "(agree)") : toned("bad", "(DISAGREE)")]),
            ...(r.note ? [` ${r.note}`] : []),
          ]),
        ),
      ],
    ),
  ];
}

/** How to apply the narrowed list, check it, and the rules expected afterwards. */
function applyBlocks(plan: MasqueradePlan): Block[] {
  if (plan.owner) {
    const o = plan.owner;
    return [
      section(
        `Apply (${o.name})`,
        o.apply.length > 0 ? o.apply.map(cmd) : [paragraph("nothing to apply on the cluster")],
      ),
      section("Check", o.checks.map(cmd)),
      ...(o.expected.length > 0
        ? [section("Expected rules on every node afterwards", [codeBlock(o.expected.join("\n"))])]
        : []),
    ];
  }
  if (!plan.narrow) return [];
  const n = plan.narrow;
  const previous = plan.rollback.previousConfigMap;
  return [
    section("Apply", [
      paragraph(
        plan.filesWritten
          ? [
              "1. Written: ",
              code(n.newConfigMapFile),
              ...(previous ? [" and ", code(plan.rollback.file)] : []),
              ".",
            ]
          : [
              "1. Save the new ConfigMap below as ",
              code(n.newConfigMapFile),
              ...(previous ? [" and the current one as ", code(plan.rollback.file)] : []),
              " (or run with --write DIR).",
            ],
      ),
      ...n.apply.map((a) => paragraph(["2. ", code(`$ ${a}`)])),
    ]),
    section("Check", n.checks.map(cmd)),
    section("Expected rules on every node afterwards", [codeBlock(n.expectedRules.join("\n"))]),
  ];
}

/** Rollback commands and the trade-off between the two strategies. */
function rollbackAndTradeoffBlocks(plan: MasqueradePlan): Block[] {
  return [
    section("Rollback", [
      ...plan.rollback.apply.map((a) => paragraph(code(`$ ${a}`))),
      ...plan.rollback.checks.map(cmd),
    ]),
    section(
      "Trade-off: narrow vs keep pod identity",
      plan.tradeoff.map((t) =>
        section(`${t.aspect}:`, [
          fields([
            ["narrow:", t.narrow],
            ["keep pod identity:", t.keepPodIdentity],
          ]),
        ]),
      ),
    ),
  ];
}

/** The new and previous ConfigMaps in full, then the evidence that would decide more. */
function appendixBlocks(plan: MasqueradePlan): Block[] {
  const blocks: Block[] = [];
  if (plan.narrow) {
    blocks.push(
      // a heading, not a section: the ConfigMap is printed flush left, ready to save
      { kind: "heading", text: `New ConfigMap (${plan.narrow.newConfigMapFile})` },
      codeBlock(plan.narrow.newConfigMap, "yaml"),
    );
  }
  if (plan.rollback.previousConfigMap) {
    blocks.push(
      { kind: "heading", text: `Previous ConfigMap, for rollback (${plan.rollback.file})` },
      codeBlock(plan.rollback.previousConfigMap, "yaml"),
    );
  }
  if (plan.missing.length > 0) {
    blocks.push(
      section("Evidence that would decide more", [
        list(plan.missing.map((m): Text => [code(m.file), `: ${m.would_decide}`])),
      ]),
    );
  }
  return blocks;
}

/** The plan as a document: destinations, the change, impact, coverage, apply, check, rollback. */
export function masqueradePlanDocument(
  plan: MasqueradePlan,
  replay: readonly ReplayLine[] = [],
): Document {
  return {
    question: "plan masquerade",
    title: `podpath plan masquerade ${plan.snapshot}: strategy ${plan.strategy}`,
    blocks: [
      ...blockerBlocks(plan),
      destinationsBlock(plan),
      ...stepsAndWarningsBlocks(plan),
      ...changeBlocks(plan),
      ...impactAndCoverageBlocks(plan),
      ...replayBlocks(plan, replay),
      ...applyBlocks(plan),
      ...rollbackAndTradeoffBlocks(plan),
      ...appendixBlocks(plan),
    ],
  };
}

/** The plan as text a person reads top to bottom. */
export function renderMasqueradePlanText(
  plan: MasqueradePlan,
  p: Paint = PLAIN,
  replay: readonly ReplayLine[] = [],
): string {
  return renderDocumentText(masqueradePlanDocument(plan, replay), p);
}

export function renderMasqueradePlanYaml(plan: MasqueradePlan): string {
  return stringify(JSON.parse(JSON.stringify(plan)), { lineWidth: 0 });
}
