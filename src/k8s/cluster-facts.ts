/**
 * @module k8s/cluster-facts — the address facts every case reads from cluster objects, each with
 * the line it was read from: Nodes (pool, pod ranges, InternalIPs) and Pods (node, addresses) as
 * typed views, the pod address space (Nodes' and CiliumNodes' pod ranges), whether an address is a
 * pod's, the Services' cluster IPs and the Service range, and the nodes' own addresses and subnets
 * (k8s/address-ranges). A host-network pod's address is its node's, never a pod address.
 */
import type { KubeObject } from "../evidence/kube-objects.ts";
import type { Diagnostic, Located, Parsed, SourceRef } from "../model/types.ts";
import { type Cidr, contains, type Ip, mergeCidrs, sameIp } from "../net/cidr.ts";
import {
  ciliumNodePodCidrs,
  type NodeInterfaces,
  nodeSubnetsOf,
  type ServiceRange,
  serviceRangeOf,
} from "./address-ranges.ts";
import {
  type NodeView,
  type PodView,
  readNode,
  readPod,
  readService,
  type ServiceView,
} from "./objects.ts";

export interface ClusterFacts {
  readonly nodes: readonly NodeView[];
  readonly pods: readonly PodView[];
  /** The pod address space: the Nodes' and CiliumNodes' pod ranges merged (empty when none says). */
  readonly podRanges: readonly Cidr[];
  /** CiliumNode `spec.ipam.podCIDRs` (Cilium cluster-pool IPAM), each with its node and line. */
  readonly ciliumPodCIDRs?: readonly {
    readonly node: string;
    readonly cidr: Cidr;
    readonly source: SourceRef;
  }[];
  /** The Service range, stated or (from the cluster IPs) a lower bound; undefined: unknown. */
  readonly serviceRange?: ServiceRange;
  /**
   * The nodes' own addresses: each InternalIP (a single address), then the subnet each node's
   * `ip addr` shows it on (when the evidence holds the node's interfaces), each cited.
   */
  readonly nodeRanges?: readonly Located<Cidr>[];
  readonly diagnostics: readonly Diagnostic[];
}

/** Evidence beyond the cluster objects that sharpens the facts. */
export interface ClusterEvidence {
  /** The nodes' `ip addr` (nodes/<node>/ip-addr): the subnets of their own addresses. */
  readonly nodeInterfaces?: readonly NodeInterfaces[];
}

/** The Nodes and Pods of the snapshot as typed views; their reading problems as diagnostics. */
export function clusterFacts(
  objects: readonly KubeObject[],
  evidence: ClusterEvidence = {},
): ClusterFacts {
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
  const ciliumPodCIDRs = ciliumNodePodCidrs(objects);
  const podRanges = mergeCidrs([
    ...nodes.flatMap((n) => n.podCIDRs.map((c) => c.cidr)),
    ...ciliumPodCIDRs.map((c) => c.cidr),
  ]);
  // the Services' reading problems are reported where their addresses are read (serviceAddresses)
  const services = serviceAddresses(objects);
  const serviceRange = serviceRangeOf(
    objects,
    services.value.map((a) => ({ value: hostCidr(a.ip), source: a.source })),
  );
  const internal = nodes.flatMap((n) => n.internalIPs.map((a) => ({ node: n.name, ...a })));
  const nodeRanges: Located<Cidr>[] = [
    ...internal.map((a) => ({ value: hostCidr(a.ip), source: a.source })),
    ...nodeSubnetsOf(internal, evidence.nodeInterfaces ?? []).map((s) => ({
      value: s.cidr,
      source: s.source,
    })),
  ];
  return {
    nodes,
    pods,
    podRanges,
    ciliumPodCIDRs,
    ...(serviceRange ? { serviceRange } : {}),
    nodeRanges,
    diagnostics,
  };
}

/** A single address as a block (/32, /128). */
export const hostCidr = (ip: Ip): Cidr => ({
  family: ip.family,
  start: ip.value,
  end: ip.value,
  prefix: ip.family === 4 ? 32 : 128,
});

/** A pod's addresses in its own network namespace: none for a pod on the host's network. */
export function podAddresses(
  pod: PodView,
): readonly { readonly ip: Ip; readonly source: SourceRef }[] {
  return pod.hostNetwork ? [] : pod.podIPs;
}

/** Is the address a pod address (inside a node's pod range, or a pod's own IP)? */
export function isPodAddress(facts: ClusterFacts, ip: Ip): boolean {
  return (
    facts.podRanges.some((c) => contains(c, ip)) ||
    facts.pods.some((p) => podAddresses(p).some((x) => sameIp(x.ip, ip)))
  );
}

/**
 * The pod address space with the line that states each part: every Node's pod CIDRs (both
 * families), every CiliumNode's, then every pod's own addresses as single-address blocks.
 */
export function podRangesOf(facts: ClusterFacts): Located<Cidr>[] {
  return [
    ...facts.nodes.flatMap((n) => n.podCIDRs.map((c) => ({ value: c.cidr, source: c.source }))),
    ...(facts.ciliumPodCIDRs ?? []).map((c) => ({ value: c.cidr, source: c.source })),
    ...facts.pods.flatMap((p) =>
      podAddresses(p).map((a) => ({ value: hostCidr(a.ip), source: a.source })),
    ),
  ];
}

/** The Nodes' InternalIPs, each with its Node. */
export function nodeInternalIps(
  facts: ClusterFacts,
): { readonly node: NodeView; readonly ip: Ip; readonly source: SourceRef }[] {
  return facts.nodes.flatMap((node) => node.internalIPs.map((a) => ({ node, ...a })));
}

/** One cluster IP of a Service. */
export interface ServiceAddress {
  readonly ip: Ip;
  readonly service: ServiceView;
  readonly source: SourceRef;
}

/**
 * The Services' cluster IPs in the order written (`clusterIPs`, else `clusterIP`: both families
 * of a dual-stack Service, the primary first; none for a headless Service).
 */
export function serviceAddresses(objects: readonly KubeObject[]): Parsed<ServiceAddress[]> {
  const diagnostics: Diagnostic[] = [];
  const value: ServiceAddress[] = [];
  for (const o of objects) {
    if (o.kind !== "Service") continue;
    const r = readService(o);
    diagnostics.push(...r.diagnostics);
    const service = r.value;
    if (service) value.push(...service.clusterIPs.map((a) => ({ ...a, service })));
  }
  return { value, diagnostics };
}
