/**
 * @module path/node-path — a node's whole-path evaluator built from its snapshot evidence: the
 * dump, its addresses and interfaces (`ip addr`), every routing table and `ip rule`, its IP sets,
 * the Node's InternalIP and facts from other evidence. Built once per node.
 */
import { primaryAddress } from "../evidence/ip-addr.ts";
import type { AddressFact, NodeInterface } from "../iptables/nat-trace.ts";
import type { NodeView } from "../k8s/objects.ts";
import { isIptablesNftTable } from "../nftables/active-rules.ts";
import type { NftRuleset } from "../nftables/model.ts";
import type { NodeEvidence } from "../snapshot/load.ts";
import { compilePath, type PathContext } from "./evaluate-path.ts";
import { compileNftPath } from "./nft-path.ts";
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

/**
 * The nftables listing a node's whole path is read from: when the kernel's nat rules come from it
 * (kube-proxy's nftables mode) and it holds every rule of the iptables dump too (none, or
 * iptables-nft's own tables, which the listing shows); undefined otherwise (a legacy dump's rules
 * run beside the listing's, and the iptables reading stays).
 */
export function nftPathRuleset(node: NodeEvidence): NftRuleset | undefined {
  const rs = node.natFrom === "nftables" ? node.nftables : undefined;
  if (!rs) return undefined;
  for (const [name, table] of node.iptables?.tables ?? []) {
    const rules = [...table.chains.values()].some((c) => c.rules.length > 0);
    const listed = rs.tables.some(
      (t) =>
        t.family === (node.iptables?.family === 6 ? "ip6" : "ip") &&
        t.name === name &&
        isIptablesNftTable(t),
    );
    if (rules && !listed) return undefined;
  }
  return rs;
}

/**
 * The node's evaluator, built on first use: over its nftables listing when that is what the
 * kernel runs ({@link nftPathRuleset}), else over its iptables dump (undefined without either).
 */
export function nodePathEvaluator(
  node: NodeEvidence,
  view?: NodeView,
  addressFacts: readonly AddressFact[] = [],
): PathEvaluator | undefined {
  const rs = nftPathRuleset(node);
  if (rs) {
    let e = built.get(node);
    if (!e) {
      e = compileNftPath(rs, pathContextOf(node, view, addressFacts));
      built.set(node, e);
    }
    return e;
  }
  if (!node.iptables) return undefined;
  let e = built.get(node);
  if (!e) {
    e = compilePath(node.iptables, pathContextOf(node, view, addressFacts));
    built.set(node, e);
  }
  return e;
}
