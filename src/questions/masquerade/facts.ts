/**
 * @module questions/masquerade/facts — the cluster facts the masquerade question stands on: nodes
 * (pool, pod ranges, InternalIP), pods (node, addresses), and the pod address space, each with the
 * file line it was read from.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import { type NodeView, type PodView, readNode, readPod } from "../../k8s/objects.ts";
import type { Diagnostic } from "../../model/types.ts";
import { type Cidr, contains, type Ip, mergeCidrs } from "../../net/cidr.ts";

export interface ClusterFacts {
  readonly nodes: readonly NodeView[];
  readonly pods: readonly PodView[];
  /** The pod address space: the nodes' pod ranges merged (empty when no Node says). */
  readonly podRanges: readonly Cidr[];
  readonly diagnostics: readonly Diagnostic[];
}

export function clusterFacts(objects: readonly KubeObject[]): ClusterFacts {
  const diagnostics: Diagnostic[] = [];
  const nodes: NodeView[] = [];
  const pods: PodView[] = [];
  for (const o of objects) {
    if (o.kind === "Node") {
      const r = readNode(o);
      diagnostics.push(...r.diagnostics);
      if (r.value) nodes.push(r.value);
    } else if (o.kind === "Pod") {
      const r = readPod(o);
      diagnostics.push(...r.diagnostics);
      if (r.value) pods.push(r.value);
    }
  }
  const podRanges = mergeCidrs(nodes.flatMap((n) => n.podCIDRs.map((c) => c.cidr)));
  return { nodes, pods, podRanges, diagnostics };
}

/** Is the address a pod address (inside a node's pod range, or a pod's own IP)? */
export function isPodAddress(facts: ClusterFacts, ip: Ip): boolean {
  return (
    facts.podRanges.some((c) => contains(c, ip)) ||
    facts.pods.some(
      (p) =>
        !p.hostNetwork &&
        p.podIPs.some((x) => x.ip.value === ip.value && x.ip.family === ip.family),
    )
  );
}
