/**
 * @module policy/source-change — which NetworkPolicies stop admitting traffic when a change
 * rewrites its source from pod addresses to node addresses (masquerade newly applied toward a
 * destination). Only ingress policies of the destination pods matter: egress rules match the
 * destination, which the rewrite leaves alone, and a pod that no ingress policy selects admits
 * everything. A policy admits the pods today through a rule with no `from`, a pod or namespace
 * selector peer, or an ipBlock holding pod addresses; after the change the source is a node, which
 * no selector peer matches (a node is not a pod) and only an ipBlock holding the node's address
 * (minus its `except`) admits.
 */
import type { SourceRef } from "../model/types.ts";
import { type Cidr, contains, formatCidr, formatIp, type Ip, overlaps } from "../net/cidr.ts";
import { selectorMatches } from "./label-selector.ts";
import type { NetworkPolicy, PolicyPeer, PolicyRule } from "./network-policy.ts";

/** A pod the changed traffic is sent to. */
export interface DestinationPod {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly ip: Ip;
  readonly source: SourceRef;
}

/** An ingress policy that admits the pods' traffic to `pod` today and not the nodes' after. */
export interface SourceChangeBlocker {
  /** `namespace/name` of the policy. */
  readonly policy: string;
  /** `namespace/name` of the destination pod. */
  readonly pod: string;
  readonly podIp: Ip;
  /** What the pod's ingress policies admit today, in words (`ipBlock 10.4.0.0/14`, `pods …`). */
  readonly admits: readonly string[];
  /** The node addresses no rule admits. */
  readonly refused: readonly Cidr[];
  /** The policy's line (its first ingress rule's when it has one). */
  readonly source: SourceRef;
}

const blockHolds = (peer: Extract<PolicyPeer, { kind: "ipBlock" }>, c: Cidr): boolean =>
  contains(peer.cidr, { family: c.family, value: c.start }) &&
  contains(peer.cidr, { family: c.family, value: c.end }) &&
  !peer.except.some((e) => overlaps(e, c));

const describePeer = (p: PolicyPeer): string =>
  p.kind === "ipBlock"
    ? `ipBlock ${formatCidr(p.cidr)}${p.except.length ? ` except ${p.except.map(formatCidr).join(", ")}` : ""}`
    : p.namespaceSelector
      ? "pods selected by namespace (namespaceSelector)"
      : "pods selected by label (podSelector)";

/** Does a rule admit some pod of `podRanges` (a selector peer, or an ipBlock holding pod addresses)? */
const admitsPods = (r: PolicyRule, podRanges: readonly Cidr[]): boolean =>
  r.peers === undefined ||
  r.peers.some((p) =>
    p.kind === "selector" ? true : podRanges.some((pr) => overlaps(p.cidr, pr)),
  );

/**
 * The ingress policies that turn the change into a break: for every destination pod whose address
 * the change newly masquerades toward (`changed`), isolated for ingress, whose policies admit pods
 * (`podRanges`) today but not every node address (`nodeAddresses`) after.
 */
export function sourceChangeBlockers(
  policies: readonly NetworkPolicy[],
  destinations: readonly DestinationPod[],
  changed: readonly Cidr[],
  podRanges: readonly Cidr[],
  nodeAddresses: readonly Cidr[],
): SourceChangeBlocker[] {
  const out: SourceChangeBlocker[] = [];
  for (const d of destinations) {
    if (!changed.some((c) => contains(c, d.ip))) continue;
    const selecting = policies.filter(
      (p) =>
        p.affectsIngress && p.namespace === d.namespace && selectorMatches(p.podSelector, d.labels),
    );
    if (selecting.length === 0) continue; // not isolated: every source is admitted
    const rules = selecting.flatMap((p) => p.ingress);
    if (rules.some((r) => r.peers === undefined)) continue; // a rule admitting every source
    if (!rules.some((r) => admitsPods(r, podRanges))) continue; // pods are refused today already
    const refused = nodeAddresses.filter(
      (n) =>
        n.family === d.ip.family &&
        !rules.some((r) => (r.peers ?? []).some((p) => p.kind === "ipBlock" && blockHolds(p, n))),
    );
    if (refused.length === 0) continue;
    const deciding = selecting.find((p) => p.ingress.some((r) => admitsPods(r, podRanges)));
    const policy = deciding ?? selecting[0]!;
    out.push({
      policy: `${policy.namespace}/${policy.name}`,
      pod: `${d.namespace}/${d.name}`,
      podIp: d.ip,
      admits: [...new Set(rules.flatMap((r) => (r.peers ?? []).map(describePeer)))],
      refused,
      source: policy.ingress[0]?.source ?? policy.source,
    });
  }
  return out;
}

/** One line for a blocker: what the policy admits and which node addresses it refuses. */
export function describeSourceChangeBlocker(b: SourceChangeBlocker): string {
  return `NetworkPolicy ${b.policy} isolates ${b.pod} (${formatIp(b.podIp)}) for ingress and admits only ${b.admits.join(", ")}; the nodes' addresses (${b.refused.map(formatCidr).join(", ")}) match none of its rules`;
}
