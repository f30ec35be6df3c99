/**
 * @module cli/commands/plan-vpn — `podpath plan vpn <snapshot> --pod NS/NAME [--strategy S]
 * [-o text|json|md|html|yaml]`: wiring only. Reads the snapshot, resolves the VPN pod, asks
 * cases/vpn for the durable fix per strategy, and renders it through report/ (the plan's
 * document, cases/vpn/plan-render; JSON in the envelope, schemaVersion first).
 */
import { stringify } from "yaml";
import { analyzeVpn } from "../../cases/vpn/analyze.ts";
import { planVpn, STRATEGIES, type Strategy } from "../../cases/vpn/plan.ts";
import { vpnPlanDocument } from "../../cases/vpn/plan-render.ts";
import { vpnInputFromSnapshot } from "../../cases/vpn/snapshot-input.ts";
import { envelope } from "../../model/envelope.ts";
import { isFormat, renderReport } from "../../report/render.ts";
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
  if (format === "yaml")
    io.out(
      stringify(
        { tool: "podpath", question: "plan vpn", ...plan },
        { aliasDuplicateObjects: false },
      ),
    );
  else {
    const report = { json: envelope("plan vpn", plan), document: vpnPlanDocument(plan) };
    io.out(renderReport(report, isFormat(format) ? format : "text", io.colors));
  }
  return EXIT.ok;
}
