/**
 * @module cases/masquerade/explain — case A, "the node reaches on-prem, the pod does not":
 * what source address a pod's packet carries when it leaves its node, which rule and which
 * ConfigMap line decide it, whether the far side routes that address back, whether the agent that
 * should keep the rules runs and agrees with its ConfigMap, and what the wire shows.
 */
import { isExempt } from "../../agents/ip-masq-agent/exempt.ts";
import type { PathHop } from "../../model/answer.ts";
import { type Evidence, type Finding, refToEvidence, type SourceRef } from "../../model/types.ts";
import { contains, formatCidr, formatIp, type Ip } from "../../net/cidr.ts";
import { policyTables } from "../../path/node-path.ts";
import { sh } from "../../report/shell-quote.ts";
import type { NodeEvidence, Snapshot } from "../../snapshot/load.ts";
import type { readSites } from "../../snapshot/sites.ts";
import type { DiagnoseOptions, QuestionResult } from "../case.ts";
import { nodeAddressFacts } from "./address-facts.ts";
import { configInvalidFindings, driftFindings, ebpfFindings } from "./agent-findings.ts";
import { agentMissingFindings } from "./coverage.ts";
import { chooseDestinations, type TracedDestination } from "./destinations.ts";
import type { ClusterFacts } from "./facts.ts";
import type { FlowOutcome } from "./flow.ts";
import type { AgentIntent } from "./intent.ts";
import { masqueradeModel } from "./model.ts";
import {
  agentReplaced,
  exemptionRule,
  foreignOwnerText,
  ownerDecision,
  ownerExempt,
  ownerFindings,
  ownerHop,
  ruleOwner,
  SOURCE_OWNERS,
  type SourceOwnerCase,
} from "./owners/index.ts";
import { anyNodeHasNatChain } from "./owners/nat-chains.ts";
import { returnPath, siteFor } from "./remote.ts";
import {
  type AllowlistVerdict,
  allowlistRejectsFinding,
  allowlistVerdict,
  answeredOnWire,
} from "./remote-allowlist.ts";
import { chooseSources, type Source } from "./sources.ts";
import { factsSentence, undecidedFinding } from "./undecided.ts";
import type { wireQuestion } from "./wire.ts";

/** What the wire shows when the snapshot holds no capture (what `wireQuestion` answers then). */
const NO_WIRE: Awaited<ReturnType<typeof wireQuestion>> = { findings: [], captures: [] };

const IPTABLES_CMD = (node: string) =>
  sh`kubectl debug ${`node/${node}`} -it --image=busybox -- chroot /host iptables-save -t nat   # or: podpath collect --node-state`;

/**
 * Is there anything about masquerading or the node's path in this snapshot at all? `traced`: a
 * destination is named (`--dest`, or a probe at a Service address).
 */
function isRelevant(
  snap: Snapshot,
  intent: AgentIntent,
  traced: boolean,
  sites: number,
  owners: readonly SourceOwnerCase[],
): boolean {
  return (
    traced ||
    owners.some((o) => o.present(snap)) ||
    intent.configMap !== undefined ||
    intent.daemonSet !== undefined ||
    sites > 0 ||
    anyNodeHasNatChain(snap, /MASQ|^AWS-SNAT-CHAIN-/)
  );
}

/**
 * The masquerade case's answer. `owners` are the owners of the pods' source address it knows
 * besides ip-masq-agent (tests take one away to show the answer rests on its knowledge).
 */
/**
 * The path evaluators, loaded when a packet is first traced: a snapshot that names no pod and
 * destination (a node's dump alone) needs none of them.
 */
let tracer:
  | {
      readonly evaluateNodeFlow: typeof import("./flow.ts").evaluateNodeFlow;
      readonly wholePath: typeof import("./path-findings.ts").wholePath;
    }
  | undefined;

async function loadTracer(): Promise<void> {
  if (tracer) return;
  const [flow, paths] = await Promise.all([import("./flow.ts"), import("./path-findings.ts")]);
  tracer = { evaluateNodeFlow: flow.evaluateNodeFlow, wholePath: paths.wholePath };
}

export async function explainMasquerade(
  snap: Snapshot,
  opts: DiagnoseOptions,
  owners: readonly SourceOwnerCase[] = SOURCE_OWNERS,
): Promise<QuestionResult> {
  const result: QuestionResult = { findings: [], paths: [], missing: [], diagnostics: [] };
  const model = masqueradeModel(snap);
  const { intent, facts, farSites: sites } = model;
  result.diagnostics.push(...model.diagnostics);
  const targets = chooseDestinations(opts, sites.sites, snap.probes, facts, snap.nodes.values());
  if (!isRelevant(snap, intent, targets.list.length > 0, sites.sites.length, owners)) return result;

  result.findings.push(...configInvalidFindings(intent));
  const coverage = model.coverage;
  result.findings.push(...agentMissingFindings(coverage, intent, snap.objects));
  const nodes = [...snap.nodes.values()];
  result.findings.push(...driftFindings(intent, nodes, (n) => coverage.expected(n)));
  result.findings.push(...ebpfFindings(snap.objects, nodes));
  const own = ownerFindings(snap, model.facts, owners);
  result.findings.push(...own.findings);
  result.missing.push(...own.missing);
  result.diagnostics.push(...own.diagnostics);

  const sources = chooseSources(opts, facts, snap, targets.list[0]?.ip);
  result.diagnostics.push(...sources.diagnostics);

  const rejected: AllowlistRejection[] = [];
  if (targets.list.length > 0 && sources.list.length > 0) await loadTracer();
  for (const target of targets.list) {
    for (const src of sources.list)
      traceOne(snap, facts, intent, sites.sites, target, src, result, rejected, owners);
  }

  // the capture readers are loaded only for a snapshot that holds captures
  const wire =
    snap.captures.length === 0
      ? NO_WIRE
      : await (await import("./wire.ts")).wireQuestion(
          snap,
          facts,
          targets.list,
          result.diagnostics,
          owners,
        );
  for (const r of rejected) {
    const answered = answeredOnWire(wire.captures, r.target, r.wireSource);
    result.findings.push(
      allowlistRejectsFinding(r.site, r.target, r.podIp, r.wireSource, r.verdict, answered),
    );
  }
  result.findings.push(...wire.findings);

  // what would decide more
  if (
    !intent.configMap &&
    snap.objects.length > 0 &&
    (targets.list.length > 0 || intent.daemonSet) &&
    !agentReplaced(snap, owners)
  ) {
    result.missing.push({
      file: "cluster/ip-masq-agent.yaml",
      would_decide:
        "the intended non-masquerade list (without it the agent's defaults are assumed)",
      command: "kubectl -n kube-system get configmap ip-masq-agent -o yaml",
    });
  }
  if (snap.objects.length === 0) {
    result.missing.push({
      file: "cluster/*.yaml",
      would_decide:
        "the intent (ip-masq-agent ConfigMap and DaemonSet), the nodes' pod ranges, and where the agent runs",
      command:
        "kubectl get nodes -o yaml > cluster/nodes.yaml; kubectl -n kube-system get configmap,daemonset ip-masq-agent -o yaml > cluster/ip-masq-agent.yaml; kubectl get pods -A -o yaml > cluster/pods.yaml",
    });
  }
  for (const n of facts.nodes) {
    if (!snap.nodes.get(n.name)?.iptables && sources.list.some((s) => s.node === n.name)) {
      result.missing.push({
        file: `nodes/${n.name}/iptables-save.txt`,
        would_decide: `the rules actually installed on ${n.name}, and so the source address its pods' packets leave with`,
        command: IPTABLES_CMD(n.name),
      });
    }
  }
  if (sites.sites.length === 0 && targets.list.length > 0) {
    result.missing.push({
      file: "remote/<site>.yaml",
      would_decide:
        "whether the far side routes the pod range back (routesBack, VPN traffic selectors), and which allowlists name pod addresses",
    });
  }
  if (snap.captures.length === 0 && targets.list.length > 0) {
    const t = targets.list[0]!;
    result.missing.push({
      file: "captures/<name>.pcap",
      would_decide:
        "the source address actually on the wire and whether replies come back (two observations, node and far side, close the case)",
      command: `tcpdump -ni any host ${formatIp(t.ip)} -w node.pcap   # on the node, while the pod retries`,
    });
  }
  return result;
}

function describeDecision(o: FlowOutcome, snap: Snapshot, node: string): string {
  switch (o.decision) {
    case "keep": {
      const ret = [...o.trace.steps].reverse().find((s) => s.kind === "return" && s.ruleIndex > 0);
      const owner = ret ? ruleOwner(snap, node, ret.source)?.attribution.owner : undefined;
      // kube-proxy's mark RETURN only skips its own service masquerade: it keeps nothing
      if (!ret || owner === "kube-proxy") return "no rule rewrites the source: kept";
      const foreign =
        owner !== undefined && !["unknown", "ip-masq-agent", "gke-node-startup"].includes(owner);
      const by = foreign ? ` (${owner}'s)` : "";
      return `${ret.chain} rule ${ret.ruleIndex}${by} returns before any MASQUERADE: source kept`;
    }
    case "masquerade":
      return `MASQUERADE → ${o.sourceOut ? formatIp(o.sourceOut) : "?"}`;
    case "snat":
      return `SNAT → ${o.sourceOut ? formatIp(o.sourceOut) : "?"}`;
    case "cannot-decide":
      return `cannot decide: ${o.undecided ?? "a rule podpath cannot evaluate"}`;
    case "forks": {
      const facts = [
        ...new Set((o.alternatives ?? []).flatMap((a) => a.assumptions.map((x) => x.fact))),
      ];
      return `not decided: turns on ${facts.join("; ")}`;
    }
  }
}

/** A far-side allowlist that does not admit the source a flow arrives with. */
interface AllowlistRejection {
  readonly site: ReturnType<typeof readSites>["sites"][number];
  readonly target: TracedDestination;
  readonly podIp: Ip;
  readonly wireSource: Ip;
  readonly verdict: Extract<AllowlistVerdict, { kind: "rejects" }>;
}

/** What the node does to the source address: the rules it runs, else the agent's intent. */
interface NodeDecision {
  readonly outcome: FlowOutcome | undefined;
  readonly wireSource: Ip | undefined;
  readonly decidedBy: SourceRef | undefined;
  readonly basis: "rules" | "intent" | "owner" | "none";
}

/** What the far side makes of the source a flow arrives with. */
interface FarSideResult {
  readonly verdict: string;
  readonly stops: boolean;
}

function traceOne(
  snap: Snapshot,
  facts: ClusterFacts,
  intent: AgentIntent,
  sites: ReturnType<typeof readSites>["sites"],
  target: TracedDestination,
  src: Source,
  result: QuestionResult,
  rejected: AllowlistRejection[],
  owners: readonly SourceOwnerCase[],
): void {
  const nodeEv: NodeEvidence | undefined = snap.nodes.get(src.node);
  const nodeView = facts.nodes.find((n) => n.name === src.node);
  const site = siteFor(sites, target.ip);
  const hops: PathHop[] = [sourceHop(src)];

  // The packet's whole way through its node: a Service's DNAT, the route, filter verdicts
  const way = nodeEv
    ? tracer!.wholePath(
        nodeEv,
        nodeView,
        src,
        target,
        facts,
        nodeEv.interfaces ? [] : nodeAddressFacts(src.node, nodeEv, facts, sites),
      )
    : undefined;
  if (way) {
    hops.push(...way.hops);
    result.findings.push(...way.findings);
    result.missing.push(...way.missing);
    const tables = target.ip.family === 4 && !nodeEv?.ipRules ? policyTables(nodeEv?.routes) : [];
    if (tables.length > 0) {
      // the routes show tables only an ip rule leads to: the default rules were taken instead
      result.missing.push({
        file: nodeEv?.files["ip-rule"] ?? `nodes/${src.node}/ip-rule.txt`,
        would_decide: `which table routes the packets traced on ${src.node}: its routes show table ${tables.join(", ")}, which only a rule sends packets to; without ip rule the kernel's default rules (local, main, default) were taken`,
        command: sh`ip rule   # on ${src.node}`,
      });
    }
  }
  const ending =
    way?.stops ??
    (way?.local
      ? `${formatIp(target.ip)} is delivered on ${src.node} itself (filter INPUT): it never leaves the node, and nat POSTROUTING is not on its way`
      : undefined);
  if (ending) {
    if (way?.local && !way.stops)
      hops.push({ at: `node/${src.node}`, label: "delivered locally (INPUT)", state: "ok" });
    result.paths.push({
      from: hops[0]!.at,
      to: formatIp(target.ip),
      protocol: target.protocol,
      ...(target.port ? { port: target.port } : {}),
      hops,
      verdict: ending,
    });
    return;
  }

  // The decision: the installed rules when the node's dump is there, else the agent's intent.
  const { outcome, wireSource, decidedBy, basis } = decideNode(
    snap,
    facts,
    intent,
    sites,
    target,
    src,
    nodeView,
    hops,
    owners,
    result,
  );

  // The far side
  const keepsPodSource =
    src.kind === "pod" && wireSource !== undefined && wireSource.value === src.ip.value;
  const { verdict, stops } = traceFarSide(
    facts,
    site,
    target,
    src,
    outcome,
    wireSource,
    keepsPodSource,
    hops,
    result,
    rejected,
  );

  result.paths.push({
    from: hops[0]!.at,
    to: formatIp(target.ip),
    protocol: target.protocol,
    ...(target.port ? { port: target.port } : {}),
    hops,
    ...(wireSource ? { sourceOnWire: formatIp(wireSource) } : {}),
    verdict,
  });

  reportUndecided(snap, target, src, nodeEv, outcome, result);

  // a Service that sends the packet to pods: the pods are in the cluster, nothing is exempted
  const toPods = way?.rewrittenTo?.every((ip) => isInCluster(facts, ip)) === true;
  if (keepsPodSource && basis !== "none" && !isInCluster(facts, target.ip) && !toPods) {
    const exempt = exemptFinding(
      src,
      target,
      intent,
      outcome,
      decidedBy,
      basis,
      stops,
      snap,
      nodeView?.internalIPs[0]?.ip,
      owners,
    );
    if (exempt) result.findings.push(exempt);
  }
}

/** The first hop of a traced path: the pod (or node) that sends. */
function sourceHop(src: Source): PathHop {
  return {
    at:
      src.kind === "pod"
        ? src.namespace === "?"
          ? `pod ${src.name} on ${src.node}`
          : `pod/${src.namespace}/${src.name}`
        : `node/${src.node}`,
    label: src.kind === "pod" ? "sends" : "sends (the node's own traffic)",
    source: formatIp(src.ip),
    state: "ok",
    ...(src.evidence ? { evidence: src.evidence } : {}),
  };
}

/**
 * The source address the packet leaves its node with: the installed rules when the node's dump
 * is there, else the agent's intent; pushes the node's hop onto `hops`.
 */
function decideNode(
  snap: Snapshot,
  facts: ClusterFacts,
  intent: AgentIntent,
  sites: ReturnType<typeof readSites>["sites"],
  target: TracedDestination,
  src: Source,
  nodeView: ClusterFacts["nodes"][number] | undefined,
  hops: PathHop[],
  owners: readonly SourceOwnerCase[],
  result: QuestionResult,
): NodeDecision {
  const nodeEv: NodeEvidence | undefined = snap.nodes.get(src.node);
  // an owner that decides outside iptables (eBPF masquerade) answers first, for pods
  const owned =
    src.kind === "pod" ? ownerDecision({ snap, facts, src, target }, owners) : undefined;
  if (owned) {
    hops.push(ownerHop(src.node, owned, src.ip));
    result.missing.push(...(owned.missing ?? []));
    return {
      outcome: undefined,
      wireSource: owned.sourceOut,
      decidedBy: owned.decidedBy,
      basis: owned.decision === "cannot-decide" ? "none" : "owner",
    };
  }
  let outcome: FlowOutcome | undefined;
  if (nodeEv?.iptables) {
    outcome = tracer!.evaluateNodeFlow(
      nodeEv,
      nodeView,
      {
        src: src.ip,
        dst: target.ip,
        protocol: target.protocol,
        ...(target.port ? { dport: target.port } : {}),
        origin: src.kind === "pod" ? "pod" : "host",
      },
      nodeEv.interfaces ? [] : nodeAddressFacts(src.node, nodeEv, facts, sites),
    );
  }
  let wireSource: Ip | undefined;
  let decidedBy: SourceRef | undefined;
  let basis: NodeDecision["basis"] = "none";
  if (outcome) {
    basis = "rules";
    wireSource = outcome.sourceOut;
    decidedBy = outcome.decidingRule;
    hops.push({
      at: `node/${src.node}`,
      label: `nat POSTROUTING: ${describeDecision(outcome, snap, src.node)}`,
      ...(wireSource ? { source: formatIp(wireSource) } : {}),
      state:
        outcome.decision === "cannot-decide" || outcome.decision === "forks"
          ? "unknown"
          : wireSource && wireSource.value !== src.ip.value
            ? "changes"
            : "ok",
      ...(decidedBy ? { evidence: decidedBy } : {}),
    });
  } else if (src.kind === "pod" && (intent.configMap || intent.daemonSet)) {
    basis = "intent";
    const ex = isExempt(intent.config, target.ip, intent.flags);
    wireSource = ex.exempt ? src.ip : nodeView?.internalIPs[0]?.ip;
    const entryRef = ex.exempt && ex.reason === "non-masquerade-cidr" ? ex.entry.source : undefined;
    if (entryRef) decidedBy = entryRef;
    hops.push({
      at: `node/${src.node}`,
      label: `ip-masq-agent intent (installed rules not seen): ${ex.exempt ? `exempt (${ex.reason})` : "masqueraded"}`,
      ...(wireSource ? { source: formatIp(wireSource) } : {}),
      state: ex.exempt ? "ok" : "changes",
      ...(entryRef ? { evidence: entryRef } : {}),
    });
  } else if (src.kind === "host") {
    wireSource = src.ip;
    basis = "none";
    hops.push({
      at: `node/${src.node}`,
      label: "leaves with the node's address",
      source: formatIp(src.ip),
      state: "ok",
    });
  }
  return { outcome, wireSource, decidedBy, basis };
}

/**
 * The far side's hop and the path's verdict: whether the site routes the wire source back, and
 * (for pods) whether its allowlist admits it; pushes the no-return-route finding and allowlist
 * rejections as it finds them.
 */
function traceFarSide(
  facts: ClusterFacts,
  site: ReturnType<typeof siteFor>,
  target: TracedDestination,
  src: Source,
  outcome: FlowOutcome | undefined,
  wireSource: Ip | undefined,
  keepsPodSource: boolean,
  hops: PathHop[],
  result: QuestionResult,
  rejected: AllowlistRejection[],
): FarSideResult {
  const dstText = `${formatIp(target.ip)}${target.port ? `:${target.port}` : ""}`;
  if (!(site && wireSource)) {
    hops.push({
      at: dstText,
      label: wireSource ? `sees ${formatIp(wireSource)}` : "source on the wire not decided",
      ...(wireSource ? { source: formatIp(wireSource) } : {}),
      state: "unknown",
    });
    const verdict = wireSource
      ? `${dstText} sees ${formatIp(wireSource)}; whether replies come back depends on the far side (no remote/*.yaml covers ${formatIp(target.ip)})`
      : `the source address on the wire is not decided (${outcome?.undecided ?? "no rules or intent for this node"})`;
    return { verdict, stops: false };
  }
  const rp = returnPath(site, wireSource);
  const routed = rp.routesBack !== false && rp.selectorsCarry !== false;
  hops.push({
    at: `remote/${site.name}`,
    label: routed
      ? rp.routesBack === undefined
        ? `sees ${formatIp(wireSource)}; the site file does not say whether it routes it back`
        : `sees ${formatIp(wireSource)}; routes it back`
      : `sees ${formatIp(wireSource)}; ${rp.routesBack === false ? `routes back only ${rp.routedText}` : "the VPN's traffic selectors do not carry it"}`,
    source: formatIp(wireSource),
    state: routed ? (rp.routesBack === undefined ? "unknown" : "ok") : "stops",
    ...(rp.evidence[0]
      ? { evidence: { file: rp.evidence[0].file, line: rp.evidence[0].line } }
      : {}),
  });
  const verdict = routed
    ? `${dstText} sees ${formatIp(wireSource)}${rp.routesBack === undefined ? "" : ", and the far side routes it back"}`
    : `replies to ${formatIp(wireSource)} have no way back from ${site.name}: the far side drops them or sends them elsewhere`;
  if (!routed) {
    result.findings.push(
      noReturnRouteFinding(src, target, wireSource, site, rp, facts, keepsPodSource),
    );
  }
  // the far side's firewall: the next break once the way back is there
  const allowed = src.kind === "pod" ? allowlistVerdict(site, target, wireSource) : undefined;
  if (allowed?.kind === "rejects") {
    // decided once the captures are read: a reply on the wire outranks the site file
    rejected.push({ site, target, podIp: src.ip, wireSource, verdict: allowed });
  }
  return { verdict, stops: !routed };
}

/**
 * When the rules fork or cannot decide: the undecided finding (for a pod) and the node files
 * that would decide it.
 */
function reportUndecided(
  snap: Snapshot,
  target: TracedDestination,
  src: Source,
  nodeEv: NodeEvidence | undefined,
  outcome: FlowOutcome | undefined,
  result: QuestionResult,
): void {
  if (outcome?.decision === "forks") {
    // the node's own traffic is drawn as a path; the question is the pod's
    if (src.kind === "pod") result.findings.push(undecidedFinding(src, target, outcome, snap.name));
    for (const a of outcome.alternatives ?? []) {
      for (const x of a.assumptions) {
        const file = x.decide.file ?? nodeFileFor(x.decide.command, src.node);
        // the node's address list and routes are asked for below, with all they decide
        if (file.endsWith("/ip-addr.txt") && !nodeEv?.interfaces) continue;
        if (file.endsWith("/ip-route.txt") && !nodeEv?.routes) continue;
        result.missing.push({
          file,
          would_decide: `whether ${x.fact}`,
          command: x.decide.command,
        });
      }
    }
  }
  if ((outcome?.decision === "cannot-decide" || outcome?.decision === "forks") && nodeEv) {
    // what would decide it: the node's addresses and routes, when they are the missing piece
    if (!nodeEv.interfaces) {
      result.missing.push({
        file: `nodes/${src.node}/ip-addr.txt`,
        would_decide: `the node's own addresses (addrtype LOCAL matches) and the address MASQUERADE picks on ${src.node}`,
        command: sh`ip -o addr   # on ${src.node}`,
      });
    }
    if (!nodeEv.routes) {
      result.missing.push({
        file: `nodes/${src.node}/ip-route.txt`,
        would_decide: `the interface packets to ${formatIp(target.ip)} leave ${src.node} by (-o matches)`,
        command: sh`ip route   # on ${src.node}`,
      });
    }
  }
}

/** The node file a deciding command's output belongs in (DESIGN.md snapshot layout). */
function nodeFileFor(command: string, node: string): string {
  if (command.startsWith("ip -o addr")) return `nodes/${node}/ip-addr.txt`;
  if (command.startsWith("ip route")) return `nodes/${node}/ip-route.txt`;
  if (command.startsWith("conntrack")) return `nodes/${node}/conntrack.txt`;
  return `nodes/${node}/iptables-save.txt`;
}

function isInCluster(facts: ClusterFacts, ip: Ip): boolean {
  return facts.podRanges.some((c) => contains(c, ip));
}

function exemptFinding(
  src: Source,
  target: TracedDestination,
  intent: AgentIntent,
  outcome: FlowOutcome | undefined,
  decidingRule: SourceRef | undefined,
  basis: "rules" | "intent" | "owner",
  stops: boolean,
  snap: Snapshot,
  nodeIp: Ip | undefined,
  owners: readonly SourceOwnerCase[],
): Finding | undefined {
  // the owner of the deciding rule words the finding (or finds the kept address healthy)
  const hostIp = outcome?.hostSource ?? nodeIp;
  const rule0 = { snap, src, target, rule: decidingRule, stops, hostSource: hostIp };
  const owner = ownerExempt(rule0, owners);
  if (owner.kind === "finding") return { id: "masq/exempt-destination", ...owner.finding };
  if (owner.kind === "healthy") return undefined;
  const rule = exemptionRule(snap, src.node, decidingRule);
  const foreign = basis === "rules" ? foreignOwnerText(snap, src.node, rule) : undefined;
  const noAgentObjects = !intent.configMap && !intent.daemonSet;
  // the node's rules hold no masquerade for it at all, and nothing says whose job it is: no
  // agent's default list to blame (the dump would show its chain)
  const noMasqRule = basis === "rules" && !rule && noAgentObjects;
  const ex = isExempt(intent.config, target.ip, intent.flags);
  const entry =
    ex.exempt && ex.reason === "non-masquerade-cidr" && !foreign && !noMasqRule
      ? ex.entry
      : undefined;
  const evidence: Evidence[] = [];
  if (rule) evidence.push(refToEvidence(rule));
  if (entry?.source) evidence.push(refToEvidence(entry.source));
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const dstText = formatIp(target.ip);
  const hostSource = outcome?.hostSource ?? nodeIp;
  const entryText = noMasqRule
    ? "no rule at all: the node's nat rules hold no masquerade for pod traffic to it (no ip-masq-agent or GKE chain, no CNI masquerade rule), and the snapshot has no component's objects (an ip-masq-agent, the CNI's DaemonSet and config) to say which should write one"
    : noAgentObjects
      ? `the default exception list (${entry?.text ?? "RFC 1918"}), as GKE's node startup or an ip-masq-agent without a ConfigMap writes it; the snapshot has no ip-masq-agent ConfigMap or DaemonSet to say which`
      : entry
        ? `the nonMasqueradeCIDRs entry ${entry.text}${entry.source ? ` (${entry.source.file}:${entry.source.line})` : " (the agent's default list)"}`
        : ex.exempt && ex.reason === "link-local"
          ? "the agent's link-local exemption"
          : "a rule that returns before any MASQUERADE";
  const ruleText = rule
    ? `${rule.file}:${rule.line}${rule.text ? ` (${rule.text.trim()})` : ""}`
    : "";
  const explanation =
    `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: ` +
    (basis === "rules"
      ? rule
        ? `the installed rule ${ruleText} returns before the MASQUERADE rule, so the source is never rewritten. `
        : "no installed rule rewrites it (kube-proxy's KUBE-POSTROUTING RETURN only skips kube-proxy's own service masquerade). "
      : "the agent's config exempts it (the node's installed rules are not in the snapshot; this is the intent). ") +
    (outcome ? factsSentence(outcome, src.node) : "") +
    `The exemption comes from ${foreign ?? entryText}. ` +
    `The node's own traffic is not rewritten either, but it already carries the node's address${hostSource ? ` (${formatIp(hostSource)})` : ""}, which the far side knows: that is why a ping from the node works and one from the pod does not. ` +
    (stops
      ? "The far side has no route back to the pod range, so the replies vanish. Tunnel and routes look fine; the source address is the problem."
      : "Unless the far side routes the pod range back, the replies vanish.") +
    (noMasqRule
      ? " Fix: have the component that owns masquerade on this cluster write its rule (the CNI's masquerade setting, or an ip-masq-agent), or teach the far side the pod range (keep pod identity)."
      : foreign
        ? " Fix: change the rule where its owner writes it, or teach the far side the pod range (keep pod identity)."
        : " Fix: narrow the exemption to the pod range (`podpath plan masquerade`), or teach the far side the pod range (keep pod identity).");
  return {
    id: "masq/exempt-destination",
    severity: stops ? "error" : "warning",
    title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)}${entry ? ` (exempted by ${entry.text})` : ""}`,
    subject: `node/${src.node}`,
    explanation,
    evidence,
    next: [
      "kubectl -n kube-system get configmap ip-masq-agent -o yaml",
      sh`iptables-save -t nat | grep -iE 'masq|POSTROUTING'   # on ${src.node}`,
      sh`tcpdump -ni any host ${dstText}   # on ${src.node}: the pod address on the wire, no reply`,
      sh`podpath plan masquerade ${snap.name} --dest ${dstText}`,
    ],
  };
}

function noReturnRouteFinding(
  _src: Source,
  target: TracedDestination,
  wireSource: Ip,
  site: ReturnType<typeof readSites>["sites"][number],
  rp: ReturnType<typeof returnPath>,
  facts: ClusterFacts,
  podSource: boolean,
): Finding {
  const range = podSource ? facts.podRanges.find((c) => contains(c, wireSource)) : undefined;
  const what = range ? `the pod range ${formatCidr(range)}` : formatIp(wireSource);
  const parts: string[] = [];
  if (rp.routesBack === false) parts.push(`its routes back cover only ${rp.routedText}`);
  if (rp.selectorsCarry === false)
    parts.push("the VPN's cluster-side traffic selectors do not include it");
  return {
    id: "masq/no-return-route",
    severity: "error",
    title: `${site.name} has no way back to ${what}`,
    subject: `remote/${site.name}`,
    explanation:
      `Packets to ${formatIp(target.ip)} arrive at ${site.name} with source ${formatIp(wireSource)}, but ${parts.join(", and ")}. ` +
      "The request gets there; the replies do not come back. " +
      (podSource
        ? "Either masquerade this destination (so the site sees the node address it already routes), or add the pod range to the site's return routes and the VPN selectors."
        : "Add this address to the site's return routes and the VPN selectors."),
    evidence: rp.evidence,
    next: [
      `show the site's route table for ${formatIp(wireSource)}   # on the far side's router`,
      "compare the VPN tunnel's traffic selectors on both ends",
    ],
  };
}
