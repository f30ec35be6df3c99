/**
 * @module live/collect-nodes — node state for `--node-state`: podpath's own host-network collector
 * pods (one per node, or one DaemonSet for a fleet) run only the fixed read commands, podpath
 * streams the results back with bounded concurrency, and every collector is removed when done,
 * on failure and on interruption.
 */
import { type ApiObject, ClusterError, RESOURCES } from "../k8s/cluster.ts";
import { truncationWhy } from "../k8s/output-limit.ts";
import {
  COLLECTOR_LABELS,
  type CollectorSpec,
  collectorDaemonSet,
  collectorPod,
} from "./collect-collector.ts";
import {
  captureCommand,
  NODE_COMMANDS,
  NODE_SCRIPT_ARGV,
  parseScriptOutput,
} from "./collect-commands.ts";
import {
  type CommandFailure,
  type ExecTarget,
  execOptions,
  failureOf,
  judge,
  runReadCommands,
} from "./collect-exec.ts";
import type { RunContext } from "./collect-objects.ts";
import { listAll } from "./collect-objects.ts";
import { createLimiter } from "./collect-pool.ts";

export interface NodeRun extends RunContext {
  readonly spec: CollectorSpec;
  readonly created: string[];
  readonly removed: string[];
  readonly progress: (p: { done: number; failed: number; total: number }) => void;
}

/** Waiting reasons after which a pod will not start on its own. */
const HOPELESS = new Set([
  "ImagePullBackOff",
  "ErrImagePull",
  "InvalidImageName",
  "CreateContainerConfigError",
  "CreateContainerError",
  "CrashLoopBackOff",
  "RunContainerError",
]);

type PodState = { ready: true } | { ready: false; hopeless?: string; why: string };

/** A field of an API answer as a string, or undefined for anything else (the answer is input). */
const text = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const field = (o: unknown, k: string): unknown =>
  typeof o === "object" && o !== null ? (o as Record<string, unknown>)[k] : undefined;

export function podState(p: ApiObject): PodState {
  const st = p["status"];
  const phase = text(field(st, "phase"));
  const reason = text(field(st, "reason"));
  const message = text(field(st, "message"));
  const raw = field(st, "containerStatuses");
  const cs = Array.isArray(raw) ? raw : [];
  const waiting = cs.map((c) => {
    const w = field(field(c, "state"), "waiting");
    return w === undefined
      ? undefined
      : { reason: text(field(w, "reason")), message: text(field(w, "message")) };
  });
  if (phase === "Running" && cs.length > 0 && cs.every((c) => field(c, "ready") === true)) {
    return { ready: true };
  }
  if (phase === "Failed" || phase === "Succeeded") {
    return {
      ready: false,
      hopeless: phase,
      why: `pod ${phase}${reason ? ` (${reason})` : ""}${message ? `: ${message}` : ""}`,
    };
  }
  for (const w of waiting) {
    if (w?.reason !== undefined && HOPELESS.has(w.reason)) {
      return {
        ready: false,
        hopeless: w.reason,
        why: `${w.reason}${w.message ? `: ${w.message}` : ""}`,
      };
    }
  }
  const w = waiting.find((x) => x !== undefined);
  return { ready: false, why: `phase ${phase ?? "unknown"}${w?.reason ? `, ${w.reason}` : ""}` };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(t);
      resolve();
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

const isFatal = (e: unknown) =>
  e instanceof ClusterError &&
  (e.reason === "Forbidden" || e.reason === "Unauthorized" || e.reason === "Unreachable");

/**
 * Runs the node commands in one exec (NODE_SCRIPT) and writes each section; falls back to one
 * exec per command when the image has no shell. A section cut off by the timeout is reported.
 */
async function readNodeState(
  run: NodeRun,
  target: ExecTarget,
  dir: string,
  write: (rel: string, data: string | Uint8Array) => Promise<void>,
  timeoutMs: number,
): Promise<CommandFailure[]> {
  const signal = run.signal;
  const limits = { timeoutMs, signal, maxOutputBytes: run.options.execOutputLimitBytes };
  const r = await run.source.exec(
    target.namespace,
    target.pod,
    NODE_SCRIPT_ARGV,
    execOptions(target, limits),
  );
  const sections = parseScriptOutput(r.stdout);
  if (sections.length === 0 && !r.timedOut && !r.truncated) {
    return await runReadCommands(run.source, target, NODE_COMMANDS, dir, write, limits);
  }
  const failures: CommandFailure[] = [];
  for (const c of NODE_COMMANDS) {
    const name = c.argv.join(" ");
    const sec = sections.find((x) => x.command === name);
    // the section the output limit cut is the one still open (no exit code)
    const cut = r.truncated && sec?.code === undefined ? r.truncated : undefined;
    const verdict = sec
      ? judge(c, { ...sec, timedOut: sec.code === undefined, truncated: cut }, timeoutMs)
      : {
          why: r.truncated
            ? `not reached: the node script's output passed the limit before it (${truncationWhy(r.truncated)})`
            : r.timedOut
              ? `not reached within ${timeoutMs} ms`
              : "did not run",
        };
    if ("data" in verdict) await write(`${dir}/${c.artifact}.txt`, verdict.data);
    else failures.push(failureOf(c, verdict));
  }
  return failures;
}

/** Reads one node through its running collector pod. Returns whether anything was written. */
async function readNode(run: NodeRun, node: string, pod: string): Promise<boolean> {
  const o = run.options;
  const timeoutMs = o.execTimeoutMs ?? 60_000;
  let wrote = 0;
  const write = async (rel: string, data: string | Uint8Array) => {
    wrote++;
    await run.write(rel, data);
  };
  const target = { namespace: run.spec.namespace, pod, container: "collector" };
  const failures = await readNodeState(run, target, `nodes/${node}`, write, timeoutMs);
  for (const f of failures) {
    if (f.notAvailable) run.note(`node/${node}`, f.command, f.why);
    else run.fail(`node/${node}`, f.command, f.why);
  }
  if (o.capture) {
    const argv = captureCommand(o.capture.host, o.capture.seconds);
    const startedAt = new Date().toISOString();
    const r = await run.source.exec(
      target.namespace,
      pod,
      argv,
      execOptions(target, {
        timeoutMs: o.capture.seconds * 1000 + timeoutMs,
        signal: run.signal,
        maxOutputBytes: o.execOutputLimitBytes,
      }),
    );
    // `timeout` ends tcpdump with 124: the bounded capture finished as planned
    if ((r.code === 0 || r.code === 124) && r.stdout.length >= 24) {
      await write(`captures/${node}.pcap`, r.stdout);
      await write(
        `captures/${node}.yaml`,
        [
          // the capture-meta schema (DESIGN.md): point, phase, time, command
          `point: node/${node}`,
          "phase: before",
          `time: ${JSON.stringify(startedAt)}`,
          `command: ${JSON.stringify(argv.join(" "))}`,
          "",
        ].join("\n"),
      );
    } else {
      run.fail(
        `node/${node}`,
        "capture",
        r.truncated
          ? truncationWhy(r.truncated)
          : r.timedOut
            ? "capture did not end in time"
            : `tcpdump failed${r.code !== undefined ? ` (exit ${r.code})` : ""}${r.stderr.trim() ? `: ${r.stderr.trim().split("\n").at(-1)}` : r.message ? `: ${r.message}` : ""}`,
      );
    }
  }
  return wrote > 0;
}

/** For a collector that started and died, its last log lines say why. */
async function withLogs(run: NodeRun, pod: string, state: PodState): Promise<string> {
  const why = state.ready ? "" : state.why;
  if (state.ready || (state.hopeless !== "CrashLoopBackOff" && state.hopeless !== "Failed"))
    return why;
  try {
    const text = await run.source.logs(run.spec.namespace, pod, {
      container: "collector",
      tailLines: 5,
      signal: AbortSignal.timeout(10_000),
    });
    const last = text.trim().split("\n").slice(-2).join(" | ").slice(0, 300);
    return last ? `${why} (log: ${last})` : why;
  } catch {
    return why;
  }
}

async function removeCollector(
  run: NodeRun,
  kind: "pod" | "daemonset",
  name: string,
): Promise<void> {
  const key = `${kind}/${run.spec.namespace}/${name}`;
  if (run.removed.includes(key)) return;
  // removal must happen even after an interruption: its own short deadline, not the run's signal
  const res = kind === "pod" ? RESOURCES.pods : RESOURCES.daemonsets;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      await run.source.delete(res, name, {
        namespace: run.spec.namespace,
        signal: AbortSignal.timeout(15_000),
      });
      run.removed.push(key);
      return;
    } catch (e) {
      if (attempt === 2) run.fail(key, "remove the collector", e);
    }
  }
}

/** Removes every collector this run created and has not removed yet. */
export async function removeAll(run: NodeRun): Promise<void> {
  for (const key of [...run.created]) {
    if (run.removed.includes(key)) continue;
    const [kind, , name] = key.split("/") as ["pod" | "daemonset", string, string];
    await removeCollector(run, kind, name);
  }
}

/** Collects node state for `nodes`, per-node pods or one DaemonSet depending on the count. */
export async function collectNodeState(run: NodeRun, nodes: readonly string[]): Promise<void> {
  const threshold = run.options.daemonSetThreshold ?? 50;
  try {
    if (nodes.length > threshold) await viaDaemonSet(run, nodes);
    else await viaPods(run, nodes);
  } finally {
    await removeAll(run);
  }
}

function counter(run: NodeRun, total: number) {
  let done = 0;
  let failed = 0;
  run.progress({ done, failed, total });
  return (ok: boolean) => {
    done++;
    if (!ok) failed++;
    run.progress({ done, failed, total });
  };
}

async function viaPods(run: NodeRun, nodes: readonly string[]): Promise<void> {
  const o = run.options;
  const limit = createLimiter(o.concurrency ?? 10);
  const finished = counter(run, nodes.length);
  const ns = run.spec.namespace;
  let fatal: unknown;
  await Promise.all(
    nodes.map((node) =>
      limit(async () => {
        if (fatal !== undefined || run.signal?.aborted) {
          if (fatal !== undefined) run.fail(`node/${node}`, "start a collector pod", fatal);
          finished(false);
          return;
        }
        const pod = collectorPod(run.spec, node);
        const name = pod.metadata?.name ?? "";
        try {
          run.created.push(`pod/${ns}/${name}`);
          await run.source.create(RESOURCES.pods, pod, {
            namespace: ns,
            ...(run.signal === undefined ? {} : { signal: run.signal }),
          });
        } catch (e) {
          if (isFatal(e)) fatal ??= e;
          run.fail(`node/${node}`, "start a collector pod", e);
          finished(false);
          return;
        }
        let ok = false;
        try {
          const deadline = Date.now() + (o.podStartTimeoutMs ?? 90_000);
          let state: PodState = { ready: false, why: "not created" };
          while (!run.signal?.aborted && Date.now() < deadline) {
            state = podState(
              await run.source.get(RESOURCES.pods, name, {
                namespace: ns,
                ...(run.signal === undefined ? {} : { signal: run.signal }),
              }),
            );
            if (state.ready || state.hopeless) break;
            await sleep(o.pollMs ?? 500, run.signal);
          }
          if (run.signal?.aborted) return;
          if (!state.ready) {
            run.fail(
              `node/${node}`,
              "start a collector pod",
              `collector pod ${name} did not run: ${await withLogs(run, name, state)}`,
            );
          } else {
            ok = await readNode(run, node, name);
          }
        } catch (e) {
          run.fail(`node/${node}`, "read node state", e);
        } finally {
          await removeCollector(run, "pod", name);
          finished(ok);
        }
      }),
    ),
  );
}

async function viaDaemonSet(run: NodeRun, nodes: readonly string[]): Promise<void> {
  const o = run.options;
  const ns = run.spec.namespace;
  const sig = run.signal === undefined ? {} : { signal: run.signal };
  const ds = collectorDaemonSet(run.spec, o.nodes === undefined ? undefined : nodes);
  const dsName = ds.metadata?.name ?? "";
  const finished = counter(run, nodes.length);
  try {
    run.created.push(`daemonset/${ns}/${dsName}`);
    await run.source.create(RESOURCES.daemonsets, ds, { namespace: ns, ...sig });
  } catch (e) {
    run.fail("cluster/daemonsets", "create the collector DaemonSet", e);
    for (const _ of nodes) finished(false);
    if (isFatal(e)) throw e;
    return;
  }
  const limit = createLimiter(o.concurrency ?? 10);
  const pending = new Set(nodes);
  const tasks: Promise<void>[] = [];
  const deadline = Date.now() + (o.podStartTimeoutMs ?? 120_000);
  const lastState = new Map<string, string>();
  while (pending.size > 0 && !run.signal?.aborted && Date.now() < deadline) {
    const pods = await listAll(run.source, RESOURCES.pods, {
      namespace: ns,
      labelSelector: `${COLLECTOR_LABELS.run}=${run.spec.runId}`,
      ...sig,
    });
    for (const p of pods) {
      const node = text(field(p["spec"], "nodeName")) ?? "";
      if (!pending.has(node)) continue;
      const state = podState(p);
      if (state.ready) {
        pending.delete(node);
        const name = text(p.metadata?.name) ?? "";
        tasks.push(
          limit(async () => {
            let ok = false;
            try {
              if (!run.signal?.aborted) ok = await readNode(run, node, name);
            } catch (e) {
              run.fail(`node/${node}`, "read node state", e);
            }
            finished(ok);
          }),
        );
      } else if (state.hopeless) {
        pending.delete(node);
        run.fail(
          `node/${node}`,
          "start a collector pod",
          `collector pod ${p.metadata?.name} did not run: ${state.why}`,
        );
        finished(false);
      } else {
        lastState.set(node, state.why);
      }
    }
    if (pending.size > 0) await sleep(o.pollMs ?? 1000, run.signal);
  }
  for (const node of pending) {
    if (!run.signal?.aborted) {
      run.fail(
        `node/${node}`,
        "start a collector pod",
        `no running collector pod on the node in time (${lastState.get(node) ?? "none scheduled"})`,
      );
    }
    finished(false);
  }
  await Promise.all(tasks);
}
