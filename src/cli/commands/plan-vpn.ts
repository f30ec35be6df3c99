/**
 * @module cli/commands/plan-vpn — `podpath plan vpn <snapshot> --pod NS/NAME [--strategy S]
 * [-o text|json|md|html|yaml]`: wiring only. Reads the snapshot, resolves the VPN pod, asks
 * cases/vpn for the durable fix per strategy, and renders it through report/ (the plan's
 * document, cases/vpn/plan-render; JSON in the envelope, schemaVersion first).
 */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { analyzeVpn } from "../../cases/vpn/analyze.ts";
import { planFiles, planVpn, STRATEGIES, type Strategy } from "../../cases/vpn/plan.ts";
import { podsOfWorkload, vpnPodCandidates } from "../../cases/vpn/plan-pod.ts";
import { vpnPlanDocument } from "../../cases/vpn/plan-render.ts";
import { vpnInputFromSnapshot } from "../../cases/vpn/snapshot-input.ts";
import { parseWorkloadRef, type WorkloadRef } from "../../k8s/workload-ref.ts";
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
  let pod = opts["pod"] === undefined ? undefined : String(opts["pod"]);
  const workloadRef = pod === undefined ? undefined : parseWorkloadRef(pod);
  if (
    pod !== undefined &&
    workloadRef === undefined &&
    !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(pod)
  ) {
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
  if (pod !== undefined && workloadRef)
    pod = workloadPod(snap, pod, workloadRef, opts["namespace"], io) ?? pod;
  pod ??= onlyVpnPod(snap, snapshotPath);
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
  const writeDir = typeof opts["write"] === "string" ? opts["write"] : undefined;
  if (writeDir !== undefined) refuseNonEmpty(writeDir);
  const plan = planVpn(ctx, input.objects, {
    strategies,
    ...(writeDir !== undefined ? { fileDir: writeDir } : {}),
    ...(input.kubeletConfigs?.[0] ? { kubeletConfig: input.kubeletConfigs[0] } : {}),
  });
  if (writeDir !== undefined) writePlan(planFiles(plan), writeDir, io);
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

/** Without `--pod`: the snapshot's one VPN pod; none or several is a usage error naming them. */
function onlyVpnPod(snap: ReturnType<typeof loadSnapshot>, snapshotPath: string): string {
  const found = vpnPodCandidates(vpnInputFromSnapshot(snap).input);
  if (found.length === 1) return found[0]!;
  throw new UsageError(
    found.length === 0
      ? `plan vpn: ${snapshotPath} shows no VPN pod (no openvpn.conf, tunnel device or openvpn chart label): name it with --pod NAMESPACE/NAME`
      : `plan vpn: ${snapshotPath} shows ${found.length} VPN pods (${found.join(", ")}): name one with --pod NAMESPACE/NAME`,
  );
}

/**
 * `--pod deployment/NAME` (statefulset/, daemonset/): the workload's pod, the first with evidence
 * from inside it when it has several (the others named on stderr). Undefined when the snapshot has
 * no such workload but a namespace of that name holds the pod (`--pod deploy/x` of namespace
 * `deploy`): then the text is NAMESPACE/NAME as written.
 */
function workloadPod(
  snap: ReturnType<typeof loadSnapshot>,
  text: string,
  ref: WorkloadRef,
  namespace: unknown,
  io: Io,
): string | undefined {
  const { input } = vpnInputFromSnapshot(snap);
  const found = podsOfWorkload(input, ref, typeof namespace === "string" ? namespace : undefined);
  if (found.kind === "found") {
    const [first, ...others] = found.pods;
    if (others.length > 0)
      io.err(
        `podpath: ${ref.kind.toLowerCase()}/${ref.name} has ${found.pods.length} pods; planning from ${first} (also ${others.join(", ")})\n`,
      );
    return first;
  }
  const [ns = "", name = ""] = text.split("/");
  const isPod = (p: { namespace?: string; name: string }) =>
    (p.namespace ?? "default") === ns && p.name === name;
  const asPod = input.pods.some(isPod) || input.objects.some((o) => o.kind === "Pod" && isPod(o));
  if (found.kind === "none" && asPod && namespace === undefined) return undefined;
  throw new UsageError(`plan vpn: --pod ${text}: ${found.message}`);
}

/** `--write DIR` takes a new or empty folder: a plan's files never overwrite others. */
function refuseNonEmpty(dir: string): void {
  let entries: string[] = [];
  try {
    entries = existsSync(dir) ? readdirSync(dir) : [];
  } catch (e) {
    throw new UsageError(
      `--write ${dir}: cannot read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  if (entries.length > 0)
    throw new UsageError(
      `--write ${dir}: the folder is not empty (${entries.slice(0, 3).join(", ")}${entries.length > 3 ? ", …" : ""}); name a new or empty folder`,
    );
}

/** Writes every file the plan's commands name into `dir`. */
function writePlan(files: readonly { name: string; text: string }[], dir: string, io: Io): void {
  try {
    mkdirSync(dir, { recursive: true });
    for (const f of files) writeFileSync(join(dir, f.name), f.text);
  } catch (e) {
    throw new UsageError(
      `--write ${dir}: cannot write (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  for (const f of files) io.err(`wrote ${join(dir, f.name)}\n`);
}
