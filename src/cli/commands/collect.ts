/**
 * @module cli/commands/collect — `podpath collect`: options → open the cluster (kubectl's
 * kubeconfig rules) → collect into a folder → progress and failures on stderr, the snapshot path
 * on stdout (`-o json|md|html`: the collect report, in the envelope or as a document). Also used
 * by `diagnose --live` through `collectLive`.
 */
import { resolve } from "node:path";
import { ClusterError, type ClusterSource, openCluster } from "../../k8s/cluster.ts";
import { collectSnapshot } from "../../live/collect.ts";
import { explainClusterError } from "../../live/collect-errors.ts";
import type {
  CollectOptions,
  CollectReport,
  PodTarget,
  Progress,
} from "../../live/collect-types.ts";
import { folderWriter } from "../../live/collect-writer.ts";
import { envelope } from "../../model/envelope.ts";
import { tryParseIp } from "../../net/cidr.ts";
import { code, fields, list, paragraph, section } from "../../report/document.ts";
import { isFormat, type Report, renderReport } from "../../report/render.ts";
import { claimOutFolder, OutFolderError } from "../../snapshot/out-folder.ts";
import { EXIT, type Io, UsageError } from "../io.ts";
import { progressStream, startProgress } from "../progress.ts";

/** Options shared by `collect` and `diagnose --live`, as commander hands them over. */
export interface LiveArgs {
  readonly context?: string;
  readonly kubeconfig?: string;
  readonly namespace?: string;
  readonly nodes?: string;
  readonly pod?: string;
  readonly nodeState: boolean;
  readonly capture?: { host: string; seconds: number };
  readonly concurrency: number;
  readonly collectorImage?: string;
  readonly collectorNamespace?: string;
  /** Sends the context's credentials to a plain http:// server (otherwise refused). */
  readonly allowPlaintextCredentials?: boolean;
  /** kubectl's --request-timeout: the deadline of one API call, whole answer included. */
  readonly requestTimeoutMs?: number;
}

/** kubectl's --request-timeout forms: `30s`, `2m`, `1h`, or a bare number of seconds. */
export function parseRequestTimeout(v: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? "s") as "ms" | "s" | "m" | "h"];
  const ms = Math.round(Number(m[1]) * unit);
  return ms > 0 ? ms : undefined;
}

function str(v: unknown, flag: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || v.trim() === "") throw new UsageError(`${flag} needs a value`);
  return v;
}

function int(v: unknown, flag: string, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new UsageError(
      `${flag} must be a whole number from ${min} to ${max}, not ${JSON.stringify(v)}`,
    );
  }
  return n;
}

/** Reads and checks the live-collection options; throws UsageError on a mistake. */
export function parseLiveArgs(opts: Readonly<Record<string, unknown>>): LiveArgs {
  const nodeState = opts["nodeState"] === true;
  const captureHost = str(opts["capture"], "--capture");
  if (captureHost !== undefined) {
    if (tryParseIp(captureHost) === undefined) {
      throw new UsageError(
        `--capture expects an IP address to capture traffic with, not ${JSON.stringify(captureHost)}`,
      );
    }
    if (!nodeState) {
      throw new UsageError("--capture runs tcpdump on the nodes and needs --node-state");
    }
  }
  const pod = str(opts["pod"], "--pod");
  if (pod !== undefined && !/^([a-z0-9][a-z0-9.-]*\/)?[a-z0-9][a-z0-9.-]*$/.test(pod)) {
    throw new UsageError(`--pod expects NAMESPACE/NAME or NAME, not ${JSON.stringify(pod)}`);
  }
  const out: LiveArgs = {
    nodeState,
    concurrency: int(opts["concurrency"], "--concurrency", 1, 500, 10),
  };
  const context = str(opts["context"], "--context");
  const kubeconfig = str(opts["kubeconfig"], "--kubeconfig");
  const namespace = str(opts["namespace"], "-n/--namespace");
  const nodes = str(opts["nodes"], "--nodes");
  const collectorImage = str(opts["collectorImage"], "--collector-image");
  const collectorNamespace = str(opts["collectorNamespace"], "--collector-namespace");
  const timeout = str(opts["requestTimeout"], "--request-timeout");
  const requestTimeoutMs = timeout === undefined ? undefined : parseRequestTimeout(timeout);
  if (timeout !== undefined && requestTimeoutMs === undefined) {
    throw new UsageError(
      `--request-timeout expects a duration such as 30s or 2m, not ${JSON.stringify(timeout)}`,
    );
  }
  return {
    ...(opts["allowPlaintextCredentials"] === true ? { allowPlaintextCredentials: true } : {}),
    ...(requestTimeoutMs === undefined ? {} : { requestTimeoutMs }),
    ...(collectorImage === undefined ? {} : { collectorImage }),
    ...(collectorNamespace === undefined ? {} : { collectorNamespace }),
    ...out,
    ...(context === undefined ? {} : { context }),
    ...(kubeconfig === undefined ? {} : { kubeconfig }),
    ...(namespace === undefined ? {} : { namespace }),
    ...(nodes === undefined ? {} : { nodes }),
    ...(pod === undefined ? {} : { pod }),
    ...(captureHost === undefined
      ? {}
      : { capture: { host: captureHost, seconds: int(opts["seconds"], "--seconds", 1, 600, 10) } }),
  };
}

function podTarget(pod: string, args: LiveArgs, source: ClusterSource): PodTarget {
  const i = pod.indexOf("/");
  if (i >= 0) return { namespace: pod.slice(0, i), name: pod.slice(i + 1) };
  return { namespace: args.namespace ?? source.namespace, name: pod };
}

/** A status line on a terminal past a second (cli/progress); nothing when stderr is not one. */
function progressRenderer(io: Io): { onProgress: (p: Progress) => void; done: () => void } {
  const line = startProgress(progressStream(io), "collecting");
  return {
    onProgress(p) {
      if (p.kind === "nodes") {
        line.update(`nodes ${p.done}/${p.total}${p.failed > 0 ? `, ${p.failed} failed` : ""}`);
      } else if (p.kind === "phase") line.update(p.message);
    },
    done: line.done,
  };
}

export interface LiveResult {
  readonly code: number;
  readonly report?: CollectReport;
}

/**
 * Opens the cluster and collects into `dir`, printing progress and failures to stderr. Returns the
 * exit code (0, or 3 when anything could not be collected or the API refused) and the report.
 */
export async function collectLive(args: LiveArgs, dir: string, io: Io): Promise<LiveResult> {
  let source: ClusterSource;
  try {
    source = await openCluster({
      env: io.env,
      ...(args.kubeconfig === undefined ? {} : { kubeconfig: args.kubeconfig }),
      ...(args.context === undefined ? {} : { context: args.context }),
      ...(args.allowPlaintextCredentials ? { allowPlaintextCredentials: true } : {}),
      ...(args.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: args.requestTimeoutMs }),
    });
  } catch (e) {
    if (e instanceof ClusterError) {
      io.err(
        `podpath: ${explainClusterError(e, args.context ? { contextName: args.context } : {})}\n`,
      );
      return { code: EXIT.live };
    }
    throw e;
  }
  for (const w of source.warnings ?? []) io.err(`podpath: warning: ${w}\n`);
  if (args.nodeState) {
    io.err(
      `podpath: --node-state creates short-lived host-network collector pods (label app.kubernetes.io/managed-by=podpath) in ${args.collectorNamespace ?? "kube-system"}; they only read node state and are removed when done.\n`,
    );
  }
  const view = progressRenderer(io);
  const options: CollectOptions = {
    nodeState: args.nodeState,
    concurrency: args.concurrency,
    signal: io.signal,
    onProgress: view.onProgress,
    ...(args.nodes === undefined ? {} : { nodes: args.nodes }),
    ...(args.namespace === undefined ? {} : { namespace: args.namespace }),
    ...(args.pod === undefined ? {} : { pods: [podTarget(args.pod, args, source)] }),
    ...(args.capture === undefined ? {} : { capture: args.capture }),
    ...(args.collectorImage === undefined ? {} : { collectorImage: args.collectorImage }),
    ...(args.collectorNamespace === undefined
      ? {}
      : { collectorNamespace: args.collectorNamespace }),
  };
  let report: CollectReport;
  try {
    report = await collectSnapshot(source, folderWriter(dir), options);
  } catch (e) {
    view.done();
    if (e instanceof ClusterError) {
      io.err(
        `podpath: ${explainClusterError(e, { contextName: source.contextName, server: source.server })}\n`,
      );
      return { code: EXIT.live };
    }
    if (e instanceof OutFolderError) {
      io.err(`podpath: ${e.message}\n`);
      return { code: EXIT.usage };
    }
    throw e;
  }
  view.done();
  if (report.failures.length > 0) {
    io.err(`podpath: not collected (${report.failures.length}):\n`);
    for (const f of report.failures) io.err(`  ${f.subject}: ${f.what}: ${f.why}\n`);
  }
  if (report.notAvailable.length > 0) {
    // normal on many nodes (no ipset, no nft, no BPF ip-masq-agent map): one line, not a failure
    const byWhat = new Map<string, number>();
    for (const f of report.notAvailable) byWhat.set(f.what, (byWhat.get(f.what) ?? 0) + 1);
    const said = [...byWhat].map(([what, n]) => `${what} (${n} node${n === 1 ? "" : "s"})`);
    io.err(`podpath: not available, not collected: ${said.join(", ")}\n`);
  }
  const leftover = report.collectorsCreated.filter((c) => !report.collectorsRemoved.includes(c));
  if (leftover.length > 0) {
    io.err(
      `podpath: could not remove ${leftover.join(", ")}; the next run removes them after they expire, or: kubectl delete -n kube-system pod,daemonset -l app.kubernetes.io/managed-by=podpath\n`,
    );
  }
  if (report.staleRemoved.length > 0) {
    io.err(
      `podpath: removed expired collectors of an earlier run: ${report.staleRemoved.join(", ")}\n`,
    );
  }
  if (report.aborted) {
    io.err("podpath: interrupted; the partial snapshot is kept and collector pods were removed\n");
    return { code: 130, report };
  }
  return { code: report.failures.length > 0 ? EXIT.live : EXIT.ok, report };
}

/**
 * Claims the snapshot folder (created here, or empty; locked for this run); any refusal is a
 * usage error (exit 2) naming the folder.
 */
export function claimFolder(dir: string, flag: string, shown: string) {
  try {
    return claimOutFolder(dir, flag);
  } catch (e) {
    if (e instanceof OutFolderError) throw new UsageError(e.message.replace(dir, shown));
    throw e;
  }
}

/** What was collected: the envelope (the collect report as it is) and its document. */
function collectReport(dir: string, report: CollectReport): Report {
  const n = report.nodes;
  return {
    json: envelope("collect", report, dir),
    document: {
      question: "collect",
      title: "podpath collect",
      blocks: [
        fields([
          ["snapshot", code(dir)],
          ["context", report.context],
          ["files", String(report.files.length)],
          ["nodes", n.total > 0 ? `${n.done - n.failed}/${n.total} read` : "none asked"],
          ["started", report.startedAt],
          ["finished", report.finishedAt],
        ]),
        ...(report.failures.length > 0
          ? [
              section("Not collected", [
                list(report.failures.map((f) => `${f.subject}: ${f.what}: ${f.why}`)),
              ]),
            ]
          : []),
        ...(report.aborted ? [paragraph("Interrupted: the snapshot is partial.")] : []),
      ],
    },
  };
}

export async function run(
  _args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const out = str(opts["out"], "--out");
  if (out === undefined)
    throw new UsageError("--out DIR is required: the folder the snapshot is written to");
  const live = parseLiveArgs(opts);
  const dir = resolve(io.cwd, out);
  const folder = claimFolder(dir, "--out", out);
  let r: LiveResult;
  try {
    r = await collectLive(live, dir, io);
  } finally {
    folder.release();
  }
  if (r.report) {
    io.err(
      `podpath: ${r.report.files.length} files written${r.report.nodes.total > 0 ? `; nodes ${r.report.nodes.done - r.report.nodes.failed}/${r.report.nodes.total} read` : ""}\n`,
    );
    const format = isFormat(opts["output"]) ? opts["output"] : "text";
    // text is the snapshot's path alone (scripts read it: `snap=$(podpath collect --out …)`)
    io.out(format === "text" ? `${dir}\n` : renderReport(collectReport(dir, r.report), format));
  }
  return r.code;
}
