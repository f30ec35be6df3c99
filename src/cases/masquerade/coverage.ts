/**
 * @module cases/masquerade/coverage — where ip-masq-agent runs: per node, whether its
 * DaemonSet places a pod there (nodeSelector, required affinity, taints) and whether an agent pod
 * actually runs; per pool, `masq/agent-missing` when it does not. A node without the agent keeps
 * whatever rules were written before, and nothing in the ConfigMap shows it.
 */

import type { KubeObject } from "../../evidence/kube-objects.ts";
import { nodeMatchesDaemonSet } from "../../k8s/daemonset-scheduling.ts";
import { type DaemonSetView, type PodView, readDaemonSet } from "../../k8s/objects.ts";
import { type Evidence, type Finding, refToEvidence } from "../../model/types.ts";
import { sh } from "../../report/shell-quote.ts";
import type { ClusterFacts } from "./facts.ts";
import type { AgentIntent } from "./intent.ts";

export interface NodeCoverage {
  readonly node: string;
  readonly pool?: string;
  /** The DaemonSet places a pod here. undefined: no DaemonSet in the snapshot. */
  readonly scheduled?: boolean;
  readonly reason?: string;
  readonly reasonEvidence?: Evidence;
  /** The agent pod running here, if any. */
  readonly agentPod?: PodView;
}

export interface Coverage {
  readonly daemonSet?: DaemonSetView;
  readonly nodes: readonly NodeCoverage[];
  /** Is the agent expected to keep this node's rules? (true when the snapshot cannot tell) */
  expected(node: string): boolean;
}

function isAgentPod(p: PodView, ds: DaemonSetView | undefined): boolean {
  if (p.namespace !== "kube-system") return false;
  if (ds && p.ownerReferences.some((o) => o.kind === "DaemonSet" && o.name === ds.name))
    return true;
  return p.labels["k8s-app"] === "ip-masq-agent";
}

export function agentCoverage(facts: ClusterFacts, intent: AgentIntent): Coverage {
  let ds: DaemonSetView | undefined;
  if (intent.daemonSet) ds = readDaemonSet(intent.daemonSet).value;
  const agentPods = facts.pods.filter((p) => isAgentPod(p, ds));
  const nodes: NodeCoverage[] = facts.nodes.map((n) => {
    const running = agentPods.find(
      (p) => p.nodeName === n.name && (p.phase === undefined || p.phase === "Running"),
    );
    const base = {
      node: n.name,
      ...(n.pool ? { pool: n.pool } : {}),
      ...(running ? { agentPod: running } : {}),
    };
    if (!ds) return base;
    const m = nodeMatchesDaemonSet(n, ds);
    if (m.matches) return { ...base, scheduled: true };
    return {
      ...base,
      scheduled: false,
      reason: m.reason,
      ...(m.source ? { reasonEvidence: refToEvidence(m.source) } : {}),
    };
  });
  const byName = new Map(nodes.map((n) => [n.node, n]));
  return {
    ...(ds ? { daemonSet: ds } : {}),
    nodes,
    expected: (node) => byName.get(node)?.scheduled !== false,
  };
}

const PODS_CMD = "kubectl -n kube-system get pods -l k8s-app=ip-masq-agent -o wide";

/**
 * A kube-system DaemonSet that mounts the ConfigMap `name` as a volume reads it: Cilium's agent
 * mounts `ip-masq-agent` at /etc/config for its own eBPF ip-masq-agent.
 */
function mountedBy(objects: readonly KubeObject[], name: string): KubeObject | undefined {
  return objects.find((o) => {
    if (o.kind !== "DaemonSet" || o.namespace !== "kube-system") return false;
    const tpl = (o.raw["spec"] as { template?: { spec?: { volumes?: unknown } } } | undefined)
      ?.template?.spec?.volumes;
    return (
      Array.isArray(tpl) &&
      tpl.some((v) => (v as { configMap?: { name?: unknown } })?.configMap?.name === name)
    );
  });
}

/** `masq/agent-missing`, one finding per pool (or node without a pool) the agent does not cover. */
export function agentMissingFindings(
  coverage: Coverage,
  intent: AgentIntent,
  objects: readonly KubeObject[],
): Finding[] {
  const out: Finding[] = [];
  if (!coverage.daemonSet) {
    // Absence means something only when the snapshot shows kube-system's DaemonSets at all.
    const sawDaemonSets = objects.some(
      (o) => o.kind === "DaemonSet" && o.namespace === "kube-system",
    );
    if (intent.configMap && sawDaemonSets && !mountedBy(objects, intent.configMap.name)) {
      out.push({
        id: "masq/agent-missing",
        severity: "error",
        title: "No ip-masq-agent DaemonSet: nothing applies the ConfigMap",
        subject: "daemonset/kube-system/ip-masq-agent",
        explanation:
          "The snapshot has kube-system's DaemonSets but none runs ip-masq-agent, so the ConfigMap kube-system/ip-masq-agent is read by nothing. " +
          "The nodes keep whatever masquerade rules they were given at startup (on GKE, the node's own IP-MASQ chain); changing the ConfigMap changes nothing.",
        evidence: [refToEvidence(intent.configMap.source)],
        next: ["kubectl -n kube-system get daemonsets", PODS_CMD],
      });
    }
    return out;
  }
  const ds = coverage.daemonSet;
  const groups = new Map<string, NodeCoverage[]>();
  for (const n of coverage.nodes) {
    const missing = n.scheduled === false || (n.scheduled === true && !n.agentPod);
    if (!missing) continue;
    const key = n.pool ? `pool/${n.pool}` : `node/${n.node}`;
    groups.set(key, [...(groups.get(key) ?? []), n]);
  }
  for (const [subject, list] of groups) {
    const names = list.map((n) => n.node).join(", ");
    const unscheduled = list.filter((n) => n.scheduled === false);
    const evidence: Evidence[] = [];
    for (const n of unscheduled) if (n.reasonEvidence) evidence.push(n.reasonEvidence);
    evidence.push(refToEvidence(ds.source));
    const explanation =
      unscheduled.length > 0
        ? `The DaemonSet ${ds.namespace}/${ds.name} does not place its pod on ${names}: ${unscheduled[0]!.reason}. ` +
          "These nodes keep the masquerade rules they had before (or none), and nothing in the ConfigMap shows it: a ConfigMap change never reaches them."
        : `The DaemonSet ${ds.namespace}/${ds.name} should run on ${names}, but no agent pod is running there. ` +
          "Until one runs, these nodes keep their old rules and a ConfigMap change never reaches them.";
    out.push({
      id: "masq/agent-missing",
      severity: "error",
      title: `ip-masq-agent does not run on ${subject.startsWith("pool/") ? `node pool ${subject.slice(5)}` : subject.slice(5)}`,
      subject,
      explanation,
      evidence: dedupeEvidence(evidence),
      next: [
        PODS_CMD,
        sh`kubectl -n ${ds.namespace} get daemonset ${ds.name} -o yaml`,
        sh`kubectl get node ${list[0]!.node} -o yaml   # labels and taints`,
      ],
    });
  }
  return out;
}

function dedupeEvidence(list: readonly Evidence[]): Evidence[] {
  const seen = new Set<string>();
  return list.filter((e) => {
    const k = `${e.file}:${e.line}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
