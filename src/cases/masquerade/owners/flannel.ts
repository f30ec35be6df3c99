/**
 * @module cases/masquerade/owners/flannel — the masquerade case on a Flannel node: flanneld
 * masquerades pod traffic leaving the overlay only with `--ip-masq` (its FLANNEL-POSTRTG chain);
 * without it (and with the CNI delegate's own ipMasq off) nothing does. Destinations inside
 * net-conf.json's Network keep the pod address by design (the chain's RETURN). The fix in
 * Flannel's terms: `--ip-masq` on the kube-flannel DaemonSet, or the far side routes the Network
 * back.
 */
import {
  FLAG_IP_MASQ,
  type FlannelFlags,
  readFlannelFlags,
} from "../../../agents/flannel/daemonset.ts";
import { type FlannelNetConf, readFlannelNetConf } from "../../../agents/flannel/netconf.ts";
import { CHAIN_POSTRTG } from "../../../agents/flannel/rules.ts";
import type { Rule } from "../../../iptables/dump.ts";
import { type Evidence, refToEvidence, type SourceRef } from "../../../model/types.ts";
import {
  type Cidr,
  contains,
  type Family,
  formatCidr,
  formatIp,
  type Ip,
} from "../../../net/cidr.ts";
import { quoted, sh } from "../../../report/shell-quote.ts";
import type { Snapshot } from "../../../snapshot/load.ts";
import { natChainsMatching } from "./nat-chains.ts";
import type {
  ExemptWording,
  OwnerExempt,
  OwnerExemptInput,
  OwnerPlan,
  OwnerPlanInput,
  OwnerSetting,
  OwnerWireWording,
  SourceOwnerCase,
} from "./owner.ts";
import { ipMasqAgentPresent, ruleOwner } from "./rule-owner.ts";

const refText = (r: SourceRef) => `${r.file}:${r.line}${r.text ? ` (${r.text.trim()})` : ""}`;

function hasFlannelChain(snap: Snapshot, node: string): boolean {
  return natChainsMatching(snap.nodes.get(node)?.iptables, /^FLANNEL-/).length > 0;
}

function flannelPresent(snap: Snapshot): boolean {
  return (
    readFlannelFlags(snap.objects) !== undefined ||
    readFlannelNetConf(snap.objects).value !== undefined ||
    [...snap.nodes.keys()].some((n) => hasFlannelChain(snap, n))
  );
}

function addFlagPatch(f: FlannelFlags): string {
  const op = `[{"op":"add","path":"/spec/template/spec/containers/${f.containerIndex}/args/-","value":"${FLAG_IP_MASQ}"}]`;
  return sh`kubectl -n ${f.daemonSet.namespace ?? "kube-flannel"} patch daemonset ${f.daemonSet.name} --type json -p ${quoted(op)}`;
}

function rolloutStatus(f: FlannelFlags): string {
  return sh`kubectl -n ${f.daemonSet.namespace ?? "kube-flannel"} rollout status daemonset ${f.daemonSet.name}`;
}

function rollbackLine(f: FlannelFlags): string {
  return sh`kubectl -n ${f.daemonSet.namespace ?? "kube-flannel"} rollout undo daemonset ${f.daemonSet.name}`;
}

/** The owner's answer for a pod packet that keeps its address, or "not-mine". */
/** net-conf.json's network of a family (Network, or IPv6Network with EnableIPv6), with its line. */
function networkOf(
  net: FlannelNetConf | undefined,
  family: Family,
): { cidr?: Cidr; text?: string; key: string; source?: SourceRef } {
  if (family === 6) {
    const s = net?.sources.get("IPv6Network");
    return {
      key: "IPv6Network",
      ...(net?.ipv6Network ? { cidr: net.ipv6Network, text: formatCidr(net.ipv6Network) } : {}),
      ...(s ? { source: s } : {}),
    };
  }
  const s = net?.sources.get("Network");
  return {
    key: "Network",
    ...(net?.network ? { cidr: net.network } : {}),
    ...(net?.networkText ? { text: net.networkText } : {}),
    ...(s ? { source: s } : {}),
  };
}

function flannelExempt(input: OwnerExemptInput): OwnerExempt {
  const { snap, src, target, rule, stops } = input;
  if (src.kind !== "pod" || !flannelPresent(snap)) return { kind: "not-mine" };
  const owned = ruleOwner(snap, src.node, rule);
  if (owned?.attribution.owner === "flannel" && owned.rule.target?.kind === "verdict") {
    const net = readFlannelNetConf(snap.objects).value;
    if (!stops) {
      const within = networkOf(net, target.ip.family);
      return {
        kind: "healthy",
        why: `${formatIp(target.ip)} is inside Flannel's ${within.key}${within.text ? ` ${within.text}` : ""} (${refText(owned.rule.source)}): the overlay keeps pod addresses by design`,
      };
    }
    return { kind: "finding", finding: networkFinding(input, owned.rule) };
  }
  // no rule of anyone's kept it (or kube-proxy's mark RETURN): flanneld wrote no FLANNEL-POSTRTG
  const keptByNoRule = !owned || owned.attribution.owner === "kube-proxy";
  const flags = readFlannelFlags(snap.objects);
  if (keptByNoRule && flags && !flags.ipMasq && !hasFlannelChain(snap, src.node)) {
    return { kind: "finding", finding: noIpMasqFinding(input, flags, owned?.rule) };
  }
  return { kind: "not-mine" };
}

function networkFinding(input: OwnerExemptInput, rule: Rule): ExemptWording {
  const { snap, src, target } = input;
  const dstText = formatIp(target.ip);
  const net = readFlannelNetConf(snap.objects).value;
  const netOf = networkOf(net, target.ip.family);
  const netRef = netOf.source;
  const evidence: Evidence[] = [refToEvidence(rule.source)];
  if (netRef) evidence.push(refToEvidence(netRef));
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const cidr = rule.dst ? formatCidr(rule.dst.cidr) : (netOf.text ?? `the ${netOf.key}`);
  return {
    severity: "error",
    title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (Flannel: ${dstText} is inside Network ${cidr})`,
    subject: `node/${src.node}`,
    explanation:
      `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: flanneld's rule ${refText(rule.source)} returns before its MASQUERADE because ${dstText} is inside the Flannel Network ${cidr}${netRef ? ` (${netRef.file}:${netRef.line})` : ""}, which flanneld treats as the overlay. ` +
      "The far side is not part of the overlay and has no route back to the pod's address, so the replies vanish. " +
      `Fix: route the pod network back at the far side, or give Flannel a Network that does not contain ${dstText} (a cluster-wide re-addressing: every node's lease changes).`,
    evidence,
    next: [
      "kubectl -n kube-flannel get configmap kube-flannel-cfg -o yaml   # net-conf.json Network",
      sh`iptables-save -t nat | grep ${CHAIN_POSTRTG}   # on ${src.node}`,
      sh`tcpdump -ni any host ${dstText}   # on ${src.node}: the pod address on the wire, no reply`,
    ],
  };
}

function noIpMasqFinding(
  input: OwnerExemptInput,
  flags: FlannelFlags,
  lastReturn: Rule | undefined,
): ExemptWording {
  const { src, target, stops } = input;
  const dstText = formatIp(target.ip);
  const evidence: Evidence[] = [refToEvidence(flags.argsSource)];
  if (src.evidence) evidence.push(refToEvidence(src.evidence));
  const setting = flags.ipMasqSource
    ? `sets ${flags.args.find((a) => a.includes("ip-masq=")) ?? "--ip-masq=false"} (${flags.ipMasqSource.file}:${flags.ipMasqSource.line})`
    : `has no ${FLAG_IP_MASQ} among flanneld's args (${flags.argsSource.file}:${flags.argsSource.line}: ${flags.args.join(" ")})`;
  return {
    severity: stops ? "error" : "warning",
    title: `Pod traffic to ${dstText} keeps its pod source address ${formatIp(src.ip)} (Flannel: no ${FLAG_IP_MASQ})`,
    subject: `node/${src.node}`,
    explanation:
      `A packet from pod ${formatIp(src.ip)} to ${dstText} leaves ${src.node} with the pod's own address: the ${flags.daemonSet.name} DaemonSet ${setting}, so flanneld writes no ${CHAIN_POSTRTG} chain (the node's dump has none) and nothing masquerades pod traffic leaving the overlay. ` +
      (lastReturn
        ? `kube-proxy's RETURN (${refText(lastReturn.source)}) only skips kube-proxy's own service masquerade; it is not the exemption. `
        : "") +
      "(Flannel's CNI plugin masquerades in flanneld's place only when its delegate config has no ipMasq key; the bridge rules it would write are not on this node.) " +
      (stops
        ? "The far side has no route back to the pod's address, so the replies vanish. "
        : "Unless the far side routes the pod network back, the replies vanish. ") +
      `Fix: add ${FLAG_IP_MASQ} to flanneld's args on the ${flags.daemonSet.name} DaemonSet (a behaviour change: every destination outside the Flannel Network then sees node addresses), or route the pod network back at the far side.`,
    evidence,
    next: [
      sh`kubectl -n ${flags.daemonSet.namespace ?? "kube-flannel"} get daemonset ${flags.daemonSet.name} -o yaml   # flanneld's args`,
      addFlagPatch(flags),
      rolloutStatus(flags),
      sh`iptables-save -t nat | grep ${CHAIN_POSTRTG}   # on ${src.node}: flanneld's masquerade rules are there`,
      `${rollbackLine(flags)}   # rollback`,
    ],
  };
}

function flannelWireWording(snap: Snapshot): OwnerWireWording | undefined {
  if (!flannelPresent(snap) || ipMasqAgentPresent(snap)) return undefined;
  return {
    fix: `(Flannel: ${FLAG_IP_MASQ} on the kube-flannel DaemonSet, or route the pod network back at the far side)`,
    next: [
      "kubectl -n kube-flannel get daemonset kube-flannel-ds -o yaml   # flanneld's args",
      sh`iptables-save -t nat | grep ${CHAIN_POSTRTG}   # on the node`,
    ],
  };
}

function flannelSettings(snap: Snapshot): OwnerSetting[] {
  const out: OwnerSetting[] = [];
  const flags = readFlannelFlags(snap.objects);
  if (flags) {
    out.push({
      key: `flanneld ${FLAG_IP_MASQ}`,
      value: String(flags.ipMasq),
      source: flags.ipMasqSource ?? flags.argsSource,
    });
  }
  const net = readFlannelNetConf(snap.objects).value;
  if (net?.networkText) {
    const s = net.sources.get("Network");
    out.push({ key: "net-conf.json Network", value: net.networkText, ...(s ? { source: s } : {}) });
  }
  const n6 = networkOf(net, 6);
  if (n6.text) {
    out.push({
      key: "net-conf.json IPv6Network",
      value: n6.text,
      ...(n6.source ? { source: n6.source } : {}),
    });
  }
  return out;
}

function flannelIntendedFor(snap: Snapshot, dst: Ip) {
  const evidence: Evidence[] = [];
  const net = readFlannelNetConf(snap.objects).value;
  const flags = readFlannelFlags(snap.objects);
  const within = networkOf(net, dst.family);
  if (within.cidr && contains(within.cidr, dst)) {
    const s = within.source;
    if (s) evidence.push(refToEvidence(s));
    return { intended: "keep-pod-source" as const, evidence };
  }
  if (!flags) return { intended: "unknown" as const, evidence };
  evidence.push(refToEvidence(flags.ipMasqSource ?? flags.argsSource));
  // without --ip-masq the CNI delegate may masquerade instead: only the node's rules say
  return flags.ipMasq
    ? { intended: "masquerade" as const, evidence }
    : { intended: "keep-pod-source" as const, evidence };
}

/** The plan in Flannel's terms: --ip-masq on flanneld, when it is off. */
function flannelPlan(input: OwnerPlanInput): OwnerPlan | undefined {
  const { snap, targets } = input;
  if (!flannelPresent(snap) || ipMasqAgentPresent(snap) || input.strategy !== "narrow")
    return undefined;
  const flags = readFlannelFlags(snap.objects);
  const net = readFlannelNetConf(snap.objects).value;
  if (!flags || flags.ipMasq) return undefined;
  const before = flannelSettings(snap);
  const outside = targets.filter((t) => {
    const c = networkOf(net, t.ip.family).cidr;
    return !(c && contains(c, t.ip));
  });
  if (outside.length === 0) return undefined;
  const ns = flags.daemonSet.namespace ?? "kube-flannel";
  return {
    owner: "flannel",
    name: "Flannel (flanneld)",
    knob: `flanneld's ${FLAG_IP_MASQ} on the ${flags.daemonSet.name} DaemonSet`,
    title: `Add ${FLAG_IP_MASQ} to flanneld on the ${flags.daemonSet.name} DaemonSet`,
    why: `flanneld runs without ${FLAG_IP_MASQ} (${flags.argsSource.file}:${flags.argsSource.line}), so it writes no ${CHAIN_POSTRTG} chain and pod packets to ${outside.map((t) => formatIp(t.ip)).join(", ")} keep their addresses.`,
    evidence: [flags.argsSource],
    change: {
      before,
      after: before.map((b) =>
        b.key === `flanneld ${FLAG_IP_MASQ}` ? { key: b.key, value: "true" } : b,
      ),
    },
    files: [],
    apply: [addFlagPatch(flags), rolloutStatus(flags)],
    announcement: `Every destination outside the Flannel Network${net?.networkText ? ` ${net.networkText}` : ""} will see node addresses instead of pod addresses: announce it to the owners of those destinations; allowlists naming pod addresses stop matching.`,
    nowMasqueraded: [`every destination outside ${net?.networkText ?? "the Flannel Network"}`],
    // the rules depend on each node's lease (its podCIDR), which each node's dump shows afterwards
    expected: [],
    checks: [
      sh`iptables-save -t nat | grep ${CHAIN_POSTRTG}   # on each node: flanneld's rules`,
      ...outside.map(
        (t) =>
          sh`tcpdump -ni any host ${formatIp(t.ip)}   # on a node: the node's address on the wire, replies back`,
      ),
      "podpath verify <before-snapshot> <after-snapshot>",
    ],
    rollback: [
      sh`kubectl -n ${ns} rollout undo daemonset ${flags.daemonSet.name}`,
      rolloutStatus(flags),
    ],
    rollbackChecks: [
      sh`iptables-save -t nat | grep -c ${CHAIN_POSTRTG}   # on each node: 0 after flanneld's restart (it leaves its chain until cleanup)`,
    ],
    missing: net
      ? []
      : [
          {
            file: "cluster/kube-flannel.yaml",
            would_decide: "net-conf.json's Network (the overlay flanneld does not masquerade)",
            command: "kubectl -n kube-flannel get configmap kube-flannel-cfg -o yaml",
          },
        ],
  };
}

/** Flannel (flanneld's --ip-masq, net-conf.json) as an owner of the pods' source address. */
export const flannelOwner: SourceOwnerCase = {
  id: "flannel",
  name: "Flannel",
  present: flannelPresent,
  replacesAgent: (snap) => flannelPresent(snap) && !ipMasqAgentPresent(snap),
  exempt: flannelExempt,
  wireWording: flannelWireWording,
  plan: flannelPlan,
  settings: flannelSettings,
  intendedFor: flannelIntendedFor,
};
