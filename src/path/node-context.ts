/**
 * @module path/node-context — what a node's snapshot evidence tells the nat and whole-path
 * evaluators about the node for packets of one family: its iptables dump of that family, its
 * interfaces in `ip addr` order (each with its primary address of the family, else of the other,
 * and the line that shows it), every address of its own, its InternalIP of the family and its IP
 * sets. One reading for the masquerade case's nat questions and the whole path.
 */
import { primaryAddress } from "../evidence/ip-addr.ts";
import type { IptablesDump } from "../iptables/dump.ts";
import type { AddressFact, NatContext, NodeInterface } from "../iptables/nat-trace.ts";
import type { NodeView } from "../k8s/objects.ts";
import type { Family } from "../net/cidr.ts";
import type { NodeEvidence } from "../snapshot/load.ts";

/** The node's iptables dump of one family: iptables-save, or ip6tables-save for IPv6. */
export function nodeDump(node: NodeEvidence, family: Family): IptablesDump | undefined {
  return [node.iptables, node.ip6tables].find((d) => d?.family === family);
}

/** The nat evaluator's context from the node's evidence, for packets of `family`. */
export function nodeNatContext(
  node: NodeEvidence,
  view: NodeView | undefined,
  addressFacts: readonly AddressFact[] = [],
  family: Family = 4,
): NatContext {
  const other: Family = family === 4 ? 6 : 4;
  const interfaces: NodeInterface[] = (node.interfaces ?? []).map((i) => {
    const primary = primaryAddress(i, family) ?? primaryAddress(i, other);
    return {
      name: i.name,
      ...(primary ? { primary: primary.local, primarySource: primary.source } : {}),
      addresses: i.addresses.map((a) => ({ ip: a.local, prefix: a.cidr.prefix })),
    };
  });
  const localAddresses = (node.interfaces ?? []).flatMap((i) => i.addresses.map((a) => a.local));
  const internal = (view?.internalIPs.find((a) => a.ip.family === family) ?? view?.internalIPs[0])
    ?.ip;
  // the node's `ipset save` / `ipset list` decides `-m set` matches (Calico's cali-nat-outgoing)
  return {
    ...(node.ipsets ? { ipsets: node.ipsets } : { ipsetFile: `nodes/${node.name}/ipset.txt` }),
    ...(node.interfaces ? { localAddresses, interfaces } : {}),
    ...(internal ? { nodeInternalIp: internal } : {}),
    ...(addressFacts.length > 0 ? { addressFacts } : {}),
  };
}
