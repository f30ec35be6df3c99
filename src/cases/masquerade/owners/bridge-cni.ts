/**
 * @module cases/masquerade/owners/bridge-cni — the masquerade case on a node whose pods hang on
 * the bridge CNI plugin: with `"ipMasq": true` each pod gets a `CNI-…` chain (ACCEPT its subnet,
 * MASQUERADE the rest but multicast) at setup; with `"ipMasq": false` (the default) nothing rewrites
 * a pod's address, and a pod set up before the flag was turned on has no chain either. The fix in
 * the plugin's terms: `ipMasq` in the node's CNI config file, then the node's pods set up again
 * (the plugin writes the chain on ADD only), or the far side routes the pod subnet back.
 */
import type { BridgeConf } from "../../../agents/bridge-cni/conflist.ts";
import {
  type BridgeNode,
  bridgeNode,
  chainOf,
  onBridgeNetwork,
  runsBridge,
} from "../../../agents/bridge-cni/node.ts";
import { podMasqRules } from "../../../agents/bridge-cni/rules.ts";
import { renderRule } from "../../../iptables/render.ts";
import {
  type Diagnostic,
  type Evidence,
  type Missing,
  refToEvidence,
  type SourceRef,
} from "../../../model/types.ts";
import { contains, formatCidr, formatIp, type Ip } from "../../../net/cidr.ts";
import { sh } from "../../../report/shell-quote.ts";
import type { Snapshot } from "../../../snapshot/load.ts";
import { clusterFacts } from "../facts.ts";
import type {
  OwnerExempt,
  OwnerExemptInput,
  OwnerPlan,
  OwnerPlanInput,
  OwnerSetting,
  OwnerWireWording,
  SourceOwnerCase,
} from "./owner.ts";
import { ipMasqAgentPresent, ruleOwner } from "./rule-owner.ts";

const CONF_DIR = "/etc/cni/net.d";
const GREP = "iptables-save -t nat | grep -E 'CNI-|POSTROUTING'";

const bridgeNodes = (snap: Snapshot): BridgeNode[] =>
  [...snap.nodes.keys()].map((n) => bridgeNode(snap, n)).filter(runsBridge);

function bridgePresent(snap: Snapshot): boolean {
  return bridgeNodes(snap).length > 0;
}

const baseName = (p: string) => p.slice(p.lastIndexOf("/") + 1);
const ruleText = (ref: SourceRef) =>
  `${ref.file}:${ref.line}${ref.text ? ` (${ref.text.trim()})` : ""}`;

/** `"ipMasq": …` in words, with its line (or that it is absent: false). */
function ipMasqText(b: BridgeConf): string {
  return b.ipMasqSource
    ? `"ipMasq": ${b.ipMasq} in ${b.file}:${b.ipMasqSource.line}`
    : `no "ipMasq" in ${b.file} (the plugin's default: false)`;
}

/** The jq edit of the config file on a node (a .conflist's bridge plugin, or a .conf). */
function jqEdit(b: BridgeConf, value: boolean): string {
  const path = `${CONF_DIR}/${baseName(b.file)}`;
  const filter = b.file.endsWith(".conflist")
    ? `(.plugins[] | select(.type == "bridge")).ipMasq = ${value}`
    : `.ipMasq = ${value}`;
  return `jq '${filter}' ${path} > ${path}.new && mv ${path}.new ${path}`;
}

function podsOn(snap: Snapshot, node: string) {
  return clusterFacts(snap.objects).pods.filter(
    (p) => p.nodeName === node && !p.hostNetwork && p.podIPs.length > 0,
  );
}

function bridgeExempt(input: OwnerExemptInput): OwnerExempt {
  const { snap, src, target, stops } = input;
  const n = bridgeNode(snap, src.node);
  if (!runsBridge(n) || src.kind !== "pod" || !onBridgeNetwork(n, src.ip)) {
    return { kind: "not-mine" };
  }
  const owned = ruleOwner(snap, src.node, input.rule);
  if (
    owned &&
    owned.attribution.owner !== "kube-proxy" &&
    owned.attribution.owner !== "bridge-cni"
  ) {
    return { kind: "not-mine" };
  }
  const dstText = formatIp(target.ip);
  const chain = chainOf(n, src.ip);
  const b = n.bridge;
  const evidence: Evidence[] = [];
  let title: string;
  let why: string;
  let fix: string;
  const next: string[] = [
    `cat ${CONF_DIR}/*   # on ${src.node}: the bridge plugin's "ipMasq"`,
    `${GREP}   # on ${src.node}`,
    sh`tcpdump -ni any host ${dstText}   # on ${src.node}: the pod address on the wire, no reply`,
  ];
  if (chain && owned?.attribution.owner === "bridge-cni" && owned.rule.target?.kind === "verdict") {
    // the pod's own chain accepted it: the destination is inside the pod's subnet
    const accept = owned.rule;
    evidence.push(refToEvidence(accept.source));
    if (b?.subnets[0]) evidence.push(refToEvidence(b.subnets[0].source));
    if (!stops) {
      return {
        kind: "healthy",
        why: `${dstText} is inside the pod's bridge subnet (${ruleText(accept.source)}): the bridge plugin keeps pod addresses on its own network by design`,
      };
    }
    title = `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (bridge CNI: ipam subnet ${accept.dst ? formatCidr(accept.dst.cidr) : "?"})`;
    why = `the bridge plugin's chain for this pod accepts it unchanged: ${ruleText(accept.source)}, because ${dstText} is inside the network's IPAM subnet`;
    fix =
      "Fix: narrow the IPAM subnet in the CNI config so it does not hold the destination, or route the pod subnet back at the far side.";
  } else if (chain) {
    return { kind: "not-mine" };
  } else if (b && !b.ipMasq) {
    const inCluster = clusterFacts(snap.objects).podRanges.some((c) => contains(c, target.ip));
    if (inCluster && !stops) {
      return {
        kind: "healthy",
        why: `${dstText} is a pod address of the cluster: with ${ipMasqText(b)} pods keep their addresses between them`,
      };
    }
    if (b.ipMasqSource) evidence.push(refToEvidence(b.ipMasqSource));
    evidence.push(refToEvidence(b.source));
    title = `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (bridge CNI: ${b.ipMasqSource ? `"ipMasq": false` : `no "ipMasq", default false`} in ${baseName(b.file)})`;
    why = `the node's CNI config has ${ipMasqText(b)}, so the bridge plugin writes no CNI-… masquerade chain for its pods (network "${b.network}") and no other rule on ${src.node} rewrites the source`;
    fix = `Fix: set "ipMasq": true for the bridge plugin in ${CONF_DIR}/${baseName(b.file)} on the node and set the node's pods up again (the plugin writes each pod's chain when the pod starts), a behaviour change: every destination outside the pod subnet then sees the node's address. Or keep pod addresses and route the pod subnet back at the far side.`;
    next.push(
      `${jqEdit(b, true)}   # on ${src.node}`,
      sh`kubectl -n ${src.namespace} delete pod ${src.name}   # recreated by its controller; the plugin's ADD writes its CNI-… chain`,
      `${GREP}   # on ${src.node}: a CNI-… chain whose POSTROUTING jump names -s ${formatIp(src.ip)} (or the new pod's address)`,
      `rollback: ${jqEdit(b, false)}, recreate the pods, delete their CNI-… chains by hand (DEL skips the teardown once ipMasq is false)`,
    );
  } else if (b?.ipMasq || n.chains.length > 0) {
    // the config (or the other pods' chains) says ipMasq, but this pod has no chain
    if (b?.ipMasqSource) evidence.push(refToEvidence(b.ipMasqSource));
    const other = n.chains[0];
    if (other) evidence.push(refToEvidence(other.jump.source));
    title = `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (bridge CNI: the pod has no CNI-… chain)`;
    why = `${b ? ipMasqText(b) : `the node's other pods have the bridge plugin's chains (${other ? ruleText(other.jump.source) : ""})`}, but no POSTROUTING jump on ${src.node} names ${formatIp(src.ip)}: the pod was set up before ipMasq was turned on, or its chain was removed`;
    fix =
      "Fix: set the pod up again (delete it; its controller recreates it and the plugin's ADD writes its chain).";
    next.push(
      sh`kubectl -n ${src.namespace} delete pod ${src.name}   # recreated by its controller; ADD writes its CNI-… chain`,
      `${GREP}   # on ${src.node}: a POSTROUTING jump with -s ${formatIp(src.ip)} (or the new pod's address)`,
    );
  } else {
    return { kind: "not-mine" };
  }
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const explanation =
    `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: ${why}. ` +
    `The node's own traffic carries the node's address${input.hostSource ? ` (${formatIp(input.hostSource)})` : ""}, which the far side knows: that is why the node reaches ${dstText} and the pod does not. ` +
    (stops
      ? "The far side has no route back to the pod's address, so the replies vanish. "
      : "Unless the far side routes the pod's address back, the replies vanish. ") +
    fix;
  return {
    kind: "finding",
    finding: {
      severity: stops ? "error" : "warning",
      title,
      subject: `node/${src.node}`,
      explanation,
      evidence,
      next,
    },
  };
}

function bridgeWireWording(snap: Snapshot): OwnerWireWording | undefined {
  if (!bridgePresent(snap) || ipMasqAgentPresent(snap)) return undefined;
  return {
    fix: `(the bridge CNI plugin: "ipMasq": true in the node's CNI config, then the pods set up again)`,
    next: [
      `cat ${CONF_DIR}/*   # on the node: the bridge plugin's "ipMasq"`,
      `${GREP}   # on the node`,
    ],
  };
}

function bridgeSettings(snap: Snapshot): OwnerSetting[] {
  return bridgeNodes(snap).flatMap((n) => {
    const b = n.bridge;
    if (!b) return [];
    return [
      {
        key: `${n.node}: ${baseName(b.file)} ipMasq`,
        ...(b.ipMasqSource ? { value: String(b.ipMasq) } : {}),
        ...(b.ipMasqSource ? { source: b.ipMasqSource } : {}),
      },
    ];
  });
}

function bridgeIntendedFor(snap: Snapshot, dst: Ip) {
  const evidence: Evidence[] = [];
  const b = bridgeNodes(snap).find((n) => n.bridge)?.bridge;
  if (!b) return { intended: "unknown" as const, evidence };
  evidence.push(refToEvidence(b.ipMasqSource ?? b.source));
  if (!b.ipMasq) return { intended: "keep-pod-source" as const, evidence };
  const multicast = dst.family === 4 ? dst.value >> 28n === 0xen : dst.value >> 120n === 0xffn;
  const inSubnet = b.subnets.some((s) => contains(s.cidr, dst));
  return {
    intended: inSubnet || multicast ? ("keep-pod-source" as const) : ("masquerade" as const),
    evidence,
  };
}

function bridgeMissing(snap: Snapshot): Missing[] {
  return bridgeNodes(snap)
    .filter((n) => n.files.length === 0)
    .map((n) => ({
      file: `nodes/${n.node}/cni/<file>.conflist`,
      would_decide: `the bridge plugin's "ipMasq" and subnet on ${n.node} (the chains show only the pods set up with it), which the fix changes`,
      command: `cat ${CONF_DIR}/*   # on ${n.node}: copy each file to nodes/${n.node}/cni/`,
    }));
}

/**
 * The plan in the plugin's terms: `"ipMasq": true` in each node's CNI config, then the node's pods
 * set up again (their chains appear on ADD); for pods that only miss their chain, the set-up alone.
 */
function bridgePlan(input: OwnerPlanInput): OwnerPlan | undefined {
  const { snap, targets } = input;
  if (!bridgePresent(snap) || ipMasqAgentPresent(snap) || input.strategy !== "narrow") {
    return undefined;
  }
  const nodes = bridgeNodes(snap).filter((n) => n.bridge && !n.bridge.ipMasq);
  if (nodes.length === 0) return podsSetUpAgain(snap, targets);
  const before = bridgeSettings(snap);
  const evidence: SourceRef[] = nodes.flatMap((n) =>
    n.bridge ? [n.bridge.ipMasqSource ?? n.bridge.source] : [],
  );
  const b0 = nodes[0]!.bridge!;
  const pods = nodes.flatMap((n) => podsOn(snap, n.node).map((p) => ({ node: n.node, p })));
  // the chain's name hashes the pod sandbox's ID, which only the node knows: the expected rules
  // below take the pod's namespace/name in its place
  const expected = nodes.flatMap((n) => {
    const post = snap.nodes.get(n.node)?.iptables?.tables.get("nat")?.chains.get("POSTROUTING");
    if (!post || !n.bridge) return [];
    const subnet = n.bridge.subnets[0]?.cidr;
    const chains = podsOn(snap, n.node).flatMap((p) => {
      const ip = p.podIPs.find((x) => x.ip.family === 4)?.ip;
      if (!ip || !subnet) return [];
      return [
        podMasqRules({
          network: n.bridge?.network ?? "",
          containerId: `${p.namespace}/${p.name}`,
          ip,
          subnet,
        }),
      ];
    });
    return [
      ...post.rules.map((r) => renderRule(r)),
      ...chains.flatMap((c) =>
        c.rules.filter((r) => r.chain === "POSTROUTING").map((r) => r.saved),
      ),
      ...chains.flatMap((c) =>
        c.rules.filter((r) => r.chain !== "POSTROUTING").map((r) => r.saved),
      ),
    ];
  });
  const subnets = [
    ...new Set(nodes.flatMap((n) => n.bridge?.subnets.map((s) => formatCidr(s.cidr)) ?? [])),
  ];
  const deletes = pods.map(
    ({ node, p }) =>
      sh`kubectl -n ${p.namespace} delete pod ${p.name}   # on ${node}: recreated by its controller; ADD writes its CNI-… chain`,
  );
  const names = targets.map((t) => formatIp(t.ip)).join(", ");
  return {
    owner: "bridge-cni",
    name: "the bridge CNI plugin (ipMasq)",
    knob: `"ipMasq" of the bridge plugin in ${CONF_DIR}/${baseName(b0.file)} on each node`,
    title: `Set "ipMasq": true for the bridge plugin in ${baseName(b0.file)} and set the pods up again`,
    why: `${ipMasqText(b0)}: the bridge plugin writes no masquerade chain, so pod packets to ${names} keep the pod's address. With "ipMasq": true each pod set up afterwards gets a CNI-… chain that accepts its subnet (${subnets.join(", ") || "the IPAM subnet"}) and masquerades everything else but multicast. The chain's name hashes the pod sandbox's ID, which the snapshot does not show: the expected rules name it from the pod's namespace/name instead.`,
    evidence,
    change: {
      before,
      after: before.map((s) => ({ key: s.key, value: "true" })),
    },
    files: [],
    apply: [...nodes.map((n) => `${jqEdit(n.bridge!, true)}   # on ${n.node}`), ...deletes],
    announcement: `Every destination outside the pod subnet (${subnets.join(", ") || "the IPAM subnet"}) will see the node's address instead of pod addresses, including other nodes' pods: announce it to the owners of those destinations; allowlists and NetworkPolicies that name pod addresses from other nodes stop matching.`,
    nowMasqueraded: ["0.0.0.0/0 outside the pod subnet and 224.0.0.0/4"],
    expected: [...new Set(expected)],
    checks: [
      `${GREP}   # on each node: one CNI-… chain per pod, its POSTROUTING jump naming the pod's address`,
      ...targets.map(
        (t) =>
          sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the node's address on the wire, replies back`,
      ),
      "podpath verify <before-snapshot> <after-snapshot>",
    ],
    rollback: [
      ...nodes.map((n) => `${jqEdit(n.bridge!, false)}   # on ${n.node}`),
      ...pods.map(
        ({ node, p }) =>
          sh`kubectl -n ${p.namespace} delete pod ${p.name}   # on ${node}: its DEL skips the chain's teardown now that ipMasq is false`,
      ),
      `iptables-save -t nat | grep -- '-j CNI-'   # on each node: for each jump left, iptables -t nat -D POSTROUTING <that rule>; iptables -t nat -F <chain>; iptables -t nat -X <chain>`,
    ],
    rollbackChecks: [
      `${GREP}   # on each node: no CNI-… chain with a "name: \\"${b0.network}\\"" comment left`,
    ],
    missing: bridgeMissing(snap),
  };
}

/**
 * With ipMasq on: the pods of the bridge network without their chain are set up again; when every
 * pod has its chain, nothing changes.
 */
function podsSetUpAgain(snap: Snapshot, targets: OwnerPlanInput["targets"]): OwnerPlan {
  const before = bridgeSettings(snap);
  const nodes = bridgeNodes(snap).filter((n) => n.hasDump);
  const missing = nodes.flatMap((n) =>
    podsOn(snap, n.node)
      .filter((p) => {
        const ip = p.podIPs[0]?.ip;
        return ip !== undefined && onBridgeNetwork(n, ip) && !chainOf(n, ip);
      })
      .map((p) => ({ node: n.node, p })),
  );
  const evidence: SourceRef[] = bridgeNodes(snap).flatMap((n) =>
    n.bridge ? [n.bridge.ipMasqSource ?? n.bridge.source] : [],
  );
  const names = targets.map((t) => formatIp(t.ip)).join(", ");
  const base = {
    owner: "bridge-cni" as const,
    name: "the bridge CNI plugin (ipMasq)",
    evidence,
    change: { before, after: before },
    files: [],
    nowMasqueraded: [],
    expected: [],
    rollback: [],
    rollbackChecks: [],
    missing: bridgeMissing(snap),
  };
  if (missing.length === 0) {
    return {
      ...base,
      knob: "none: the plugin already masquerades these destinations",
      title: `Nothing to change: the bridge plugin's chains already masquerade ${names}`,
      why: `ipMasq is on and every pod of the bridge network has its CNI-… chain, which masquerades everything outside its subnet. If the far side still does not answer, the break is elsewhere.`,
      apply: [],
      announcement: "Nothing changes on the nodes.",
      checks: targets.map(
        (t) =>
          sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the node's address on the wire`,
      ),
    };
  }
  return {
    ...base,
    knob: "the pods' network setup (the bridge plugin writes each pod's chain on ADD)",
    title: `Set up again the ${missing.length === 1 ? "pod" : "pods"} without a CNI-… chain`,
    why: `ipMasq is on, but no POSTROUTING jump names ${missing.map(({ p }) => `${p.namespace}/${p.name}`).join(", ")}: set up before ipMasq was turned on (or the chain was removed), so ${missing.length === 1 ? "it keeps its" : "they keep their"} address toward ${names}.`,
    apply: missing.map(
      ({ node, p }) =>
        sh`kubectl -n ${p.namespace} delete pod ${p.name}   # on ${node}: recreated by its controller; ADD writes its CNI-… chain`,
    ),
    announcement: `${names} will see the node's address instead of these pods' addresses, as for the node's other pods.`,
    checks: [`${GREP}   # on each node: a POSTROUTING jump for each pod's address`],
  };
}

/** Problems reading the CNI config files of every node. */
function bridgeDiagnostics(snap: Snapshot): Diagnostic[] {
  return [...snap.nodes.keys()].flatMap((n) => [...bridgeNode(snap, n).diagnostics]);
}

/** The bridge CNI plugin's `ipMasq` as an owner of the pods' source address. */
export const bridgeCniOwner: SourceOwnerCase = {
  id: "bridge-cni",
  name: "the bridge CNI plugin",
  present: bridgePresent,
  diagnostics: bridgeDiagnostics,
  replacesAgent: (snap) => bridgePresent(snap) && !ipMasqAgentPresent(snap),
  exempt: bridgeExempt,
  wireWording: bridgeWireWording,
  plan: bridgePlan,
  settings: bridgeSettings,
  intendedFor: bridgeIntendedFor,
  missing: bridgeMissing,
};
