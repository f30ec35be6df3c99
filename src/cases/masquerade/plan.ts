/**
 * @module cases/masquerade/plan — the fix for case A as a plan: `narrow` (the non-masquerade list shrinks
 * to the pod range, plus other private blocks only where in-cluster traffic needs them) or
 * `keep-pod-identity` (the far side learns the pod range). Each plan says who will see a different
 * source address afterwards (a behaviour change to announce), what in the snapshot names pod
 * addresses and will silently stop matching, which node pools the change never reaches, how to
 * apply it, how to check it, and how to roll it back. Pure: snapshot in, plan out.
 */
import { isExempt } from "../../agents/ip-masq-agent/exempt.ts";
import { goParseCidr } from "../../agents/ip-masq-agent/go-net.ts";
import { primaryAddress } from "../../evidence/ip-addr.ts";
import { hostCidr, podAddresses } from "../../k8s/cluster-facts.ts";
import type { Diagnostic, Missing, SourceRef } from "../../model/types.ts";
import {
  type Cidr,
  contains,
  excludeCidrs,
  formatCidr,
  formatIp,
  type Ip,
  mergeCidrs,
  overlaps,
  parseCidr,
  tryParseCidr,
} from "../../net/cidr.ts";
import { ereLiteral, quoted, sh } from "../../report/shell-quote.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { Destination } from "../endpoints.ts";
import type { Coverage } from "./coverage.ts";
import { chooseDestinations, type TracedDestination } from "./destinations.ts";
import type { ClusterFacts } from "./facts.ts";
import type { AgentIntent } from "./intent.ts";
import { type MasqueradeModel, masqueradeModel } from "./model.ts";
import { type OwnerPlan, ownerPlan, SOURCE_OWNERS, type SourceOwnerCase } from "./owners/index.ts";
import { newAgentConfig } from "./plan-config.ts";
import { podAddressReferences } from "./plan-impact.ts";
import { siteChanges } from "./plan-sites.ts";
import {
  allowlistBlockers,
  coverageSteps,
  networkPolicyBlockers,
  staleAgentSteps,
} from "./plan-steps.ts";

export type MasqueradeStrategy = "narrow" | "keep-pod-identity";

export interface MasqueradePlanOptions {
  readonly dest?: Destination;
  readonly strategy: MasqueradeStrategy;
  /** The cluster's pod range, when the user knows it better than the snapshot. */
  readonly podRange?: readonly Cidr[];
  /** Folder the ConfigMap files are (to be) written to; the commands name them there. */
  readonly fileDir?: string;
}

/** One entry of the new list and why it is there. */
export interface KeptBlock {
  readonly cidr: string;
  readonly why: string;
}

/** Something in the snapshot that names pod addresses and will stop matching after the change. */
export interface PodAddressReference {
  readonly what: string;
  readonly file: string;
  readonly line: number;
  readonly text?: string;
  readonly consequence: string;
}

export interface PoolCoverage {
  readonly pool: string;
  readonly nodes: readonly string[];
  readonly reached: boolean;
  readonly why: string;
}

export interface SiteChange {
  readonly site: string;
  readonly file: string;
  readonly routesBackAdd: readonly string[];
  readonly selectorsAdd: readonly string[];
  /** Firewall scope: allowlists toward the destination whose sources must admit the pod range. */
  readonly allowlistSourcesAdd: readonly {
    readonly name: string;
    readonly add: readonly string[];
  }[];
  /** The site file's fields before and after, as YAML lines with +/- marks. */
  readonly diff: readonly string[];
}

/** Something that makes the fix alone break the connection; said first, with the combined change. */
export interface Blocker {
  /** Absent: a far side's allowlist (`remote/*.yaml`); `network-policy`: a NetworkPolicy in cluster/. */
  readonly kind?: "network-policy";
  /** The far site, or `cluster` for a NetworkPolicy. */
  readonly site: string;
  readonly allowlist: string;
  readonly file: string;
  readonly line: number;
  readonly text?: string;
  /** What breaks, in words. */
  readonly breaks: string;
  /** The combined change: the allowlist's diff with the narrowing, or keep-pod-identity. */
  readonly combined: readonly string[];
}

/** One thing to do, in the order the plan lists them: a cause the diagnosis finds and its change. */
export interface PlanStep {
  readonly cause:
    | "far-side-allowlist"
    | "network-policy"
    | "agent-coverage"
    | "agent-stale"
    | "config"
    | "owner-setting";
  readonly title: string;
  readonly why: string;
  readonly evidence: readonly SourceRef[];
  readonly apply: readonly string[];
  readonly rollback: readonly string[];
}

export interface NarrowPlan {
  readonly newList: readonly KeptBlock[];
  readonly dropped: readonly {
    readonly text: string;
    readonly source?: SourceRef;
    readonly why: string;
  }[];
  /** The agent's verdict on the new config: undefined when it accepts it. */
  readonly validationError?: string;
  readonly newConfigMap: string;
  readonly newConfigMapFile: string;
  readonly apply: readonly string[];
  /** Expected rules on every node afterwards (iptables-save form). */
  readonly expectedRules: readonly string[];
  readonly checks: readonly string[];
}

export interface Rollback {
  readonly previousConfigMap?: string;
  readonly file: string;
  readonly apply: readonly string[];
  readonly checks: readonly string[];
}

export interface MasqueradePlan {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "plan masquerade";
  readonly snapshot: string;
  readonly strategy: MasqueradeStrategy;
  readonly podRanges: readonly string[];
  readonly destinations: readonly {
    readonly ip: string;
    readonly port?: number;
    readonly exemptToday: boolean;
    readonly exemptBy?: string;
    readonly exemptBySource?: SourceRef;
  }[];
  readonly current: readonly { readonly text: string; readonly source?: SourceRef }[];
  /** What makes the fix alone break the connection (said first). */
  readonly blockers: readonly Blocker[];
  /** What to do, in order: blockers, the agent's coverage, stale agents, then the ConfigMap. */
  readonly steps: readonly PlanStep[];
  readonly narrow?: NarrowPlan;
  /**
   * The fix in the terms of the owner of the pods' source address when it is not ip-masq-agent
   * (the AWS VPC CNI's env, an IPPool, cilium-config): then `narrow` is absent.
   */
  readonly owner?: OwnerPlan;
  readonly keepPodIdentity?: { readonly sites: readonly SiteChange[] };
  /** The behaviour change, in words, and the ranges whose destinations will see node addresses. */
  readonly impact: {
    readonly announcement: string;
    readonly nowMasqueraded: readonly string[];
    readonly namesPodAddresses: readonly PodAddressReference[];
  };
  readonly coverage: readonly PoolCoverage[];
  readonly tradeoff: readonly {
    readonly aspect: string;
    readonly narrow: string;
    readonly keepPodIdentity: string;
  }[];
  readonly rollback: Rollback;
  /** The ConfigMap files are on disk (`--write`): the commands can be run as printed. */
  readonly filesWritten?: boolean;
  readonly missing: readonly Missing[];
  readonly diagnostics: readonly Diagnostic[];
}

export class PlanError extends Error {
  override readonly name = "PlanError";
  readonly code = "ERR_PLAN_INPUT";
}

const ipOf = (c: Cidr): Ip => ({ family: c.family, value: c.start });

/** The subnets the nodes' own addresses live in (node-to-node and pod-to-node traffic). */
function nodeSubnets(snap: Snapshot, facts: ClusterFacts): { cidr: Cidr; why: string }[] {
  const out: { cidr: Cidr; why: string }[] = [];
  for (const n of snap.nodes.values()) {
    for (const iface of n.interfaces ?? []) {
      if (iface.name === "lo") continue;
      const a = primaryAddress(iface, 4);
      const internal = facts.nodes.find((v) => v.name === n.name)?.internalIPs[0]?.ip;
      if (a && internal && a.local.value === internal.value) {
        out.push({
          cidr: a.cidr,
          why: `the node subnet of ${n.name} (${iface.name}, ${a.source.file}:${a.source.line})`,
        });
      }
    }
  }
  if (out.length === 0) {
    for (const n of facts.nodes) {
      for (const ip of n.internalIPs) {
        out.push({ cidr: parseCidr(formatIp(ip.ip)), why: `the InternalIP of ${n.name}` });
      }
    }
  }
  return out;
}

function configEntries(intent: AgentIntent): { text: string; cidr?: Cidr; source?: SourceRef }[] {
  return (intent.config.nonMasqueradeCIDRs ?? []).map((e) => {
    const r = goParseCidr(e.text);
    return {
      text: e.text,
      ...("ok" in r ? { cidr: r.ok.cidr } : {}),
      ...(e.source ? { source: e.source } : {}),
    };
  });
}

const TRADEOFF = [
  {
    aspect: "what the far side sees",
    narrow: "one node address per node: easy to allowlist, hides which pod sent what",
    keepPodIdentity: "the pod's own address end to end: attribution per pod",
  },
  {
    aspect: "scope of the change",
    narrow: "cluster-wide: every destination removed from the list now sees node addresses",
    keepPodIdentity:
      "the far side: return routes, VPN traffic selectors and firewalls learn the pod range",
  },
  {
    aspect: "who must act",
    narrow: "the cluster team (one ConfigMap)",
    keepPodIdentity: "the network team on the far side (routers, VPN, firewalls)",
  },
  {
    aspect: "what fails silently afterwards",
    narrow: "logs, allowlists and firewall rules that name pod addresses",
    keepPodIdentity: "nothing on the cluster side; every device in the path must carry a new range",
  },
];

/** The pod range the plan keeps exempt, and where it comes from (for the new list's reasons). */
interface PodRange {
  readonly cidrs: readonly Cidr[];
  readonly why: string;
  /** Only the nodes' ranges (and pods' addresses): the cluster's whole range may be bigger. */
  readonly fromNodes?: boolean;
}

/** Pod addresses outside `ranges` (pods on nodes whose range the snapshot does not show). */
function podsOutside(facts: ClusterFacts, ranges: readonly Cidr[]) {
  return facts.pods.flatMap((p) =>
    podAddresses(p)
      .filter((a) => a.ip.family === 4 && !ranges.some((r) => contains(r, a.ip)))
      .map((a) => ({ pod: `${p.namespace}/${p.name}`, ip: a.ip, source: a.source })),
  );
}

const cite = (s: SourceRef) => `${s.file}:${s.line}`;

/**
 * The pod range: given, or the cluster CIDR a component states, or the one kube-proxy's rules on
 * the nodes show, with the nodes' ranges and every pod's address merged in; else the nodes' ranges
 * and the pods' addresses (with a warning and what would decide better). Throws PlanError when
 * none is known.
 */
function planPodRange(
  snap: Snapshot,
  model: MasqueradeModel,
  opts: MasqueradePlanOptions,
  diagnostics: Diagnostic[],
  missing: Missing[],
): PodRange {
  const stated = model.statedPodRange ?? model.rulesPodRange;
  let range: PodRange;
  if (opts.podRange && opts.podRange.length > 0) {
    range = { cidrs: mergeCidrs(opts.podRange), why: "the pod range (--pod-range)" };
  } else if (stated && stated.cidrs.length > 0) {
    const base = mergeCidrs([...stated.cidrs, ...model.facts.podRanges]);
    const outside = podsOutside(model.facts, base);
    range = {
      cidrs: mergeCidrs([...base, ...outside.map((o) => hostCidr(o.ip))]),
      why: `the cluster's pod range (${stated.what}, ${cite(stated.source)})`,
    };
  } else {
    // pods' addresses widen the nodes' ranges; alone they are no range to plan with
    const outside =
      model.facts.podRanges.length > 0 ? podsOutside(model.facts, model.facts.podRanges) : [];
    range = {
      cidrs: mergeCidrs([...model.facts.podRanges, ...outside.map((o) => hostCidr(o.ip))]),
      why: "the pod ranges of the nodes in the snapshot",
      fromNodes: true,
    };
    if (outside.length > 0) {
      diagnostics.push({
        code: "PLAN_POD_RANGE_BIGGER",
        severity: "warning",
        message: `pods have addresses outside the nodes' ranges (${outside
          .slice(0, 3)
          .map((o) => `${o.pod} ${formatIp(o.ip)} at ${cite(o.source)}`)
          .join(
            ", ",
          )}${outside.length > 3 ? `, and ${outside.length - 3} more` : ""}): the cluster's pod range is bigger than the snapshot's Nodes show; the plan keeps those addresses exempt one by one, which is not enough for the pods it does not list. Give --pod-range CIDR`,
        source: outside[0]!.source,
      });
    }
    if (range.cidrs.length > 0) {
      diagnostics.push({
        code: "PLAN_POD_RANGE_FROM_NODES",
        severity: "warning",
        message: `the cluster's whole pod range is not in the snapshot, so the plan keeps only the nodes' ranges (${range.cidrs.map(formatCidr).join(", ")}); nodes added later get ranges outside it and their pods' traffic would be masqueraded. Give --pod-range CIDR (GKE: gcloud container clusters describe CLUSTER --format='value(clusterIpv4Cidr)'), or add kube-proxy's ConfigMap to cluster/ or the nodes' iptables-save (kube-proxy's \`! -s CIDR … -j KUBE-MARK-MASQ\` rules state it)`,
      });
      missing.push({
        file: "cluster/kube-proxy.yaml",
        would_decide:
          "the cluster's whole pod range (clusterCIDR), rather than the ranges of the nodes that exist today",
        command: "kubectl -n kube-system get configmap kube-proxy -o yaml",
      });
    }
  }
  if (range.cidrs.length === 0) {
    throw new PlanError(
      `${snap.name}: the pod range is not known: no Node in cluster/*.yaml has spec.podCIDR(s) (kubectl get nodes -o yaml > cluster/nodes.yaml), or give --pod-range CIDR`,
    );
  }
  return range;
}

/** The destinations to plan for; throws PlanError when there is none or one is a pod address. */
function planTargets(
  snap: Snapshot,
  model: MasqueradeModel,
  opts: MasqueradePlanOptions,
  podRanges: readonly Cidr[],
): TracedDestination[] {
  const targets = chooseDestinations(
    opts.dest ? { dest: opts.dest } : {},
    model.farSites.sites,
    snap.probes,
    model.facts,
  ).list;
  if (targets.length === 0) {
    throw new PlanError(
      `${snap.name}: no destination to plan for: give --dest IP[:PORT], or describe the far side in remote/*.yaml`,
    );
  }
  for (const t of targets) {
    if (podRanges.some((r) => contains(r, t.ip))) {
      throw new PlanError(
        `--dest ${formatIp(t.ip)} is inside the pod range: pod-to-pod traffic is never masqueraded by this fix`,
      );
    }
  }
  return targets;
}

/** Each destination and the entry of today's list that exempts it, if one does. */
function destinationsToday(
  targets: readonly TracedDestination[],
  intent: AgentIntent,
): MasqueradePlan["destinations"] {
  return targets.map((t) => {
    const ex = isExempt(intent.config, t.ip, intent.flags);
    const entry = ex.exempt && ex.reason === "non-masquerade-cidr" ? ex.entry : undefined;
    return {
      ip: formatIp(t.ip),
      ...(t.port ? { port: t.port } : {}),
      exemptToday: ex.exempt,
      ...(entry ? { exemptBy: entry.text } : {}),
      ...(entry?.source ? { exemptBySource: entry.source } : {}),
    };
  });
}

type ConfigEntry = ReturnType<typeof configEntries>[number];

/** The narrowed list: what stays exempt, what is dropped and why, what is masqueraded now. */
interface NarrowList {
  /** The IPv4 blocks that stay exempt, merged, destinations cut out. */
  readonly merged: readonly Cidr[];
  readonly newList: readonly KeptBlock[];
  readonly dropped: NarrowPlan["dropped"];
  /** The IPv4 ranges of today's list that are no longer exempt. */
  readonly changed: readonly Cidr[];
}

/** Why a dropped entry goes: the destinations it covers, or that nothing in the cluster needs it. */
function droppedWhy(e: ConfigEntry, destBlocks: readonly Cidr[]): string {
  const covered = destBlocks.filter((d) => e.cidr && contains(e.cidr, ipOf(d)));
  return covered.length > 0
    ? `covers ${covered.map((d) => formatIp(ipOf(d))).join(", ")}, which must be masqueraded`
    : "no in-cluster address in the snapshot needs it";
}

/** narrow: the pod ranges, plus in-cluster blocks the old list already covered. */
function narrowList(
  snap: Snapshot,
  facts: ClusterFacts,
  current: readonly ConfigEntry[],
  range: PodRange,
  targets: readonly TracedDestination[],
): NarrowList {
  const destBlocks = targets.map((t) => parseCidr(formatIp(t.ip)));
  const keep: { cidr: Cidr; why: string }[] = range.cidrs.map((c) => ({
    cidr: c,
    why: `${range.why}: pod-to-pod traffic keeps pod addresses, as Kubernetes networking requires`,
  }));
  const oldCidrs = current.flatMap((e) => (e.cidr ? [e.cidr] : []));
  if (range.fromNodes) {
    // the nodes show only part of the cluster's range: an entry of today's list that holds every
    // node range and no destination may be that range, and narrowing it would masquerade pods
    for (const e of current) {
      const c = e.cidr;
      if (c?.family !== 4 || destBlocks.some((d) => contains(c, ipOf(d)))) continue;
      if (
        !range.cidrs.every(
          (r) =>
            r.family !== 4 || (contains(c, ipOf(r)) && contains(c, { family: 4, value: r.end })),
        )
      )
        continue;
      keep.push({
        cidr: c,
        why: `today's entry ${e.text}${e.source ? ` (${e.source.file}:${e.source.line})` : ""} holds every node's pod range and no destination: kept whole, as it may be the cluster's pod range (the nodes in the snapshot show only part of it)`,
      });
    }
  }
  for (const s of nodeSubnets(snap, facts)) {
    if (oldCidrs.some((c) => contains(c, s.cidr)) && !keep.some((k) => contains(k.cidr, s.cidr))) {
      keep.push({
        cidr: s.cidr,
        why: `${s.why}: pods talking to node addresses (hostNetwork pods, the kubelet) keep their pod source, as today`,
      });
    }
  }
  const merged = excludeCidrs(mergeCidrs(keep.map((k) => k.cidr)), destBlocks);
  const newList: KeptBlock[] = merged.map((c) => ({
    cidr: formatCidr(c),
    why:
      keep.find(
        (k) => contains(k.cidr, ipOf(c)) && contains(k.cidr, { family: c.family, value: c.end }),
      )?.why ??
      keep.find((k) => overlaps(k.cidr, c))?.why ??
      "in-cluster",
  }));
  // IPv6 entries stay as they are: this plan narrows the IPv4 list
  for (const e of current) {
    if (e.cidr?.family === 6) newList.push({ cidr: e.text, why: "IPv6 entry, unchanged" });
  }
  const dropped = current
    .filter((e) => e.cidr?.family !== 6 && !newList.some((n) => n.cidr === e.text))
    .map((e) => ({
      text: e.text,
      ...(e.source ? { source: e.source } : {}),
      why: droppedWhy(e, destBlocks),
    }));
  const changed = excludeCidrs(
    oldCidrs.filter((c) => c.family === 4),
    merged,
  );
  return { merged, newList, dropped, changed };
}

/** Per node pool, whether the agent runs there to apply the change, and why (not). */
function poolCoverage(coverage: Coverage): PoolCoverage[] {
  const pools = new Map<string, { nodes: string[]; reached: boolean; why: string }>();
  for (const n of coverage.nodes) {
    const pool = n.pool ?? `node/${n.node}`;
    const reached =
      n.scheduled !== false && (n.agentPod !== undefined || n.scheduled === undefined);
    const why =
      n.scheduled === false
        ? `the DaemonSet does not run here: ${n.reason ?? "scheduling"}`
        : n.agentPod
          ? `agent pod ${n.agentPod.name} runs here`
          : n.scheduled === undefined
            ? "no DaemonSet in the snapshot: cannot tell whether an agent runs here"
            : "the DaemonSet should run here, but no agent pod is running";
    const p = pools.get(pool) ?? { nodes: [], reached: true, why };
    p.nodes.push(n.node);
    if (!reached) {
      p.reached = false;
      p.why = why;
    }
    pools.set(pool, p);
  }
  return [...pools].map(([pool, p]) => ({
    pool,
    nodes: p.nodes,
    reached: p.reached,
    why: p.why,
  }));
}

/** `ip[:port], …` of the destinations. */
const destinationsText = (destinations: MasqueradePlan["destinations"]): string =>
  destinations.map((d) => `${d.ip}${d.port ? `:${d.port}` : ""}`).join(", ");

/** The behaviour change in words: who sees which address afterwards. */
function announcement(
  strategy: MasqueradeStrategy,
  current: readonly ConfigEntry[],
  merged: readonly Cidr[],
  destinations: MasqueradePlan["destinations"],
  podRanges: readonly Cidr[],
): string {
  // "10.0.0.0/8 (apart from 10.4.0.0/14)": per dropped or shrunk entry, what stays exempt inside it
  const changedText = current
    .filter((e) => e.cidr?.family === 4)
    .flatMap((e) => {
      const kept = merged.filter((m) => e.cidr && contains(e.cidr, m));
      if (
        kept.length === 1 &&
        e.cidr &&
        kept[0]!.start === e.cidr.start &&
        kept[0]!.end === e.cidr.end
      )
        return [];
      return [kept.length ? `${e.text} (apart from ${kept.map(formatCidr).join(", ")})` : e.text];
    });
  const destText = destinationsText(destinations);
  return strategy === "narrow"
    ? `Behaviour change, cluster-wide: traffic from pods to ${changedText.length ? changedText.join(", ") : destText} will leave with the node's address instead of the pod's. ` +
        "Logs, allowlists and firewall rules on the far side that name pod addresses will stop matching, silently. Announce it as a behaviour change, not as a bug fix."
    : `No change in the cluster: pods keep their own addresses toward ${destText}. The far side must route ${podRanges.map(formatCidr).join(", ")} back and carry it in the VPN's traffic selectors; its firewalls see pod addresses.`;
}

/** The commands that confirm the change, and the same for the rollback. */
function planChecks(
  intent: AgentIntent,
  podRanges: readonly Cidr[],
  destinations: MasqueradePlan["destinations"],
): { checks: string[]; rollbackChecks: string[] } {
  const destText = destinationsText(destinations);
  const dest = destinations[0]?.ip ?? "<DEST>";
  // conntrack takes one address or CIDR per -s: the first pod range (the whole range, usually)
  const podRangeText = formatCidr(podRanges[0]!);
  const nodeCheck = sh`iptables-save -t nat | grep -E ${quoted(ereLiteral(intent.flags.masqChain))}   # on every node: compare with the expected rules`;
  const verifyDest = destinations[0] ? ` --dest ${destText.split(", ")[0]}` : "";
  const checks = [
    "kubectl -n kube-system get pods -l k8s-app=ip-masq-agent -o wide   # an agent on every node that runs affected pods",
    `kubectl -n kube-system logs -l k8s-app=ip-masq-agent --tail=20 | grep -i 'error syncing'   # must print nothing`,
    nodeCheck,
    "# the agent re-reads its file every resyncInterval once the kubelet refreshes the mounted ConfigMap (about 1-2 minutes); no restart is needed",
    `conntrack -L -s ${podRangeText} -d ${dest}   # on every node: connections opened before the change keep their pod source until they expire`,
    `conntrack -D -s ${podRangeText} -d ${dest}   # to end them now (the applications reconnect, with the node address)`,
    `tcpdump -ni any host ${dest}   # on the node: a fresh request must show the node address, and a reply`,
    `podpath verify <before-snapshot> <after-snapshot>${verifyDest}`,
  ];
  // the rollback is confirmed the same way, with the roles of pod and node address swapped
  const rollbackChecks = [
    checks[0]!,
    checks[1]!,
    nodeCheck.replace("compare with the expected rules", "the previous rules are back"),
    checks[3]!,
    `conntrack -L -s ${podRangeText} -d ${dest}   # on every node: connections opened while the change was in force keep the node address until they expire`,
    `conntrack -D -s ${podRangeText} -d ${dest}   # to end them now (the applications reconnect, with their pod address)`,
    `tcpdump -ni any host ${dest}   # on the node: a fresh request shows the pod address again`,
    `podpath verify <after-snapshot> <rolled-back-snapshot>${verifyDest}`,
  ];
  return { checks, rollbackChecks };
}

/** The refused current config, as the warning the plan starts with. */
function refusedConfigDiagnostic(error: NonNullable<AgentIntent["error"]>): Diagnostic {
  return {
    code: "PLAN_CURRENT_CONFIG_REFUSED",
    severity: "warning",
    message: `the agent refuses the current config (${error.message}) and keeps the one it ran with before (the defaults, if it started with this ConfigMap); the plan starts from those, and the new config replaces the refused list`,
    ...(error.source ? { source: error.source } : {}),
  };
}

/** How to roll the change back: the previous ConfigMap (or none), and the checks. */
function rollbackOf(
  previousConfigMap: string | undefined,
  file: string,
  checks: readonly string[],
): Rollback {
  return {
    ...(previousConfigMap ? { previousConfigMap } : {}),
    file,
    apply: previousConfigMap
      ? [sh`kubectl apply -f ${file}`]
      : [
          "kubectl -n kube-system delete configmap ip-masq-agent   # there was none before: the agent returns to its defaults",
        ],
    checks,
  };
}

export function planMasquerade(
  snap: Snapshot,
  opts: MasqueradePlanOptions,
  owners: readonly SourceOwnerCase[] = SOURCE_OWNERS,
): MasqueradePlan {
  const owned = ownerPlanOf(snap, opts, owners);
  if (owned) return owned;
  const basis = planBasis(snap, opts);
  const { model, diagnostics, missing, podRanges, current, destinations } = basis;
  const { narrow, config, namesPodAddresses, keepSites, file, checks, rollback } = basis;
  const isNarrow = opts.strategy === "narrow";
  const { blockers, steps, configApply } = planSteps(snap, basis, isNarrow);
  return {
    schemaVersion: 1,
    tool: "podpath",
    question: "plan masquerade",
    snapshot: snap.name,
    strategy: opts.strategy,
    podRanges: podRanges.map(formatCidr),
    destinations,
    current: current.map((c) => ({ text: c.text, ...(c.source ? { source: c.source } : {}) })),
    blockers,
    steps,
    ...(isNarrow
      ? {
          narrow: {
            newList: narrow.newList,
            dropped: narrow.dropped,
            ...(config.validationError ? { validationError: config.validationError } : {}),
            newConfigMap: config.newConfigMap,
            newConfigMapFile: file,
            apply: configApply,
            expectedRules: config.expectedRules,
            checks,
          },
        }
      : { keepPodIdentity: { sites: keepSites } }),
    impact: {
      announcement: announcement(opts.strategy, current, narrow.merged, destinations, podRanges),
      nowMasqueraded: isNarrow ? narrow.changed.map(formatCidr) : [],
      namesPodAddresses: isNarrow ? namesPodAddresses : [],
    },
    coverage: poolCoverage(model.coverage),
    tradeoff: TRADEOFF,
    rollback,
    missing,
    diagnostics,
  };
}

/** What the plan is made of, in the order it is worked out (diagnostics and missing included). */
function planBasis(snap: Snapshot, opts: MasqueradePlanOptions) {
  const model = masqueradeModel(snap);
  const { intent } = model;
  const sites = model.farSites.sites;
  const diagnostics: Diagnostic[] = [...intent.diagnostics, ...model.farSites.diagnostics];
  const missing: Missing[] = [];
  if (intent.error && intent.error.stage === "validate")
    diagnostics.push(refusedConfigDiagnostic(intent.error));
  const range = planPodRange(snap, model, opts, diagnostics, missing);
  const podRanges = range.cidrs;
  const targets = planTargets(snap, model, opts, podRanges);
  const current = configEntries(intent);
  const destinations = destinationsToday(targets, intent);
  const narrow = narrowList(snap, model.facts, current, range, targets);
  const config = newAgentConfig(
    intent,
    narrow.newList.map((n) => n.cidr),
    diagnostics,
  );
  const namesPodAddresses = podAddressReferences(snap.objects, sites, podRanges, narrow.changed);
  const keepSites = siteChanges(sites, targets, podRanges);
  if (sites.length === 0) {
    missing.push({
      file: "remote/<site>.yaml",
      would_decide:
        "which far-side allowlists and routes name pod addresses, and what keep-pod-identity must change there",
    });
  }
  const dir = opts.fileDir ? `${opts.fileDir.replace(/\/+$/, "")}/` : "";
  const file = `${dir}ip-masq-agent.new.yaml`;
  const { checks, rollbackChecks } = planChecks(intent, podRanges, destinations);
  const rollback = rollbackOf(
    config.previousConfigMap,
    `${dir}ip-masq-agent.previous.yaml`,
    rollbackChecks,
  );
  return {
    model,
    intent,
    sites,
    diagnostics,
    missing,
    podRanges,
    targets,
    current,
    destinations,
    narrow,
    config,
    namesPodAddresses,
    keepSites,
    file,
    checks,
    rollback,
  };
}

/**
 * The narrow plan's blockers and steps in the order they must be done (none for
 * keep-pod-identity), and the note when the ConfigMap needs no change.
 */
function planSteps(snap: Snapshot, basis: ReturnType<typeof planBasis>, isNarrow: boolean) {
  const { model, intent, sites, diagnostics, podRanges, targets, destinations } = basis;
  const { file, rollback } = basis;
  const blockers = isNarrow
    ? [
        ...allowlistBlockers(
          sites,
          targets,
          podRanges,
          nodeSubnets(snap, model.facts).map((n) => n.cidr),
        ),
        ...networkPolicyBlockers(snap.objects, model.facts, basis.narrow.changed, podRanges),
      ]
    : [];
  // the ConfigMap changes only while it still exempts a destination (or the agent refuses it)
  const configNeeded =
    destinations.some((d) => d.exemptToday) || intent.error?.stage === "validate";
  const configApply = configNeeded ? [sh`kubectl apply -f ${file}`] : [];
  const steps: PlanStep[] = isNarrow
    ? [
        ...blockers.map(blockerStep),
        ...coverageSteps(model.coverage, model.facts.nodes),
        ...staleAgentSteps(snap, intent, model.coverage),
        ...(configNeeded
          ? [
              {
                cause: "config" as const,
                title: "Narrow the ip-masq-agent ConfigMap",
                why: `the ConfigMap exempts ${destinations
                  .filter((d) => d.exemptToday)
                  .map((d) => `${d.ip} (${d.exemptBy ?? "a default"})`)
                  .join(", ")}`,
                evidence: destinations.flatMap((d) => (d.exemptBySource ? [d.exemptBySource] : [])),
                apply: configApply,
                rollback: rollback.apply,
              },
            ]
          : []),
      ]
    : [];
  if (isNarrow && !configNeeded) {
    diagnostics.push({
      code: "PLAN_CONFIG_ALREADY_RIGHT",
      severity: "info",
      message: `the ConfigMap already masquerades ${destinationsText(destinations)}: the plan changes no ConfigMap${steps.length ? "; the steps fix what keeps the nodes from applying it" : ""}`,
    });
  }
  return { blockers, steps, configApply };
}

/** A far-side allowlist to widen before narrowing, as the plan's first steps. */
function blockerStep(b: Blocker): PlanStep {
  if (b.kind === "network-policy")
    return {
      cause: "network-policy",
      title: `Admit the nodes' addresses in ${b.allowlist}, or keep its pod exempt (before narrowing)`,
      why: b.breaks,
      evidence: [{ file: b.file, line: b.line, ...(b.text ? { text: b.text } : {}) }],
      apply: [`# edit ${b.allowlist} as the diff above shows, and kubectl apply it`],
      rollback: [`# remove the added ipBlock peers (after rolling the narrowing back)`],
    };
  return {
    cause: "far-side-allowlist",
    title: `Admit the nodes' addresses in ${b.site}'s allowlist ${b.allowlist} (before narrowing)`,
    why: b.breaks,
    evidence: [{ file: b.file, line: b.line, ...(b.text ? { text: b.text } : {}) }],
    apply: [
      `# edit ${b.file} (and the firewall it describes): add the nodes' addresses to ${b.allowlist}'s sources, as the diff above shows`,
    ],
    rollback: [`# remove the added sources from ${b.allowlist} (after rolling the narrowing back)`],
  };
}

/**
 * The plan when another owner than ip-masq-agent decides the pods' source address: its own knob
 * (one step), its impact and rollback; undefined when no owner plans for this snapshot.
 */
function ownerPlanOf(
  snap: Snapshot,
  opts: MasqueradePlanOptions,
  owners: readonly SourceOwnerCase[],
): MasqueradePlan | undefined {
  if (!owners.some((o) => o.replacesAgent(snap))) return undefined;
  const model = masqueradeModel(snap);
  // the cluster's pod range as the agent's plan knows it: --pod-range, else the stated or
  // kube-proxy's rules' cluster range, with the nodes' ranges
  const stated = model.statedPodRange ?? model.rulesPodRange;
  const podRanges =
    opts.podRange && opts.podRange.length > 0
      ? mergeCidrs(opts.podRange)
      : mergeCidrs([...(stated?.cidrs ?? []), ...model.facts.podRanges]);
  const targets = planTargets(snap, model, opts, podRanges);
  const plan = ownerPlan(
    {
      snap,
      facts: model.facts,
      targets,
      podRanges,
      ...(stated && !(opts.podRange && opts.podRange.length > 0) ? { podRangeStated: stated } : {}),
      strategy: opts.strategy,
      ...(opts.fileDir ? { fileDir: opts.fileDir } : {}),
    },
    owners,
  );
  if (!plan) return undefined;
  const owner = owners.find((o) => o.id === plan.owner);
  const destinations = targets.map((t) => {
    const i = owner?.intendedFor(snap, t.ip);
    const ev = i?.evidence[0];
    return {
      ip: formatIp(t.ip),
      ...(t.port ? { port: t.port } : {}),
      exemptToday: i?.intended === "keep-pod-source",
      ...(i?.intended === "keep-pod-source" ? { exemptBy: plan.name } : {}),
      ...(i?.intended === "keep-pod-source" && ev
        ? {
            exemptBySource: { file: ev.file, line: ev.line, ...(ev.text ? { text: ev.text } : {}) },
          }
        : {}),
    };
  });
  const changed = plan.nowMasqueraded.flatMap((c) => {
    const r = tryParseCidr(c);
    return "cidr" in r ? [r.cidr] : [];
  });
  return {
    schemaVersion: 1,
    tool: "podpath",
    question: "plan masquerade",
    snapshot: snap.name,
    strategy: opts.strategy,
    podRanges: podRanges.map(formatCidr),
    destinations,
    current: plan.change.before.map((b) => ({
      text: `${b.key}${b.value !== undefined ? `=${b.value}` : " (not set)"}`,
      ...(b.source ? { source: b.source } : {}),
    })),
    blockers: [],
    steps: [
      {
        cause: "owner-setting",
        title: plan.title,
        why: plan.why,
        evidence: plan.evidence,
        apply: plan.apply,
        rollback: plan.rollback,
      },
    ],
    owner: plan,
    impact: {
      announcement: plan.announcement,
      nowMasqueraded: plan.nowMasqueraded,
      namesPodAddresses: podAddressReferences(
        snap.objects,
        model.farSites.sites,
        podRanges,
        changed,
      ),
    },
    coverage: [],
    tradeoff: TRADEOFF.map((t) => ({
      ...t,
      narrow: t.narrow.replace("(one ConfigMap)", `(${plan.knob})`),
    })),
    rollback: { file: "", apply: plan.rollback, checks: plan.rollbackChecks },
    missing: plan.missing,
    diagnostics: [...model.farSites.diagnostics],
  };
}
