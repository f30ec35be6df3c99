/**
 * @module k8s/node-view — a Node as podpath reads it: pool, pod CIDRs, addresses and taints.
 */
import type { KubeObject } from "../evidence/kube-objects.ts";
import { lazySchema } from "../evidence/lazy-zod.ts";
import { locatedObject, parseLenient } from "../evidence/lenient-parse.ts";
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import type { Cidr, Ip } from "../net/cidr.ts";
import {
  addresses,
  at,
  opt,
  type Path,
  parseCidrOpt,
  parseIpOpt,
  type Taint,
  viewSchemas,
  wrongKind,
} from "./view-support.ts";

/** The GKE label naming a node's pool. */
export const GKE_NODE_POOL_LABEL = "cloud.google.com/gke-nodepool";

export interface NodeView {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** `cloud.google.com/gke-nodepool`, when set. */
  readonly pool?: string;
  readonly taints: readonly Taint[];
  /** spec.podCIDRs, or spec.podCIDR on older nodes. */
  readonly podCIDRs: readonly { readonly cidr: Cidr; readonly source: SourceRef }[];
  readonly internalIPs: readonly { readonly ip: Ip; readonly source: SourceRef }[];
  readonly externalIPs: readonly { readonly ip: Ip; readonly source: SourceRef }[];
  readonly object: KubeObject;
  readonly source: SourceRef;
}

const NodeSchema = lazySchema((z) => {
  const { str, TaintSchema } = viewSchemas();
  return z.object({
    spec: z
      .object({
        podCIDR: str.optional(),
        podCIDRs: z.array(str).optional(),
        taints: z.array(TaintSchema).optional(),
      })
      .optional(),
    status: z
      .object({ addresses: z.array(z.object({ type: str, address: str })).optional() })
      .optional(),
  });
});

export function readNode(obj: KubeObject): Parsed<NodeView | undefined> {
  if (obj.kind !== "Node") return wrongKind(obj, "Node");
  const diagnostics: Diagnostic[] = [];
  const n = parseLenient(NodeSchema(), locatedObject(obj), diagnostics);
  if (!n) return { value: undefined, diagnostics };
  const cidrTexts = n.spec?.podCIDRs?.length
    ? n.spec.podCIDRs.map((text, i) => ({ text, path: ["spec", "podCIDRs", i] as Path }))
    : n.spec?.podCIDR
      ? [{ text: n.spec.podCIDR, path: ["spec", "podCIDR"] as Path }]
      : [];
  const addrs = n.status?.addresses ?? [];
  const ipsOf = (type: string) =>
    addresses(
      obj,
      addrs.flatMap((a, i) =>
        a.type === type
          ? [{ text: a.address, path: ["status", "addresses", i, "address"] as Path }]
          : [],
      ),
      parseIpOpt,
      "an IP address",
      diagnostics,
    ).map((x) => ({ ip: x.value, source: x.source }));
  const value: NodeView = {
    name: obj.name,
    labels: obj.labels,
    ...opt("pool", obj.labels[GKE_NODE_POOL_LABEL]),
    taints: (n.spec?.taints ?? []).map((t, i) => ({
      key: t.key,
      ...opt("value", t.value),
      effect: t.effect,
      source: at(obj, ["spec", "taints", i]),
    })),
    podCIDRs: addresses(obj, cidrTexts, parseCidrOpt, "a CIDR", diagnostics).map((x) => ({
      cidr: x.value,
      source: x.source,
    })),
    internalIPs: ipsOf("InternalIP"),
    externalIPs: ipsOf("ExternalIP"),
    object: obj,
    source: obj.source,
  };
  return { value, diagnostics };
}
