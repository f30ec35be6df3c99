/**
 * @module cases/masquerade/plan-steps — what a masquerade plan asks to be done, in the order it
 * must be done, from the causes the diagnosis finds: first the far side's allowlists and the
 * cluster's NetworkPolicies that admit only the addresses the fix removes (the fix alone would
 * break the connection), then the agent's
 * DaemonSet where it does not reach a pool (a strategic-merge patch of its nodeSelector, required
 * node affinity or tolerations, with the patch that undoes it), then the agent on nodes whose
 * rules are stale (its pod restarted, by name), and last the ConfigMap, only when it still exempts
 * a destination.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { RemoteSite } from "../../evidence/remote-site.ts";
import type { ClusterFacts } from "../../k8s/cluster-facts.ts";
import { podAddresses } from "../../k8s/cluster-facts.ts";
import type { NodeView } from "../../k8s/objects.ts";
import type { SourceRef } from "../../model/types.ts";
import { type Cidr, contains, formatCidr, formatIp, mergeCidrs } from "../../net/cidr.ts";
import { readNetworkPolicies } from "../../policy/network-policy.ts";
import { describeSourceChangeBlocker, sourceChangeBlockers } from "../../policy/source-change.ts";
import { ereLiteral, quoted, sh } from "../../report/shell-quote.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import { driftFindings } from "./agent-findings.ts";
import type { Coverage, NodeCoverage } from "./coverage.ts";
import type { TracedDestination } from "./destinations.ts";
import type { AgentIntent } from "./intent.ts";
import type { Blocker, PlanStep } from "./plan.ts";
import { siteDiff } from "./plan-sites.ts";
import { allowlistsToward } from "./remote-allowlist.ts";

type Json = Record<string, unknown>;
const obj = (v: unknown): Json =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {};
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/**
 * The far side's allowlists toward a destination that admit pod addresses but none of the nodes'
 * subnets: once narrowed, the requests arrive from a node address and are dropped.
 */
export function allowlistBlockers(
  sites: readonly RemoteSite[],
  targets: readonly TracedDestination[],
  podRanges: readonly Cidr[],
  nodeSubnets: readonly Cidr[],
): Blocker[] {
  const out: Blocker[] = [];
  for (const site of sites) {
    for (const t of targets) {
      if (!site.prefixes.some((p) => contains(p.cidr, t.ip))) continue;
      for (const a of allowlistsToward(site, t)) {
        const admitsPods = a.sources.some((s) =>
          podRanges.some((p) => contains(s.cidr, { family: p.family, value: p.start })),
        );
        const admitsNodes = nodeSubnets.some((n) =>
          a.sources.some((s) => contains(s.cidr, { family: n.family, value: n.start })),
        );
        if (!admitsPods || admitsNodes || out.some((b) => b.allowlist === a.name)) continue;
        const dst = `${formatIp(t.ip)}${t.port ? `:${t.port}` : ""}`;
        const add = mergeCidrs(nodeSubnets).map(formatCidr);
        const src = a.sources[0]?.source ?? a.source;
        out.push({
          site: site.name,
          allowlist: a.name,
          file: src.file,
          line: src.line,
          ...(src.text ? { text: src.text } : {}),
          breaks: `The fix alone breaks the connection to ${dst}: ${site.name}'s allowlist ${a.name} admits only ${a.sources.map((s) => formatCidr(s.cidr)).join(", ")} (the pod addresses the fix replaces), and after narrowing the requests arrive from the nodes' addresses (${add.join(", ")}).`,
          combined: [
            `Add the nodes' addresses to ${a.name} first, then narrow (allowlist + narrowing):`,
            ...siteDiff(site, [], [], [{ name: a.name, add }]),
            "Or keep pod identity toward it instead: podpath plan masquerade --strategy keep-pod-identity",
          ],
        });
      }
    }
  }
  return out;
}

/**
 * The cluster's NetworkPolicies that admit the pods' traffic to a pod the narrowing newly
 * masquerades toward (its address leaves the exempt list: a `--pod-range` narrower than the pods,
 * or pods outside the ranges the snapshot states) and not the nodes' addresses it then arrives
 * from. Egress rules match destinations, which masquerade leaves alone, so only the destination
 * pods' ingress policies count (policy/source-change).
 */
export function networkPolicyBlockers(
  objects: readonly KubeObject[],
  facts: ClusterFacts,
  changed: readonly Cidr[],
  podRanges: readonly Cidr[],
): Blocker[] {
  if (changed.length === 0) return [];
  const policies = readNetworkPolicies(objects).value;
  if (policies.length === 0) return [];
  const destinations = facts.pods.flatMap((p) =>
    podAddresses(p).map((a) => ({ ...p, ip: a.ip, source: a.source })),
  );
  const nodes = facts.nodes.flatMap((n) =>
    n.internalIPs.map(
      (a) =>
        ({
          family: a.ip.family,
          start: a.ip.value,
          end: a.ip.value,
          prefix: a.ip.family === 4 ? 32 : 128,
        }) as Cidr,
    ),
  );
  return sourceChangeBlockers(policies, destinations, changed, podRanges, nodes).map((b) => ({
    kind: "network-policy" as const,
    site: "cluster",
    allowlist: `NetworkPolicy ${b.policy}`,
    file: b.source.file,
    line: b.source.line,
    ...(b.source.text ? { text: b.source.text } : {}),
    breaks: `The fix alone breaks the connection to ${b.pod} (${formatIp(b.podIp)}): today's list exempts it, the narrowed one does not, so the pods' traffic to it arrives from the nodes' addresses. ${describeSourceChangeBlocker(b)}.`,
    combined: [
      `Keep ${formatIp(b.podIp)} exempt (it is a pod: give --pod-range with the cluster's whole pod range), or add the nodes' addresses to ${b.policy}'s ingress before narrowing:`,
      "  ingress:",
      "  - from:",
      ...mergeCidrs(b.refused).map((c) => `+   - ipBlock: {cidr: ${formatCidr(c)}}`),
    ],
  }));
}

const labelMatches = (
  e: { key?: unknown; operator?: unknown; values?: unknown },
  labels: Readonly<Record<string, string>>,
): boolean => {
  const have = typeof e.key === "string" ? labels[e.key] : undefined;
  const values = arr(e.values);
  switch (e.operator) {
    case "In":
      return have !== undefined && values.includes(have);
    case "NotIn":
      return have === undefined || !values.includes(have);
    case "Exists":
      return have !== undefined;
    case "DoesNotExist":
      return have === undefined;
    default:
      return true;
  }
};

/** The required terms changed so that `node` matches the first; false when it cannot be done. */
function admitToTerms(terms: Json[], node: NodeView): boolean {
  if (terms.some((t) => arr(t["matchExpressions"]).every((e) => labelMatches(obj(e), node.labels))))
    return true;
  const first = terms[0];
  if (!first || arr(first["matchFields"]).length > 0) return false;
  const next: unknown[] = [];
  for (const raw of arr(first["matchExpressions"])) {
    const e = obj(raw);
    if (labelMatches(e, node.labels)) {
      next.push(e);
      continue;
    }
    const have = typeof e["key"] === "string" ? node.labels[e["key"]] : undefined;
    if (e["operator"] === "NotIn") {
      const values = arr(e["values"]).filter((v) => v !== have);
      if (values.length > 0) next.push({ ...e, values });
    } else if (e["operator"] === "In" && have !== undefined) {
      next.push({ ...e, values: [...arr(e["values"]), have] });
    } else if (e["operator"] !== "DoesNotExist") {
      return false;
    }
  }
  first["matchExpressions"] = next;
  return true;
}

const patchCmd = (ns: string, name: string, patch: Json) =>
  sh`kubectl -n ${ns} patch daemonset ${name} --type strategic -p ${quoted(JSON.stringify(patch))}`;

const templateSpec = (spec: Json): Json => ({ spec: { template: { spec } } });

/**
 * The DaemonSet's coverage as one strategic-merge patch (and the patch that undoes it) that
 * places the agent on every node it misses for its nodeSelector, required node affinity or
 * taints; nodes where it should run but no pod runs get the commands that show why.
 */
export function coverageSteps(coverage: Coverage, nodes: readonly NodeView[]): PlanStep[] {
  const ds = coverage.daemonSet;
  if (!ds) return [];
  const missed = coverage.nodes.filter((n) => n.scheduled === false);
  const idle = coverage.nodes.filter((n) => n.scheduled === true && !n.agentPod);
  const steps: PlanStep[] = [];
  if (missed.length > 0) steps.push(missedNodesStep(ds, missed, nodes));
  if (idle.length > 0) steps.push(idleNodesStep(ds, idle));
  return steps;
}

type DaemonSet = NonNullable<Coverage["daemonSet"]>;

/** The pools (or, for nodes in none, the nodes) of `list`, each once, comma-separated. */
const pools = (list: readonly NodeCoverage[]) =>
  [...new Set(list.map((n) => (n.pool ? `pool ${n.pool}` : `node ${n.node}`)))].join(", ");

interface CoveragePatch {
  readonly change: Json;
  readonly undo: Json;
  /** Nodes the patch cannot admit, with the reason. */
  readonly unfixable: string[];
}

/**
 * The strategic-merge patch of the pod template's spec that admits the missed nodes (their
 * nodeSelector keys removed, required node affinity widened, tolerations added), and its undo.
 */
function coveragePatch(
  ds: DaemonSet,
  missed: readonly NodeCoverage[],
  nodes: readonly NodeView[],
): CoveragePatch {
  const spec = obj(obj(obj(obj(ds.object.raw["spec"])["template"])["spec"]));
  const change: Json = {};
  const undo: Json = {};
  const unfixable: string[] = [];
  const selector = obj(spec["nodeSelector"]);
  const tolerations = arr(spec["tolerations"]).map(obj);
  const terms = arr(
    obj(
      obj(obj(spec["affinity"])["nodeAffinity"])["requiredDuringSchedulingIgnoredDuringExecution"],
    )["nodeSelectorTerms"],
  ).map((t) => structuredClone(obj(t)));
  const before = JSON.parse(JSON.stringify(terms)) as Json[];
  let termsChanged = false;
  const newTolerations = [...tolerations];
  for (const m of missed) {
    const node = nodes.find((n) => n.name === m.node);
    if (!node) continue;
    for (const [k, want] of Object.entries(selector)) {
      if (node.labels[k] === want) continue;
      change["nodeSelector"] = { ...obj(change["nodeSelector"]), [k]: null };
      undo["nodeSelector"] = { ...obj(undo["nodeSelector"]), [k]: want };
    }
    if (terms.length > 0) {
      if (admitToTerms(terms, node)) termsChanged = true;
      else unfixable.push(`${m.node}: ${m.reason ?? "required node affinity"}`);
    }
    for (const taint of node.taints) {
      if (taint.effect === "PreferNoSchedule") continue;
      if (m.reason?.includes(`taint ${taint.key}`) !== true) continue;
      if (newTolerations.some((t) => t["key"] === taint.key && t["effect"] === taint.effect))
        continue;
      newTolerations.push({ key: taint.key, operator: "Exists", effect: taint.effect });
    }
  }
  if (termsChanged) {
    const na = (t: Json[] | null) => ({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution:
          t === null ? null : { nodeSelectorTerms: t },
      },
    });
    // a term left empty matches no node: the requirement goes as a whole instead
    const emptied = terms.some(
      (t) => arr(t["matchExpressions"]).length === 0 && arr(t["matchFields"]).length === 0,
    );
    change["affinity"] = na(emptied ? null : terms);
    undo["affinity"] = na(before);
  }
  if (newTolerations.length > tolerations.length) {
    change["tolerations"] = newTolerations;
    undo["tolerations"] = tolerations.length > 0 ? tolerations : null;
  }
  return { change, undo, unfixable };
}

/** The patch that makes the DaemonSet run on the nodes it misses, with the checks and undo. */
function missedNodesStep(
  ds: DaemonSet,
  missed: readonly NodeCoverage[],
  nodes: readonly NodeView[],
): PlanStep {
  const { change, undo, unfixable } = coveragePatch(ds, missed, nodes);
  const evidence: SourceRef[] = missed.flatMap((m) =>
    m.reasonEvidence ? [{ file: m.reasonEvidence.file, line: m.reasonEvidence.line }] : [],
  );
  const ns = ds.namespace;
  return {
    cause: "agent-coverage",
    title: `Make the DaemonSet ${ns}/${ds.name} run on ${pools(missed)}`,
    why: `${missed.map((m) => m.reason ?? m.node).join("; ")}. Those nodes keep the rules they have; a ConfigMap change never reaches them.${unfixable.length ? ` Not fixed by the patch (label the nodes instead): ${unfixable.join("; ")}.` : ""}`,
    evidence: [...evidence, ds.source],
    apply:
      Object.keys(change).length > 0
        ? [
            patchCmd(ns, ds.name, templateSpec(change)),
            sh`kubectl -n ${ns} rollout status ${`daemonset/${ds.name}`}`,
            ...missed.map(
              (m) =>
                sh`kubectl -n ${ns} get pods -l k8s-app=ip-masq-agent -o wide --field-selector ${`spec.nodeName=${m.node}`}   # an agent pod Running here`,
            ),
          ]
        : [],
    rollback: Object.keys(undo).length > 0 ? [patchCmd(ns, ds.name, templateSpec(undo))] : [],
  };
}

/** Nodes where the DaemonSet places a pod but none runs: the commands that show why. */
function idleNodesStep(ds: DaemonSet, idle: readonly NodeCoverage[]): PlanStep {
  return {
    cause: "agent-coverage",
    title: `Find why no agent pod runs on ${pools(idle)}`,
    why: `The DaemonSet ${ds.namespace}/${ds.name} places a pod on ${idle.map((n) => n.node).join(", ")}, but none is running there.`,
    evidence: [ds.source],
    apply: [
      sh`kubectl -n ${ds.namespace} describe daemonset ${ds.name}`,
      ...idle.map(
        (n) =>
          sh`kubectl -n ${ds.namespace} get pods -o wide --field-selector ${`spec.nodeName=${n.node}`}`,
      ),
    ],
    rollback: [],
  };
}

/** Nodes whose rules differ from what their running agent writes: restart that agent's pod. */
export function staleAgentSteps(
  snap: Snapshot,
  intent: AgentIntent,
  coverage: Coverage,
): PlanStep[] {
  const ns = coverage.daemonSet?.namespace ?? "kube-system";
  const drift = driftFindings(intent, [...snap.nodes.values()], (n) => coverage.expected(n));
  return drift.flatMap((f) => {
    const node = f.subject.replace(/^node\//, "");
    const pod = coverage.nodes.find((n) => n.node === node)?.agentPod;
    if (!pod) return [];
    return [
      {
        cause: "agent-stale",
        title: `Restart the agent on ${node}: pod ${pod.namespace}/${pod.name}`,
        why: `${f.explanation.split(". ")[0]}. The ConfigMap is right; the agent on ${node} has not written it (it may have failed or be stuck).`,
        evidence: f.evidence.map((e) => ({ file: e.file, line: e.line })),
        apply: [
          sh`kubectl -n ${ns} logs ${pod.name} --tail=50   # why it stopped syncing`,
          sh`kubectl -n ${ns} delete pod ${pod.name}   # the DaemonSet starts a new one, which writes the rules from the ConfigMap`,
          sh`iptables-save -t nat | grep -E ${quoted(ereLiteral(intent.flags.masqChain))}   # on ${node}: the rules the ConfigMap says`,
        ],
        rollback: ["nothing to roll back: the new pod runs the same ConfigMap"],
      },
    ];
  });
}
