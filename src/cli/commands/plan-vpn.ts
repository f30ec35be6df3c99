/**
 * @module cli/commands/plan-vpn — `podpath plan vpn <snapshot> --pod NS/NAME [--strategy S]
 * [-o text|json|yaml]`: wiring only. Reads the snapshot, resolves the VPN pod, asks plans/vpn for
 * the durable fix per strategy, and renders it.
 */
import { stringify } from "yaml";
import { analyzeVpn } from "../../cases/vpn/analyze.ts";
import {
  planVpn,
  STRATEGIES,
  type Strategy,
  type StrategyPlan,
  type VpnPlan,
} from "../../cases/vpn/plan.ts";
import { vpnInputFromSnapshot } from "../../cases/vpn/snapshot-input.ts";
import { loadSnapshot } from "../../snapshot/load.ts";
import { readSites } from "../../snapshot/sites.ts";
import { openSnapshot, SnapshotOpenError } from "../../snapshot/source.ts";
import { EXIT, type Io, UsageError } from "../io.ts";

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const snapshotPath = args[0];
  if (snapshotPath === undefined) throw new UsageError("plan vpn: name a snapshot folder");
  const pod = String(opts["pod"] ?? "");
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(pod)) {
    throw new UsageError(
      `plan vpn: --pod ${JSON.stringify(pod)}: expected NAMESPACE/NAME, e.g. vpn/vpn-openvpn-6d9c7b5f4-x2x7k`,
    );
  }
  const strategyOpt = String(opts["strategy"] ?? "all");
  const strategies: readonly Strategy[] =
    strategyOpt === "all" ? STRATEGIES : [strategyOpt as Strategy];
  let src: ReturnType<typeof openSnapshot>;
  try {
    src = openSnapshot(snapshotPath);
  } catch (e) {
    if (e instanceof SnapshotOpenError) throw new UsageError(e.message);
    throw e;
  }
  const snap = loadSnapshot(src);
  const { input, diagnostics } = vpnInputFromSnapshot(snap, pod);
  for (const d of [...snap.diagnostics, ...readSites(snap).diagnostics, ...diagnostics]) {
    if (d.severity === "info") continue;
    io.err(`podpath: ${d.source ? `${d.source.file}:${d.source.line}: ` : ""}${d.message}\n`);
  }
  const answer = analyzeVpn(input);
  const ctx = answer.context;
  if (!ctx || (!ctx.workload && !ctx.evidence)) {
    throw new UsageError(
      `plan vpn: ${snapshotPath} holds nothing about ${pod}: neither a manifest in cluster/ nor pods/${pod}/ (kubectl get deploy,pod -n ${pod.split("/")[0]} -o yaml > cluster/vpn.yaml)`,
    );
  }
  const plan = planVpn(ctx, input.objects, {
    strategies,
    ...(input.kubeletConfigs?.[0] ? { kubeletConfig: input.kubeletConfigs[0] } : {}),
  });
  const format = String(opts["output"] ?? "text");
  if (format === "json")
    io.out(`${JSON.stringify({ tool: "podpath", question: "plan vpn", ...plan }, null, 2)}\n`);
  else if (format === "yaml")
    io.out(
      stringify(
        { tool: "podpath", question: "plan vpn", ...plan },
        { aliasDuplicateObjects: false },
      ),
    );
  else io.out(renderPlanText(plan));
  return EXIT.ok;
}

const indent = (text: string, pad = "    ") =>
  text
    .replace(/\n$/, "")
    .split("\n")
    .map((l) => pad + l)
    .join("\n");

function strategyText(s: StrategyPlan): string {
  const lines: string[] = [`== ${s.strategy}`];
  if (!s.applicable) {
    lines.push(`  not applicable: ${s.whyNot ?? ""}`);
    return lines.join("\n");
  }
  lines.push(`  ${s.description}`);
  const a = s.admission;
  if (a) {
    const verdict = a.allowed === "yes" ? "admitted" : a.allowed === "no" ? "REJECTED" : "unknown";
    lines.push(`  admission: ${verdict}`);
    for (const m of a.messages) lines.push(`    ${m}`);
    for (const n of a.notes) lines.push(`    ${n}`);
  }
  if (s.helmValues)
    lines.push(
      "  values override (values-ip-forward.yaml):",
      indent(stringify(s.helmValues, { aliasDuplicateObjects: false })),
    );
  if (s.patch)
    lines.push(
      "  strategic-merge patch:",
      indent(stringify(s.patch, { aliasDuplicateObjects: false })),
    );
  if (s.commands.length > 0) lines.push("  apply:", ...s.commands.map((c) => `    ${c}`));
  if (s.patched)
    lines.push(
      "  full patched manifest:",
      indent(stringify(s.patched, { aliasDuplicateObjects: false })),
    );
  return lines.join("\n");
}

/** Text rendering of a plan: state, strategies with admission, return path, checks after rollout. */
export function renderPlanText(plan: VpnPlan): string {
  const out: string[] = [`Durable forwarding for VPN pod ${plan.pod}`];
  if (plan.workload) {
    out.push(
      `  workload: ${plan.workload.kind} ${plan.workload.name} (${plan.workload.evidence.file}:${plan.workload.evidence.line})`,
    );
  }
  if (plan.forwardingNow) {
    out.push(
      `  now: net.ipv4.ip_forward = ${plan.forwardingNow.value} (${plan.forwardingNow.evidence.file}:${plan.forwardingNow.evidence.line})`,
    );
  }
  for (const a of plan.alreadySet)
    out.push(`  already set by ${a.kind}: ${a.value} (${a.evidence.file}:${a.evidence.line})`);
  for (const w of plan.warnings) out.push(`  WARNING: ${w}`);
  out.push("");
  for (const s of plan.strategies) out.push(strategyText(s), "");
  out.push("== return path");
  out.push(`  ${plan.returnPath.explanation}`);
  if (plan.returnPath.command) out.push(`    ${plan.returnPath.command}`);
  if (plan.returnPath.route) out.push(`    ${plan.returnPath.route}`);
  out.push("", "== after the rollout");
  for (const v of plan.verify) out.push(`  ${v}`);
  return `${out.join("\n")}\n`;
}
