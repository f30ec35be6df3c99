/**
 * @module path/node-path — a node's whole-path evaluator built from its snapshot evidence: the
 * dump, its addresses and interfaces (`ip addr`), every routing table and `ip rule`, its IP sets,
 * the Node's InternalIP and facts from other evidence. Built once per node.
 */
import { primaryAddress } from "../evidence/ip-addr.ts";
import type { AddressFact, NodeInterface } from "../iptables/nat-trace.ts";
import type { NodeView } from "../k8s/objects.ts";
import type { NodeEvidence } from "../snapshot/load.ts";
import { compilePath, type PathContext } from "./evaluate-path.ts";
import type { PathEvaluator } from "./path-types.ts";

const built = new WeakMap<NodeEvidence, PathEvaluator>();

/** The evaluator's context from the node's evidence. */
export function pathContextOf(
  node: NodeEvidence,
  view: NodeView | undefined,
  addressFacts: readonly AddressFact[] = [],
): PathContext {
  const interfaces: NodeInterface[] = (node.interfaces ?? []).map((i) => {
    const primary = primaryAddress(i, 4) ?? primaryAddress(i, 6);
    return {
      name: i.name,
      ...(primary ? { primary: primary.local } : {}),
      addresses: i.addresses.map((a) => ({ ip: a.local, prefix: a.cidr.prefix })),
    };
  });
  const localAddresses = (node.interfaces ?? []).flatMap((i) => i.addresses.map((a) => a.local));
  const internal = view?.internalIPs[0]?.ip;
  return {
    ...(node.ipsets ? { ipsets: node.ipsets } : { ipsetFile: `nodes/${node.name}/ipset.txt` }),
    ...(node.interfaces ? { localAddresses, interfaces } : {}),
    ...(internal ? { nodeInternalIp: internal } : {}),
    ...(addressFacts.length > 0 ? { addressFacts } : {}),
    routing: {
      ...(node.routes ? { routes: node.routes } : {}),
      ...(node.ipRules ? { rules: node.ipRules } : {}),
      rulesFile: node.files["ip-rule"] ?? `nodes/${node.name}/ip-rule.txt`,
    },
  };
}

/** The node's evaluator (undefined without its iptables dump), built on first use. */
export function nodePathEvaluator(
  node: NodeEvidence,
  view?: NodeView,
  addressFacts: readonly AddressFact[] = [],
): PathEvaluator | undefined {
  if (!node.iptables) return undefined;
  let e = built.get(node);
  if (!e) {
    e = compilePath(node.iptables, pathContextOf(node, view, addressFacts));
    built.set(node, e);
  }
  return e;
}
