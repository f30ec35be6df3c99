/**
 * @module cases/masquerade/proof — the change record for a masquerade change: two snapshots, before
 * and after, compared layer by layer. Intent (the ConfigMap's list), the agent (did it pick the
 * change up on each node), the kernel (did each node's agent chain change), and the wire (the source
 * address of one known request before and after, replies, how far TCP got), existing connections
 * that keep an old translation, and a verdict. The wire is the fact: a node-level capture that still
 * shows the pod address after the change means the rules never changed, whatever the ConfigMap says.
 */

import { decodeMasqConfig } from "../../agents/ip-masq-agent/config.ts";
import { compareAgentChain } from "../../agents/ip-masq-agent/drift.ts";
import { isExempt } from "../../agents/ip-masq-agent/exempt.ts";
import { expectedAgentChain } from "../../agents/ip-masq-agent/rules.ts";
import { translatedSource } from "../../evidence/conntrack.ts";
import { renderRule } from "../../iptables/render.ts";
import type { Diagnostic, Evidence, Missing } from "../../model/types.ts";
import { formatIp, type Ip } from "../../net/cidr.ts";
import { sh } from "../../report/shell-quote.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { Destination } from "../endpoints.ts";
import { chooseDestinations } from "./destinations.ts";
import type { ClusterFacts } from "./facts.ts";
import type { AgentIntent } from "./intent.ts";
import { type MasqueradeModel, masqueradeModel } from "./model.ts";
import {
  type OwnerSetting,
  SOURCE_OWNERS,
  type SourceOwnerCase,
  verifyOwner,
} from "./owners/index.ts";
import { ownerNodeChanges, ownerSettingsChange } from "./proof-owner.ts";
import { changeVerdict, nodesLeftBehind, reverseDirection } from "./proof-verdict.ts";
import { classify, observe, pick, summarise, type WireObservation } from "./proof-wire.ts";

export type { WireObservation } from "./proof-wire.ts";

export type Verdict =
  | "fixed"
  | "rolled-back"
  | "not-applied-on-node"
  | "partly-applied"
  | "not-fixed"
  | "no-change"
  | "undecided";

export interface NodeChange {
  readonly node: string;
  /** The agent chain's rules before and after (iptables-save form); undefined without the dump. */
  readonly rulesBefore?: readonly string[];
  readonly rulesAfter?: readonly string[];
  readonly rulesChanged?: boolean;
  /** The after rules are what the agent writes for the after ConfigMap. */
  readonly matchesNewConfig?: boolean;
  /** The agent pod on the node was replaced or restarted between the snapshots. */
  readonly agentRestarted?: boolean;
  readonly agentPodBefore?: string;
  readonly agentPodAfter?: string;
  readonly pickedUp: "yes" | "no" | "unknown";
  readonly note: string;
  readonly evidence: readonly Evidence[];
}

export interface ChangeRecord {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "verify";
  readonly before: string;
  readonly after: string;
  readonly destination?: string;
  /** The one line that proves (or disproves) the change. */
  readonly proof: string;
  /** The same line per node that sent the request, when more than one did. */
  readonly nodeProofs: readonly string[];
  readonly verdict: Verdict;
  readonly verdictText: string;
  /** What the ConfigMap change intended for the destination. */
  readonly intended: "masquerade" | "keep-pod-source" | "none" | "unknown";
  readonly configMap: {
    readonly removed: readonly string[];
    readonly added: readonly string[];
    readonly otherKeysChanged: readonly string[];
    readonly evidence: readonly Evidence[];
  };
  /**
   * When another owner than ip-masq-agent decides the pods' source (the AWS VPC CNI, Calico, …):
   * its settings before and after; then `configMap` is empty and `nodes` compare that owner's rules.
   */
  readonly owner?: {
    readonly id: string;
    readonly name: string;
    readonly before: readonly OwnerSetting[];
    readonly after: readonly OwnerSetting[];
    /** Keys whose value differs. */
    readonly changed: readonly string[];
    readonly evidence: readonly Evidence[];
  };
  readonly nodes: readonly NodeChange[];
  readonly wire: readonly WireObservation[];
  readonly reverse: string;
  readonly staleConnections: readonly {
    readonly node: string;
    readonly entry: string;
    readonly evidence: Evidence;
  }[];
  readonly evidence: readonly Evidence[];
  readonly missing: readonly Missing[];
  readonly diagnostics: readonly Diagnostic[];
}

export interface VerifyOptions {
  readonly dest?: Destination;
}

function chainRules(
  snap: Snapshot,
  node: string,
  chain: string,
): { rules: string[]; ev?: Evidence } | undefined {
  const dump = snap.nodes.get(node)?.iptables;
  const nat = dump?.tables.get("nat");
  if (!nat) return undefined;
  const c = nat.chains.get(chain);
  const first = c?.rules[0]?.source ?? c?.declared ?? nat.source;
  return {
    rules: (c?.rules ?? []).map((r) => renderRule(r)),
    ...(first
      ? { ev: { file: first.file, line: first.line, ...(first.text ? { text: first.text } : {}) } }
      : {}),
  };
}

function agentPodOn(facts: ClusterFacts, node: string) {
  return facts.pods.find(
    (p) =>
      p.nodeName === node &&
      p.namespace === "kube-system" &&
      p.labels["k8s-app"] === "ip-masq-agent",
  );
}

function podIdentity(p: ReturnType<typeof agentPodOn>): string | undefined {
  if (!p) return undefined;
  const started = p.containerStatuses
    .map((c) => `${c.restartCount}@${c.startedAt ?? ""}`)
    .join(",");
  return `${p.name}#${started}`;
}

/**
 * The list as the ConfigMap writes it. A refused config is not what the agent runs with, but it is
 * what changed, so its entries are decoded without the agent's validation.
 */
function entryTexts(intent: AgentIntent): string[] {
  if (intent.error && intent.configMap) {
    const text = (intent.configMap.raw["data"] as Record<string, unknown> | undefined)?.["config"];
    if (typeof text === "string") {
      const d = decodeMasqConfig(text, {
        nomasqAllReservedRanges: intent.flags.nomasqAllReservedRanges,
      });
      if ("config" in d) return (d.config.nonMasqueradeCIDRs ?? []).map((e) => e.text);
    }
  }
  return (intent.config.nonMasqueradeCIDRs ?? []).map((e) => e.text);
}

/** The destination: --dest, else what the snapshots' far side names (after first). */
function proofDestination(
  opts: VerifyOptions,
  sides: Sides,
): { ip: Ip; port?: number } | undefined {
  if (opts.dest) return opts.dest;
  const { before, after, mb, ma } = sides;
  const t =
    chooseDestinations({}, ma.farSites.sites, after.probes, ma.facts).list[0] ??
    chooseDestinations({}, mb.farSites.sites, before.probes, mb.facts).list[0];
  return t ? { ip: t.ip, ...(t.port ? { port: t.port } : {}) } : undefined;
}

/** The two snapshots and the case's model of each. */
interface Sides {
  readonly before: Snapshot;
  readonly after: Snapshot;
  readonly mb: MasqueradeModel;
  readonly ma: MasqueradeModel;
}

/** What the ConfigMap change says: the list's entries removed and added, other keys changed. */
interface ConfigChange {
  /** The agent's words for refusing the after config, when it does. */
  readonly afterRefused?: string;
  /** The config the agent runs with after: the after one, or the before one when refused. */
  readonly effective: AgentIntent["config"];
  readonly removed: readonly string[];
  readonly added: readonly string[];
  readonly otherKeysChanged: readonly string[];
  readonly evidence: readonly Evidence[];
}

/** `file:line` of a list entry, tagged with its phase. */
function entryEvidence(
  phase: "before" | "after",
  entries: AgentIntent["config"]["nonMasqueradeCIDRs"],
  texts: readonly string[],
): Evidence[] {
  return (entries ?? []).flatMap((e) =>
    texts.includes(e.text) && e.source
      ? [
          {
            file: `${phase}:${e.source.file}`,
            line: e.source.line,
            ...(e.source.text ? { text: e.source.text } : {}),
          },
        ]
      : [],
  );
}

/** Intent. A refused after config leaves the agent on its previous one (and its rules). */
function configChange(ib: AgentIntent, ia: AgentIntent, diagnostics: Diagnostic[]): ConfigChange {
  const afterRefused = ia.configMap && ia.error ? ia.error.message : undefined;
  if (afterRefused) {
    diagnostics.push({
      code: "VERIFY_CONFIG_REFUSED",
      severity: "error",
      message: `the agent refuses the after ConfigMap: ${afterRefused}; it keeps the config it ran with and its rules`,
      ...(ia.error?.source ? { source: ia.error.source } : {}),
    });
  }
  const eb = entryTexts(ib);
  const ea = entryTexts(ia);
  const removed = eb.filter((e) => !ea.includes(e));
  const added = ea.filter((e) => !eb.includes(e));
  const otherKeysChanged: string[] = [];
  if (ib.config.masqLinkLocal !== ia.config.masqLinkLocal) otherKeysChanged.push("masqLinkLocal");
  if (ib.config.resyncIntervalNs !== ia.config.resyncIntervalNs)
    otherKeysChanged.push("resyncInterval");
  if (ib.config.masqLinkLocalIPv6 !== ia.config.masqLinkLocalIPv6)
    otherKeysChanged.push("masqLinkLocalIPv6");
  return {
    ...(afterRefused ? { afterRefused } : {}),
    effective: afterRefused ? ib.config : ia.config,
    removed,
    added,
    otherKeysChanged,
    evidence: [
      ...entryEvidence("after", ia.config.nonMasqueradeCIDRs, added),
      ...entryEvidence("before", ib.config.nonMasqueradeCIDRs, removed),
    ],
  };
}

/** What the ConfigMap change intended for the destination. */
function intendedFor(
  dest: { ip: Ip } | undefined,
  ib: AgentIntent,
  ia: AgentIntent,
  effective: AgentIntent["config"],
): ChangeRecord["intended"] {
  if (!dest) return "unknown";
  const xb = isExempt(ib.config, dest.ip, ib.flags).exempt;
  const xa = isExempt(effective, dest.ip, ia.flags).exempt;
  return xb && !xa ? "masquerade" : !xb && xa ? "keep-pod-source" : "none";
}

/** Whether and why the node picked the change up, from its rules against the new config's. */
function pickedUpOf(
  node: string,
  matches: boolean | undefined,
  changed: boolean | undefined,
  config: ConfigChange,
  missing: Missing[],
): { pickedUp: NodeChange["pickedUp"]; note: string } {
  if (matches === true) {
    return {
      pickedUp: "yes",
      note:
        changed === false && (config.removed.length > 0 || config.added.length > 0)
          ? "the rules already matched the new config before"
          : "the installed rules are what the agent writes for the new ConfigMap",
    };
  }
  if (matches === false) {
    return {
      pickedUp: "no",
      note: changed
        ? "the rules changed, but not to what the agent writes for the new ConfigMap"
        : `the rules never changed on ${node}, whatever the ConfigMap says: the agent did not apply it here`,
    };
  }
  missing.push({
    file: `after: nodes/${node}/iptables-save.txt`,
    would_decide: `whether the rules on ${node} changed`,
    command: sh`iptables-save -t nat   # on ${node}`,
  });
  return {
    pickedUp: "unknown",
    note: `no nodes/${node}/iptables-save.txt in the after snapshot: the kernel side is not known`,
  };
}

/** One node: its agent chain before and after, against what the agent writes for the change. */
function nodeChange(
  sides: Sides,
  node: string,
  expected: ReturnType<typeof expectedAgentChain>,
  config: ConfigChange,
  missing: Missing[],
): NodeChange {
  const { before, after, mb, ma } = sides;
  const rb = chainRules(before, node, mb.intent.flags.masqChain);
  const ra = chainRules(after, node, ma.intent.flags.masqChain);
  const dumpAfter = after.nodes.get(node)?.iptables;
  const matches = expected && dumpAfter ? compareAgentChain(expected, dumpAfter).inSync : undefined;
  const pb = podIdentity(agentPodOn(mb.facts, node));
  const pa = podIdentity(agentPodOn(ma.facts, node));
  const restarted = pb !== undefined && pa !== undefined ? pb !== pa : undefined;
  const changed = rb && ra ? rb.rules.join("\n") !== ra.rules.join("\n") : undefined;
  const evidence: Evidence[] = [];
  if (ra?.ev) evidence.push({ ...ra.ev, file: `after:${ra.ev.file}` });
  if (rb?.ev) evidence.push({ ...rb.ev, file: `before:${rb.ev.file}` });
  const { pickedUp, note } = pickedUpOf(node, matches, changed, config, missing);
  return {
    node,
    ...(rb ? { rulesBefore: rb.rules } : {}),
    ...(ra ? { rulesAfter: ra.rules } : {}),
    ...(changed !== undefined ? { rulesChanged: changed } : {}),
    ...(matches !== undefined ? { matchesNewConfig: matches } : {}),
    ...(restarted !== undefined ? { agentRestarted: restarted } : {}),
    ...(pb ? { agentPodBefore: pb.split("#")[0]! } : {}),
    ...(pa ? { agentPodAfter: pa.split("#")[0]! } : {}),
    pickedUp,
    note,
    evidence,
  };
}

/** Every node of either snapshot, by name. */
function nodeChanges(sides: Sides, config: ConfigChange, missing: Missing[]): NodeChange[] {
  const { before, after, ma } = sides;
  const names = [
    ...new Set([
      ...before.nodes.keys(),
      ...after.nodes.keys(),
      ...ma.facts.nodes.map((n) => n.name),
    ]),
  ].sort();
  const expected = expectedAgentChain(config.effective, ma.intent.flags, {
    family: 4,
    toPorts: ma.intent.toPorts,
  });
  return names.map((node) => nodeChange(sides, node, expected, config, missing));
}

/** The request as both snapshots' captures show it, and what is missing to see it. */
async function wireOf(
  sides: Sides,
  dest: { ip: Ip; port?: number } | undefined,
  nodeIps: readonly Ip[],
  diagnostics: Diagnostic[],
  missing: Missing[],
): Promise<WireObservation[]> {
  if (!dest) return [];
  const facts = [sides.mb.facts, sides.ma.facts];
  const wire = [
    ...(await observe(sides.before, "before", dest, facts, nodeIps, diagnostics)),
    ...(await observe(sides.after, "after", dest, facts, nodeIps, diagnostics)),
  ];
  if (!wire.some((w) => w.phase === "before")) {
    missing.push({
      file: "before: captures/<name>.pcap",
      would_decide: "the source address of the request before the change",
      command: `tcpdump -ni any host ${formatIp(dest.ip)} -w before.pcap`,
    });
  }
  if (!wire.some((w) => w.phase === "after")) {
    missing.push({
      file: "after: captures/<name>.pcap",
      would_decide: "the source address of a fresh request after the change (the proof)",
      command: `tcpdump -ni any host ${formatIp(dest.ip)} -w after.pcap   # while the pod opens a new connection`,
    });
  }
  return wire;
}

/** The observations the proof stands on, its line, and the same line per sending node. */
interface WireProof {
  readonly beforeObs?: WireObservation;
  readonly afterObs?: WireObservation;
  readonly proof: string;
  readonly nodeProofs: readonly string[];
}

function wireProof(
  wire: readonly WireObservation[],
  dest: { port?: number } | undefined,
  destText: string | undefined,
  wantAfter: WireObservation["sourceKind"] | undefined,
): WireProof {
  const wb = wire.filter((w) => w.phase === "before");
  const wa = wire.filter((w) => w.phase === "after");
  const proto = dest?.port ? "tcp" : "icmp";
  const proofLine = (b: WireObservation | undefined, a: WireObservation | undefined) => {
    const from = b?.pod ?? a?.pod ?? b?.source ?? a?.source ?? "?";
    const side = (o: WireObservation | undefined) =>
      o ? `${o.source} (${summarise(o)})` : "not captured";
    return `${proto} ${from} → ${destText}: before ${side(b)} · after ${side(a)}`;
  };
  // per node that sent the request: the request before and after, seen where it left
  const senders = [...new Set(wire.flatMap((w) => (w.node ? [w.node] : [])))].sort();
  const perNode = senders.map((node) => {
    const b = pick(wb.filter((w) => w.node === node));
    const a = pick(
      wa.filter((w) => w.node === node),
      b?.point,
    );
    return { node, before: b, after: a, line: `${node}: ${proofLine(b, a)}` };
  });
  // the proof: a node where the source changed the intended way, else one seen both times
  const chosen =
    perNode.find(
      (p) =>
        p.before &&
        p.after &&
        p.after.sourceKind === wantAfter &&
        p.before.sourceKind !== wantAfter,
    ) ??
    perNode.find((p) => p.before && p.after) ??
    perNode[0];
  const beforeObs = chosen?.before ?? pick(wb.filter((w) => w.sourceKind === "pod")) ?? pick(wb);
  const afterObs =
    chosen?.after ??
    (wantAfter
      ? pick(
          wa.filter((w) => w.sourceKind === wantAfter),
          beforeObs?.point,
        )
      : undefined) ??
    pick(wa, beforeObs?.point);
  return {
    ...(beforeObs ? { beforeObs } : {}),
    ...(afterObs ? { afterObs } : {}),
    proof: dest
      ? proofLine(beforeObs, afterObs)
      : "no destination: give --dest IP[:PORT] (the known request)",
    nodeProofs: perNode.length > 1 ? perNode.map((p) => p.line) : [],
  };
}

/**
 * Connections that keep the translation of the rules before the change: on a node whose rules
 * now match the new config, a conntrack entry toward the destination translated the old way
 * was created before the change (conntrack decides NAT once per connection).
 */
function staleConnectionsOf(
  sides: Sides,
  dest: { ip: Ip } | undefined,
  intended: ChangeRecord["intended"],
  nodes: readonly NodeChange[],
  nodeIps: readonly Ip[],
): ChangeRecord["staleConnections"][number][] {
  const out: ChangeRecord["staleConnections"][number][] = [];
  if (!dest || (intended !== "masquerade" && intended !== "keep-pod-source")) return out;
  const facts = [sides.ma.facts, sides.mb.facts];
  for (const n of sides.after.nodes.values()) {
    if (nodes.find((x) => x.node === n.name)?.pickedUp !== "yes") continue;
    for (const e of n.conntrack ?? []) {
      if (e.orig.dst.value !== dest.ip.value) continue;
      if (classify(e.orig.src, facts, nodeIps) !== "pod") continue;
      const translated = translatedSource(e) !== undefined;
      if (translated === (intended === "masquerade")) continue;
      const port = (p?: number) => (p === undefined ? "" : `:${p}`);
      out.push({
        node: n.name,
        entry: `${e.proto} ${formatIp(e.orig.src)}${port(e.orig.sport)} → ${formatIp(e.orig.dst)}${port(e.orig.dport)}${e.state ? ` ${e.state}` : ""} (expires in ${e.timeout}s)`,
        evidence: {
          file: `after:${e.source.file}`,
          line: e.source.line,
          ...(e.source.text ? { text: e.source.text } : {}),
        },
      });
    }
  }
  return out;
}

/** The record's evidence: the two observations, the ConfigMap lines, the nodes' chains. */
function recordEvidence(
  w: WireProof,
  config: ConfigChange,
  nodes: readonly NodeChange[],
): Evidence[] {
  const evidence: Evidence[] = [];
  if (w.beforeObs)
    evidence.push({ ...w.beforeObs.evidence, file: `before:${w.beforeObs.evidence.file}` });
  if (w.afterObs)
    evidence.push({ ...w.afterObs.evidence, file: `after:${w.afterObs.evidence.file}` });
  evidence.push(...config.evidence);
  for (const n of nodes) evidence.push(...n.evidence);
  return evidence;
}

export async function verifyChange(
  before: Snapshot,
  after: Snapshot,
  opts: VerifyOptions = {},
  owners: readonly SourceOwnerCase[] = SOURCE_OWNERS,
): Promise<ChangeRecord> {
  const diagnostics: Diagnostic[] = [];
  const missing: Missing[] = [];
  const sides: Sides = { before, after, mb: masqueradeModel(before), ma: masqueradeModel(after) };
  const { mb, ma } = sides;
  const dest = proofDestination(opts, sides);
  const destText = dest ? `${formatIp(dest.ip)}${dest.port ? `:${dest.port}` : ""}` : undefined;
  // another owner than ip-masq-agent: its settings are the intent, its rules the kernel side
  const owner = verifyOwner(before, after, owners);
  const ownerChange = owner ? ownerSettingsChange(owner, before, after, dest) : undefined;
  const config: ConfigChange = owner
    ? { effective: ma.intent.config, removed: [], added: [], otherKeysChanged: [], evidence: [] }
    : configChange(mb.intent, ma.intent, diagnostics);
  const intended = ownerChange
    ? ownerChange.intended
    : intendedFor(dest, mb.intent, ma.intent, config.effective);
  const nodes =
    owner && ownerChange
      ? ownerNodeChanges(owner, before, after, ownerChange.changed.length > 0, missing)
      : nodeChanges(sides, config, missing);
  const knob = owner ? `${owner.name}'s settings` : "the ConfigMap";
  const nodeIps: Ip[] = [...mb.facts.nodes, ...ma.facts.nodes].flatMap((n) =>
    n.internalIPs.map((x) => x.ip),
  );
  const wire = await wireOf(sides, dest, nodeIps, diagnostics, missing);
  const wantAfter: WireObservation["sourceKind"] | undefined =
    intended === "masquerade" ? "node" : intended === "keep-pod-source" ? "pod" : undefined;
  const w = wireProof(wire, dest, destText, wantAfter);
  const staleConnections = staleConnectionsOf(sides, dest, intended, nodes, nodeIps);
  const stuck = nodesLeftBehind(wire, wantAfter, nodes, knob);
  const { verdict, verdictText } = changeVerdict(
    {
      ...(config.afterRefused ? { afterRefused: config.afterRefused } : {}),
      listChanged: ownerChange
        ? ownerChange.changed.length > 0
        : config.removed.length > 0 || config.added.length > 0,
    },
    intended,
    stuck,
    nodes,
    w.afterObs,
    destText,
    knob,
  );
  return {
    schemaVersion: 1,
    tool: "podpath",
    question: "verify",
    before: before.name,
    after: after.name,
    ...(destText ? { destination: destText } : {}),
    proof: w.proof,
    nodeProofs: w.nodeProofs,
    verdict,
    verdictText,
    intended,
    configMap: {
      removed: config.removed,
      added: config.added,
      otherKeysChanged: config.otherKeysChanged,
      evidence: config.evidence,
    },
    ...(owner && ownerChange
      ? {
          owner: {
            id: owner.id,
            name: owner.name,
            before: ownerChange.before,
            after: ownerChange.after,
            changed: ownerChange.changed,
            evidence: ownerChange.evidence,
          },
        }
      : {}),
    nodes,
    wire,
    reverse: reverseDirection(w.afterObs),
    staleConnections,
    evidence: [...recordEvidence(w, config, nodes), ...(ownerChange?.evidence ?? [])],
    missing,
    diagnostics: [
      ...before.diagnostics.filter((d) => d.severity === "error"),
      ...after.diagnostics.filter((d) => d.severity === "error"),
      ...diagnostics,
    ],
  };
}

/** The verdicts a change can be proud of. */
export function isIntendedVerdict(r: ChangeRecord): boolean {
  return r.verdict === "fixed" || r.verdict === "rolled-back";
}
