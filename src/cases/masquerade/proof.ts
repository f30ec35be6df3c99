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
import type { Snapshot } from "../../snapshot/load.ts";
import type { Destination } from "../endpoints.ts";
import { chooseDestinations } from "./destinations.ts";
import type { ClusterFacts } from "./facts.ts";
import type { AgentIntent } from "./intent.ts";
import { masqueradeModel } from "./model.ts";
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

export async function verifyChange(
  before: Snapshot,
  after: Snapshot,
  opts: VerifyOptions = {},
): Promise<ChangeRecord> {
  const diagnostics: Diagnostic[] = [];
  const missing: Missing[] = [];
  const mb = masqueradeModel(before);
  const ma = masqueradeModel(after);
  const { intent: ib, facts: fb } = mb;
  const { intent: ia, facts: fa } = ma;

  // the destination: --dest, else what the snapshots' far side names
  let dest: { ip: Ip; port?: number } | undefined = opts.dest;
  if (!dest) {
    const t =
      chooseDestinations({}, ma.farSites.sites, after.probes, fa).list[0] ??
      chooseDestinations({}, mb.farSites.sites, before.probes, fb).list[0];
    if (t) dest = { ip: t.ip, ...(t.port ? { port: t.port } : {}) };
  }
  const destText = dest ? `${formatIp(dest.ip)}${dest.port ? `:${dest.port}` : ""}` : undefined;

  // intent. A refused after config leaves the agent on its previous one (and its rules).
  const afterRefused = ia.configMap && ia.error ? ia.error.message : undefined;
  const effective = afterRefused ? ib.config : ia.config;
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
  const cmEvidence: Evidence[] = [];
  for (const e of ia.config.nonMasqueradeCIDRs ?? []) {
    if (added.includes(e.text) && e.source)
      cmEvidence.push({
        file: `after:${e.source.file}`,
        line: e.source.line,
        ...(e.source.text ? { text: e.source.text } : {}),
      });
  }
  for (const e of ib.config.nonMasqueradeCIDRs ?? []) {
    if (removed.includes(e.text) && e.source)
      cmEvidence.push({
        file: `before:${e.source.file}`,
        line: e.source.line,
        ...(e.source.text ? { text: e.source.text } : {}),
      });
  }
  let intended: ChangeRecord["intended"] = "unknown";
  if (dest) {
    const xb = isExempt(ib.config, dest.ip, ib.flags).exempt;
    const xa = isExempt(effective, dest.ip, ia.flags).exempt;
    intended = xb && !xa ? "masquerade" : !xb && xa ? "keep-pod-source" : "none";
  }

  // nodes
  const chain = ia.flags.masqChain;
  const names = [
    ...new Set([...before.nodes.keys(), ...after.nodes.keys(), ...fa.nodes.map((n) => n.name)]),
  ].sort();
  const expected = expectedAgentChain(effective, ia.flags, { family: 4, toPorts: ia.toPorts });
  const nodes: NodeChange[] = names.map((node) => {
    const rb = chainRules(before, node, ib.flags.masqChain);
    const ra = chainRules(after, node, chain);
    const dumpAfter = after.nodes.get(node)?.iptables;
    const matches =
      expected && dumpAfter ? compareAgentChain(expected, dumpAfter).inSync : undefined;
    const pb = podIdentity(agentPodOn(fb, node));
    const pa = podIdentity(agentPodOn(fa, node));
    const restarted = pb !== undefined && pa !== undefined ? pb !== pa : undefined;
    const changed = rb && ra ? rb.rules.join("\n") !== ra.rules.join("\n") : undefined;
    const evidence: Evidence[] = [];
    if (ra?.ev) evidence.push({ ...ra.ev, file: `after:${ra.ev.file}` });
    if (rb?.ev) evidence.push({ ...rb.ev, file: `before:${rb.ev.file}` });
    let pickedUp: NodeChange["pickedUp"] = "unknown";
    let note: string;
    if (matches === true) {
      pickedUp = "yes";
      note =
        changed === false && (removed.length > 0 || added.length > 0)
          ? "the rules already matched the new config before"
          : "the installed rules are what the agent writes for the new ConfigMap";
    } else if (matches === false) {
      pickedUp = "no";
      note = changed
        ? "the rules changed, but not to what the agent writes for the new ConfigMap"
        : `the rules never changed on ${node}, whatever the ConfigMap says: the agent did not apply it here`;
    } else {
      note = `no nodes/${node}/iptables-save.txt in the after snapshot: the kernel side is not known`;
      missing.push({
        file: `after: nodes/${node}/iptables-save.txt`,
        would_decide: `whether the rules on ${node} changed`,
        command: `iptables-save -t nat   # on ${node}`,
      });
    }
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
  });

  // the wire
  const nodeIps: Ip[] = [...fb.nodes, ...fa.nodes].flatMap((n) => n.internalIPs.map((x) => x.ip));
  let wire: WireObservation[] = [];
  if (dest) {
    wire = [
      ...(await observe(before, "before", dest, [fb, fa], nodeIps, diagnostics)),
      ...(await observe(after, "after", dest, [fb, fa], nodeIps, diagnostics)),
    ];
  }
  const wb = wire.filter((w) => w.phase === "before");
  const wa = wire.filter((w) => w.phase === "after");
  if (dest && wb.length === 0) {
    missing.push({
      file: "before: captures/<name>.pcap",
      would_decide: "the source address of the request before the change",
      command: `tcpdump -ni any host ${formatIp(dest.ip)} -w before.pcap`,
    });
  }
  if (dest && wa.length === 0) {
    missing.push({
      file: "after: captures/<name>.pcap",
      would_decide: "the source address of a fresh request after the change (the proof)",
      command: `tcpdump -ni any host ${formatIp(dest.ip)} -w after.pcap   # while the pod opens a new connection`,
    });
  }
  const proto = dest?.port ? "tcp" : "icmp";
  const wantAfter: WireObservation["sourceKind"] | undefined =
    intended === "masquerade" ? "node" : intended === "keep-pod-source" ? "pod" : undefined;
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
  const proof = dest
    ? proofLine(beforeObs, afterObs)
    : "no destination: give --dest IP[:PORT] (the known request)";
  const nodeProofs = perNode.length > 1 ? perNode.map((p) => p.line) : [];

  // Connections that keep the translation of the rules before the change: on a node whose rules
  // now match the new config, a conntrack entry toward the destination translated the old way
  // was created before the change (conntrack decides NAT once per connection).
  const staleConnections: { node: string; entry: string; evidence: Evidence }[] = [];
  if (dest && (intended === "masquerade" || intended === "keep-pod-source")) {
    for (const n of after.nodes.values()) {
      if (nodes.find((x) => x.node === n.name)?.pickedUp !== "yes") continue;
      for (const e of n.conntrack ?? []) {
        if (e.orig.dst.value !== dest.ip.value) continue;
        if (classify(e.orig.src, [fa, fb], nodeIps) !== "pod") continue;
        const translated = translatedSource(e) !== undefined;
        if (translated === (intended === "masquerade")) continue;
        const port = (p?: number) => (p === undefined ? "" : `:${p}`);
        staleConnections.push({
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
  }

  // verdict: the wire is the fact; a node-level capture after the change that shows the old
  // source leaving means that node's rules never changed, whatever the ConfigMap says
  const oldKind: WireObservation["sourceKind"] | undefined =
    wantAfter === "node" ? "pod" : wantAfter === "pod" ? "node" : undefined;
  const stuckOnWire = oldKind
    ? wa.filter((w) => w.sourceKind === oldKind && w.point?.startsWith("node/") && w.node)
    : [];
  const stuck = new Map<string, string>();
  for (const w of stuckOnWire) {
    if (stuck.has(w.node!)) continue;
    stuck.set(
      w.node!,
      oldKind === "pod"
        ? `a node-level capture after the change (${w.capture}) still shows the pod address ${w.source}: the rules never changed on ${w.node}, whatever the ConfigMap says`
        : `a node-level capture after the change (${w.capture}) still shows the node address ${w.source}: the rules never changed back on ${w.node}, whatever the ConfigMap says`,
    );
  }
  for (const n of nodes) {
    if (n.pickedUp === "no" && !stuck.has(n.node))
      stuck.set(n.node, `the rules never changed on ${n.node}, whatever the ConfigMap says`);
  }
  const reached = nodes
    .filter((n) => n.pickedUp === "yes" && !stuck.has(n.node))
    .map((n) => n.node);
  let verdict: Verdict;
  let verdictText: string;
  const stuckText = [...stuck.values()].join("; ");
  if (afterRefused) {
    verdict = "not-applied-on-node";
    verdictText = `The agent refuses the after ConfigMap (${afterRefused}); it keeps its previous config and rules on every node.`;
  } else if (stuck.size > 0 && reached.length > 0) {
    verdict = "partly-applied";
    verdictText = `The change reached ${reached.join(", ")} but not ${[...stuck.keys()].join(", ")}: ${stuckText}.`;
  } else if (stuck.size > 0) {
    verdict = "not-applied-on-node";
    verdictText = `${stuckText.charAt(0).toUpperCase()}${stuckText.slice(1)}.`;
  } else if (intended === "none" && removed.length === 0 && added.length === 0) {
    verdict = "no-change";
    verdictText = "The ConfigMap's list is the same in both snapshots.";
  } else if (!afterObs) {
    verdict = "undecided";
    verdictText =
      "The after snapshot has no capture of the known request: the wire decides it (see what is missing).";
  } else if (intended === "masquerade") {
    if (afterObs.sourceKind === "node" && afterObs.completed) {
      verdict = "fixed";
      verdictText = `Requests to ${destText} now leave with the node address ${afterObs.source} and complete: the change did what it said.`;
    } else if (afterObs.sourceKind === "node") {
      verdict = "not-fixed";
      verdictText = afterObs.replied
        ? `Requests now leave translated (${afterObs.source}) and get replies, but the exchange did not finish (${summarise(afterObs)}).`
        : `Requests now leave translated (${afterObs.source}) but ${summarise(afterObs)}: a routing or firewall problem on the far side, not masquerade.`;
    } else {
      verdict = "not-applied-on-node";
      verdictText = `After the change the request still carries the pod address ${afterObs.source}: the rules never changed where it left, whatever the ConfigMap says.`;
    }
  } else if (intended === "keep-pod-source") {
    if (afterObs.sourceKind === "pod") {
      verdict = "rolled-back";
      verdictText = `Requests to ${destText} carry the pod address ${afterObs.source} again (${summarise(afterObs)}): the previous behaviour is back.`;
    } else {
      verdict = "not-applied-on-node";
      verdictText = `The ConfigMap exempts ${destText} again, but requests still leave with ${afterObs.source}: the rules did not change back.`;
    }
  } else {
    verdict = "undecided";
    verdictText = dest
      ? `The ConfigMap change does not change how ${destText} is treated.`
      : "No destination to judge by: give --dest IP[:PORT].";
  }
  const evidence: Evidence[] = [];
  if (beforeObs)
    evidence.push({ ...beforeObs.evidence, file: `before:${beforeObs.evidence.file}` });
  if (afterObs) evidence.push({ ...afterObs.evidence, file: `after:${afterObs.evidence.file}` });
  evidence.push(...cmEvidence);
  for (const n of nodes) evidence.push(...n.evidence);

  const back = afterObs?.toSender;
  const at = (e?: Evidence) => (e ? ` (${e.file}:${e.line})` : "");
  const reverse = !afterObs
    ? "Not captured after the change."
    : back
      ? back.replied
        ? `The replies reach the sender ${afterObs.pod}: seen going back to it after de-NAT${at(back.evidence)}; ${back.progress}.`
        : `Replies reach the node (${afterObs.source}) but were not seen going back to the pod ${afterObs.pod}: ${back.progress}.`
      : afterObs.completed
        ? `The replies reach the sender: ${afterObs.progress}.`
        : afterObs.replied
          ? `Replies come back, but the exchange did not finish: ${afterObs.progress}.`
          : "No reply came back after the change.";

  return {
    schemaVersion: 1,
    tool: "podpath",
    question: "verify",
    before: before.name,
    after: after.name,
    ...(destText ? { destination: destText } : {}),
    proof,
    nodeProofs,
    verdict,
    verdictText,
    intended,
    configMap: { removed, added, otherKeysChanged, evidence: cmEvidence },
    nodes,
    wire,
    reverse,
    staleConnections,
    evidence,
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
