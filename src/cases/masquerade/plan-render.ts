/**
 * @module cases/masquerade/plan-render — the masquerade plan as text a person reads top to bottom, and
 * as YAML; JSON is the plan itself.
 */
import { stringify } from "yaml";
import type { Paint } from "../../report/text.ts";
import { PLAIN, wrap } from "../../report/text.ts";
import type { MasqueradePlan } from "./plan.ts";

export interface ReplayLine {
  readonly node: string;
  readonly flow: string;
  readonly kernelSource?: string;
  readonly predicted: string;
  readonly agree?: boolean;
  readonly note?: string;
}

export function renderMasqueradePlanText(
  plan: MasqueradePlan,
  p: Paint = PLAIN,
  replay: readonly ReplayLine[] = [],
): string {
  const out: string[] = [];
  out.push(p.bold(`podpath plan masquerade ${plan.snapshot}: strategy ${plan.strategy}`), "");
  out.push(p.bold("Destinations"));
  for (const d of plan.destinations) {
    const at = d.exemptBySource ? ` (${d.exemptBySource.file}:${d.exemptBySource.line})` : "";
    out.push(
      `  ${d.ip}${d.port ? `:${d.port}` : ""}  ${d.exemptToday ? `exempt today by ${d.exemptBy ?? "the agent's rules"}${at}: pods reach it with their own address` : "masqueraded today"}`,
    );
  }
  out.push(`  pod range: ${plan.podRanges.join(", ")}`, "");
  const warnings = plan.diagnostics.filter((d) => d.severity !== "info");
  if (warnings.length > 0) {
    out.push(p.bold("Warnings"));
    for (const w of warnings) {
      const at = w.source ? `${w.source.file}:${w.source.line}: ` : "";
      out.push(wrap(`${at}${w.message}`, "  "));
    }
    out.push("");
  }
  if (plan.narrow) {
    const n = plan.narrow;
    out.push(p.bold("Change: nonMasqueradeCIDRs"));
    for (const d of n.dropped) {
      const at = d.source ? ` (${d.source.file}:${d.source.line})` : "";
      out.push(p.red(`  - ${d.text}${at}`) + `  ${d.why}`);
    }
    for (const k of n.newList) out.push(p.green(`  + ${k.cidr}`) + `  ${k.why}`);
    out.push(
      n.validationError
        ? p.red(`  The agent would refuse this config: ${n.validationError}`)
        : "  The agent accepts this config (validated with its own rules); every other key is left as it is.",
      "",
    );
  }
  if (plan.keepPodIdentity) {
    out.push(p.bold("Change on the far side (keep pod identity)"));
    if (plan.keepPodIdentity.sites.length === 0)
      out.push(
        "  no remote/*.yaml covers the destination: the site's file would say what to change",
      );
    for (const s of plan.keepPodIdentity.sites) {
      out.push(`  ${s.site}:`);
      for (const l of s.diff) out.push(`    ${l.startsWith("+") ? p.green(l) : l}`);
    }
    out.push("");
  }
  out.push(
    p.bold("Impact (announce it as a behaviour change)"),
    wrap(plan.impact.announcement, "  "),
  );
  if (plan.impact.namesPodAddresses.length > 0) {
    out.push("  Names pod addresses and will silently stop matching:");
    for (const r of plan.impact.namesPodAddresses) {
      out.push(`    ${r.file}:${r.line}  ${r.what}${r.text ? `  ${p.dim(r.text.trim())}` : ""}`);
      out.push(wrap(r.consequence, "      "));
    }
  }
  out.push("");
  out.push(p.bold("Coverage"));
  if (plan.coverage.length === 0)
    out.push("  no Nodes in the snapshot: cannot tell which nodes the agent reaches");
  for (const c of plan.coverage) {
    out.push(
      `  ${c.pool} (${c.nodes.join(", ")}): ${c.reached ? p.green("reached") : p.red("NOT reached")}: ${c.why}`,
    );
  }
  if (plan.coverage.some((c) => !c.reached)) {
    out.push(
      wrap(
        "Nodes in a pool marked NOT reached keep the rules they have: nothing in the ConfigMap changes them, and their pods' requests keep their current source address (podpath verify names such nodes).",
        "  ",
      ),
    );
  }
  out.push("");
  if (replay.length > 0) {
    out.push(
      p.bold(
        plan.narrow
          ? "What-if on a real kernel (proposed rules)"
          : "What-if on a real kernel (the rules as they are: keep-pod-identity leaves them alone)",
      ),
    );
    for (const r of replay) {
      out.push(
        `  ${r.node}: ${r.flow}: kernel puts ${r.kernelSource ?? "nothing"} on the wire; evaluator: ${r.predicted}${
          r.agree === undefined ? "" : r.agree ? p.green(" (agree)") : p.red(" (DISAGREE)")
        }${r.note ? ` ${r.note}` : ""}`,
      );
    }
    out.push("");
  }
  if (plan.narrow) {
    out.push(p.bold("Apply"));
    const previous = plan.rollback.previousConfigMap
      ? ` and the current one as ${plan.rollback.file}`
      : "";
    out.push(
      plan.filesWritten
        ? `  1. Written: ${plan.narrow.newConfigMapFile}${plan.rollback.previousConfigMap ? ` and ${plan.rollback.file}` : ""}.`
        : `  1. Save the new ConfigMap below as ${plan.narrow.newConfigMapFile}${previous} (or run with --write DIR).`,
    );
    for (const a of plan.narrow.apply) out.push(`  2. $ ${a}`);
    out.push(p.bold("Check"));
    for (const c of plan.narrow.checks) out.push(c.startsWith("#") ? `  ${p.dim(c)}` : `  $ ${c}`);
    out.push(p.bold("Expected rules on every node afterwards"));
    for (const r of plan.narrow.expectedRules) out.push(`  ${r}`);
    out.push("");
  }
  out.push(p.bold("Rollback"));
  for (const a of plan.rollback.apply) out.push(`  $ ${a}`);
  for (const c of plan.rollback.checks) out.push(c.startsWith("#") ? `  ${p.dim(c)}` : `  $ ${c}`);
  out.push("");
  out.push(p.bold("Trade-off: narrow vs keep pod identity"));
  for (const t of plan.tradeoff) {
    out.push(
      `  ${t.aspect}:`,
      `    narrow:            ${t.narrow}`,
      `    keep pod identity: ${t.keepPodIdentity}`,
    );
  }
  if (plan.narrow) {
    out.push(
      "",
      p.bold(`New ConfigMap (${plan.narrow.newConfigMapFile})`),
      plan.narrow.newConfigMap.trimEnd(),
    );
  }
  if (plan.rollback.previousConfigMap) {
    out.push(
      "",
      p.bold(`Previous ConfigMap, for rollback (${plan.rollback.file})`),
      plan.rollback.previousConfigMap.trimEnd(),
    );
  }
  if (plan.missing.length > 0) {
    out.push("", p.bold("Evidence that would decide more"));
    for (const m of plan.missing) out.push(wrap(`${m.file}: ${m.would_decide}`, "  "));
  }
  return `${out.join("\n")}\n`;
}

export function renderMasqueradePlanYaml(plan: MasqueradePlan): string {
  return stringify(JSON.parse(JSON.stringify(plan)), { lineWidth: 0 });
}
