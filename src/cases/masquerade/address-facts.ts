/**
 * @module cases/masquerade/address-facts — which addresses are a node's own, from every piece
 * of evidence that states it, for when its `ip addr` is not in the snapshot (users rarely hand it
 * over): the Node's status addresses and the `src` of its routes are its own; other nodes'
 * addresses, pods' addresses, Service ClusterIPs in kube-proxy's iptables rules and a far site's
 * prefixes are not. Each fact keeps the line it was read from, so the answer can say where the
 * node's addresses came from.
 */

import type { RemoteSite } from "../../evidence/remote-site.ts";
import type { AddressFact } from "../../iptables/nat-trace.ts";
import {
  type ClusterFacts,
  hostCidr as host,
  nodeInternalIps,
  podAddresses,
} from "../../k8s/cluster-facts.ts";
import { formatIp } from "../../net/cidr.ts";
import type { NodeEvidence } from "../../snapshot/load.ts";

const CLUSTER_IP_COMMENT = / cluster IP"?$/;

/**
 * The address facts for one node, most specific first (the evaluator takes the first that covers
 * an address): the node's own, then single addresses that are not its own, then far sites.
 */
export function nodeAddressFacts(
  nodeName: string,
  node: NodeEvidence | undefined,
  facts: ClusterFacts,
  sites: readonly RemoteSite[],
): AddressFact[] {
  const own: AddressFact[] = [];
  const others: AddressFact[] = [];
  const view = facts.nodes.find((n) => n.name === nodeName);
  for (const a of [...(view?.internalIPs ?? []), ...(view?.externalIPs ?? [])]) {
    own.push({
      cidr: host(a.ip),
      local: true,
      source: a.source,
      what: `${formatIp(a.ip)} is an address of Node ${nodeName}`,
    });
  }
  for (const r of node?.routes ?? []) {
    if (r.type === "local" && r.dst !== "default") {
      own.push({
        cidr: r.dst,
        local: true,
        source: r.source,
        what: `the node's local routing table lists it`,
      });
    } else if (r.src) {
      own.push({
        cidr: host(r.src),
        local: true,
        source: r.source,
        what: `${formatIp(r.src)} is the source address of the node's route`,
      });
    }
  }
  for (const a of nodeInternalIps(facts)) {
    if (a.node.name === nodeName) continue;
    others.push({
      cidr: host(a.ip),
      local: false,
      source: a.source,
      what: `${formatIp(a.ip)} is Node ${a.node.name}'s address`,
    });
  }
  for (const p of facts.pods) {
    for (const a of podAddresses(p)) {
      others.push({
        cidr: host(a.ip),
        local: false,
        source: a.source,
        what: `${formatIp(a.ip)} is pod ${p.namespace}/${p.name}'s address, in its own network namespace`,
      });
    }
  }
  // kube-proxy in iptables mode never assigns a ClusterIP to an interface (IPVS mode does, and
  // writes no KUBE-SERVICES rules in the nat table)
  const services = node?.iptables?.tables.get("nat")?.chains.get("KUBE-SERVICES");
  for (const r of services?.rules ?? []) {
    const comment = r.matches.find((m) => m.kind === "comment");
    if (!r.dst || r.dst.negated || comment?.kind !== "comment") continue;
    if (!CLUSTER_IP_COMMENT.test(comment.comment)) continue;
    others.push({
      cidr: r.dst.cidr,
      local: false,
      source: r.source,
      what: "a Service ClusterIP in kube-proxy's iptables rules",
    });
  }
  const far: AddressFact[] = sites.flatMap((site) =>
    site.prefixes.map((p) => ({
      cidr: p.cidr,
      local: false,
      source: p.source,
      what: `${site.name}'s prefix, the far side`,
    })),
  );
  return [...own, ...others, ...far];
}
