/**
 * @module live/collect — `collect`: gathers a snapshot from a live cluster. Reads only, unless
 * `nodeState` is asked for (then podpath's own collector pods are the only writes, and they are
 * always removed). Partial results are kept; every failure is reported with why.
 */
import { type ApiObject, ClusterError, type ClusterSource } from "../k8s/cluster.ts";
import { readCiliumStates } from "./collect-cilium.ts";
import {
  DEFAULT_COLLECTOR_IMAGE,
  DEFAULT_COLLECTOR_NAMESPACE,
  removeStale,
} from "./collect-collector.ts";
import { POD_COMMANDS } from "./collect-commands.ts";
import { explainClusterError } from "./collect-errors.ts";
import { runReadCommands } from "./collect-exec.ts";
import { collectNodeState, type NodeRun } from "./collect-nodes.ts";
import { collectObjects, type RunContext } from "./collect-objects.ts";
import type {
  CollectFailure,
  CollectOptions,
  CollectReport,
  Progress,
  SnapshotWriter,
} from "./collect-types.ts";

/** The container `kubectl exec` would pick: the default-container annotation, else the first. */
export function defaultContainer(pod: ApiObject): string | undefined {
  const named = pod.metadata?.annotations?.["kubectl.kubernetes.io/default-container"];
  if (named) return named;
  const cs = (pod["spec"] as { containers?: { name?: string }[] } | undefined)?.containers;
  return cs?.[0]?.name;
}

/** A short id for collector names: base36 time + randomness, lower case. */
export function newRunId(now: Date = new Date()): string {
  return (
    (now.getTime() % 36 ** 4).toString(36).padStart(4, "0") +
    Math.floor(Math.random() * 36 ** 2)
      .toString(36)
      .padStart(2, "0")
  );
}

function describe(e: unknown, source: ClusterSource): string {
  if (e instanceof ClusterError)
    return explainClusterError(e, { contextName: source.contextName, server: source.server });
  return e instanceof Error ? e.message : String(e);
}

/**
 * Collects a snapshot through `source` into `writer`. Throws ClusterError only when nothing can
 * be read at all (Unauthorized, Unreachable); anything narrower becomes a failure in the report.
 * A write the writer refuses ends the run with the writer's error (collector pods still removed).
 */
export async function collectSnapshot(
  source: ClusterSource,
  writer: SnapshotWriter,
  options: CollectOptions = {},
): Promise<CollectReport> {
  const now = options.now ?? (() => new Date());
  const startedAt = now().toISOString();
  const files: string[] = [];
  const failures: CollectFailure[] = [];
  const notAvailable: CollectFailure[] = [];
  const signal = options.signal;
  const progress = options.onProgress ?? (() => {});
  // a write that fails (the folder tampered with: a link planted in it) ends the run
  let writeError: { e: unknown } | undefined;
  const run: RunContext = {
    source,
    options,
    signal,
    async write(rel, data) {
      try {
        await writer.write(rel, data);
      } catch (e) {
        writeError ??= { e };
        throw e;
      }
      files.push(rel);
    },
    fail(subject, what, e) {
      const why = typeof e === "string" ? e : describe(e, source);
      failures.push({ subject, what, why });
      progress({ kind: "warning", message: `${subject}: ${what}: ${why}` });
    },
    note(subject, what, why) {
      notAvailable.push({ subject, what, why });
    },
  };
  const collectors: Collectors = {
    nodes: { total: 0, done: 0, failed: 0 },
    created: [],
    removed: [],
    staleRemoved: [],
  };
  const { created, removed } = collectors;
  let aborted = false;
  try {
    progress({ kind: "phase", message: `reading objects from context "${source.contextName}"` });
    const found = await collectObjects(run);
    await readPodStates(run, found.pods, progress);
    if (options.nodeState && found.nodes.length > 0) {
      await readNodeStates(run, found.nodes, now, progress, collectors);
      await readCiliumStates(run, found.nodes, found.agentPods, progress);
    }
  } catch (e) {
    if (writeError) throw writeError.e;
    if (!signal?.aborted) throw e;
    aborted = true;
  }
  if (writeError) throw writeError.e;
  if (signal?.aborted) aborted = true;
  await writer.write(
    "README.md",
    renderReadme({
      context: source.contextName,
      startedAt,
      failures,
      notAvailable,
      created,
      removed,
    }),
  );
  return {
    context: source.contextName,
    startedAt,
    finishedAt: now().toISOString(),
    files,
    failures,
    notAvailable,
    nodes: collectors.nodes,
    collectorsCreated: created,
    collectorsRemoved: removed,
    staleRemoved: collectors.staleRemoved,
    aborted,
  };
}

/** The collector pods of a run: how the nodes went, which pods were made and removed. */
interface Collectors {
  readonly nodes: { total: number; done: number; failed: number };
  readonly created: string[];
  readonly removed: string[];
  /** Collectors of earlier runs removed because they outlived their lifetime. */
  staleRemoved: string[];
}

/** The read commands run in each target pod; a pod that fails is a failure, not the end. */
async function readPodStates(
  run: RunContext,
  pods: readonly ApiObject[],
  progress: (p: Progress) => void,
): Promise<void> {
  const { source, options, signal } = run;
  for (const pod of pods) {
    const ns = pod.metadata?.namespace ?? "";
    const name = pod.metadata?.name ?? "";
    progress({ kind: "phase", message: `reading pod state of ${ns}/${name}` });
    const container = defaultContainer(pod);
    try {
      const fails = await runReadCommands(
        source,
        { namespace: ns, pod: name, ...(container === undefined ? {} : { container }) },
        POD_COMMANDS,
        `pods/${ns}/${name}`,
        run.write,
        {
          timeoutMs: options.execTimeoutMs ?? 30_000,
          signal,
          maxOutputBytes: options.execOutputLimitBytes,
        },
      );
      for (const f of fails) {
        if (f.notAvailable) run.note(`pod/${ns}/${name}`, f.command, f.why);
        else run.fail(`pod/${ns}/${name}`, f.command, f.why);
      }
    } catch (e) {
      if (signal?.aborted) throw e;
      run.fail(`pod/${ns}/${name}`, "exec the read commands", e);
    }
  }
}

/** Node state through collector pods: expired collectors removed, then one pod a node. */
async function readNodeStates(
  run: RunContext,
  nodeNames: string[],
  now: () => Date,
  progress: (p: Progress) => void,
  collectors: Collectors,
): Promise<void> {
  const { source, options, signal } = run;
  const spec = {
    runId: options.runId ?? newRunId(now()),
    image: options.collectorImage ?? DEFAULT_COLLECTOR_IMAGE,
    namespace: options.collectorNamespace ?? DEFAULT_COLLECTOR_NAMESPACE,
    lifetimeSeconds: Math.ceil(
      ((options.podStartTimeoutMs ?? 120_000) +
        (options.execTimeoutMs ?? 60_000) * 8 +
        (options.capture?.seconds ?? 0) * 1000) /
        1000,
    ),
    now: now(),
    capture: options.capture !== undefined,
  };
  progress({ kind: "phase", message: `removing expired collectors in ${spec.namespace}` });
  try {
    collectors.staleRemoved = await removeStale(source, spec.namespace, spec.runId, now(), signal);
  } catch (e) {
    if (signal?.aborted) throw e;
    run.fail("cluster/collectors", "remove expired collectors", e);
  }
  progress({
    kind: "phase",
    message: `starting collector pods on ${nodeNames.length} node(s) in ${spec.namespace}`,
  });
  const { nodes } = collectors;
  const nodeRun: NodeRun = {
    ...run,
    spec,
    created: collectors.created,
    removed: collectors.removed,
    progress: (p) => {
      Object.assign(nodes, p);
      progress({ kind: "nodes", ...p });
    },
  };
  nodes.total = nodeNames.length;
  await collectNodeState(nodeRun, nodeNames);
}

function renderReadme(r: {
  context: string;
  startedAt: string;
  failures: readonly CollectFailure[];
  notAvailable: readonly CollectFailure[];
  created: readonly string[];
  removed: readonly string[];
}): string {
  const lines = [
    "# Snapshot collected by podpath collect",
    "",
    `- context: ${r.context}`,
    `- started: ${r.startedAt}`,
    `- collector objects created: ${r.created.length}, removed: ${r.removed.length}`,
    "",
  ];
  if (r.failures.length > 0) {
    lines.push("## Not collected", "");
    for (const f of r.failures) lines.push(`- ${f.subject}: ${f.what}: ${f.why}`);
    lines.push("");
  }
  if (r.notAvailable.length > 0) {
    // absent tools are normal (a node without ipset or nft): the files are missing, not failed
    lines.push("## Not available (normal for this node or image)", "");
    for (const f of r.notAvailable) lines.push(`- ${f.subject}: ${f.what}: ${f.why}`);
    lines.push("");
  }
  return lines.join("\n");
}
