/**
 * @module live/collect-cilium — Cilium's own view of each selected node, with `--node-state`:
 * `cilium-dbg status --verbose` and `cilium-dbg bpf ipmasq list` (or `cilium …` in images
 * before 1.15), run by exec in the node's Cilium agent pod (DaemonSet `cilium`, or `anetd` on
 * GKE Dataplane V2), written to `nodes/<node>/cilium-status.txt` and
 * `nodes/<node>/cilium-bpf-ipmasq.txt`. Only these fixed read commands run. A node without an
 * agent pod, or an agent whose status shows masquerading without the BPF ip-masq-agent (so no
 * map to list), is recorded as not available, not as a failure.
 */
import type { ApiObject } from "../k8s/cluster.ts";
import { CILIUM_COMMANDS, type ReadCommand } from "./collect-commands.ts";
import { execOptions, failureOf, judge } from "./collect-exec.ts";
import type { RunContext } from "./collect-objects.ts";
import { createLimiter } from "./collect-pool.ts";
import type { Progress } from "./collect-types.ts";

const AGENT_DAEMONSETS = new Set(["cilium", "anetd"]);

/** Whether the pod is a Cilium agent: owned by DaemonSet cilium/anetd, or labelled k8s-app=cilium. */
export function isCiliumAgentPod(p: ApiObject): boolean {
  const refs = p.metadata?.["ownerReferences"];
  const owned =
    Array.isArray(refs) &&
    refs.some(
      (r: unknown) =>
        typeof r === "object" &&
        r !== null &&
        (r as { kind?: unknown }).kind === "DaemonSet" &&
        AGENT_DAEMONSETS.has(String((r as { name?: unknown }).name)),
    );
  const app = p.metadata?.labels?.["k8s-app"];
  return owned || (app !== undefined && AGENT_DAEMONSETS.has(app));
}

/** The agent container: `cilium-agent` when the pod has one, else the default container. */
export function agentContainer(p: ApiObject): string | undefined {
  const cs = (p["spec"] as { containers?: { name?: unknown }[] } | undefined)?.containers;
  const names = (Array.isArray(cs) ? cs : [])
    .map((c) => c?.name)
    .filter((n): n is string => typeof n === "string");
  if (names.includes("cilium-agent")) return "cilium-agent";
  return p.metadata?.annotations?.["kubectl.kubernetes.io/default-container"] ?? names[0];
}

/**
 * What `status --verbose` says of the BPF ip-masq-agent: `Masquerading: BPF (ip-masq-agent) …`
 * when on; another Masquerading line when off; undefined when the status was not read.
 */
export function usesBpfIpMasqAgent(status: string | undefined): boolean | undefined {
  if (status === undefined) return undefined;
  const line = /^Masquerading:\s*(.*)$/m.exec(status)?.[1];
  if (line === undefined) return undefined;
  return /ip-masq-agent/.test(line);
}

/** Runs the Cilium commands in each selected node's agent pod; failures are reported per node. */
export async function readCiliumStates(
  run: RunContext,
  nodes: readonly string[],
  agentPods: readonly ApiObject[],
  progress: (p: Progress) => void,
): Promise<void> {
  const agents = agentPods.filter(isCiliumAgentPod);
  if (agents.length === 0) return; // not a Cilium cluster
  progress({ kind: "phase", message: `reading Cilium agent state on ${nodes.length} node(s)` });
  const byNode = new Map<string, ApiObject>();
  for (const p of agents) {
    const n = (p["spec"] as { nodeName?: unknown } | undefined)?.nodeName;
    if (typeof n === "string") byNode.set(n, p);
  }
  const limit = createLimiter(run.options.concurrency ?? 10);
  await Promise.all(
    nodes.map((node) =>
      limit(async () => {
        if (run.signal?.aborted) return;
        const pod = byNode.get(node);
        if (pod === undefined) {
          run.note(`node/${node}`, "cilium-dbg status", "no Cilium agent pod on the node");
          return;
        }
        try {
          await readAgent(run, node, pod);
        } catch (e) {
          if (run.signal?.aborted) throw e;
          run.fail(`node/${node}`, "exec in the Cilium agent", e);
        }
      }),
    ),
  );
}

async function readAgent(run: RunContext, node: string, pod: ApiObject): Promise<void> {
  const target = {
    namespace: pod.metadata?.namespace ?? "kube-system",
    pod: pod.metadata?.name ?? "",
    container: agentContainer(pod),
  };
  let status: string | undefined;
  for (const c of CILIUM_COMMANDS) {
    if (c.artifact === "cilium-bpf-ipmasq" && usesBpfIpMasqAgent(status) === false) {
      run.note(
        `node/${node}`,
        c.argv.join(" "),
        "cilium status shows masquerading without the BPF ip-masq-agent: there is no map to list",
      );
      continue;
    }
    const out = await runOne(run, target, c);
    if ("data" in out) {
      await run.write(`nodes/${node}/${c.artifact}.txt`, out.data);
      if (c.artifact === "cilium-status") status = out.data.toString("utf8");
    } else {
      const f = failureOf(c, out);
      run.fail(`node/${node}`, f.command, `${f.why} (pod ${target.namespace}/${target.pod})`);
    }
  }
}

/** One command, with its fallback when the image lacks the first binary. */
async function runOne(
  run: RunContext,
  target: { namespace: string; pod: string; container: string | undefined },
  c: ReadCommand,
): Promise<{ data: Buffer } | { why: string; notAvailable?: true }> {
  const timeoutMs = run.options.execTimeoutMs ?? 60_000;
  const opts = execOptions(target, {
    timeoutMs,
    signal: run.signal,
    maxOutputBytes: run.options.execOutputLimitBytes,
  });
  let r = await run.source.exec(target.namespace, target.pod, c.argv, opts);
  if ((r.code === 127 || r.code === 126 || /not found/i.test(r.message ?? "")) && c.fallback) {
    const fb = await run.source.exec(target.namespace, target.pod, c.fallback, opts);
    if (!(fb.code === 127 || fb.code === 126 || /not found/i.test(fb.message ?? ""))) r = fb;
  }
  const verdict = judge(c, r, timeoutMs);
  // "No entries found." goes to stderr; keep it, so the file says the map is empty
  if ("data" in verdict && verdict.data.length === 0 && r.stderr.trim() !== "")
    return { data: Buffer.from(r.stderr) };
  return verdict;
}
