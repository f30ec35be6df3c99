/**
 * @module k8s/objects — narrow typed views of the Kubernetes objects podpath reads, validated with
 * zod (unknown fields allowed), each keeping the file lines of the fields podpath cites. Node, Pod
 * and DaemonSet live in their own modules and are re-exported here; ConfigMap, Namespace, Service
 * and NetworkPolicy are small enough to live here.
 */
import type { KubeObject } from "../evidence/kube-objects.ts";
import { lazySchema } from "../evidence/lazy-zod.ts";
import { locatedObject, parseLenient } from "../evidence/lenient-parse.ts";
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import type { Ip } from "../net/cidr.ts";
import {
  addresses,
  type LabelSelectorSpec,
  opt,
  type Path,
  parseIpOpt,
  toSelector,
  viewSchemas,
  wrongKind,
} from "./view-support.ts";

export { type DaemonSetView, readDaemonSet } from "./daemonset-view.ts";
export { GKE_NODE_POOL_LABEL, type NodeView, readNode } from "./node-view.ts";
export { type ContainerStatusView, type PodView, readPod } from "./pod-view.ts";
export type {
  ContainerView,
  LabelSelectorSpec,
  NodeSelectorRequirement,
  NodeSelectorTerm,
  Taint,
  TaintEffect,
  Toleration,
} from "./view-support.ts";

export interface ConfigMapView {
  readonly namespace: string;
  readonly name: string;
  readonly data: Readonly<Record<string, string>>;
  readonly object: KubeObject;
  readonly source: SourceRef;
}

export interface NamespaceView {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly object: KubeObject;
  readonly source: SourceRef;
}

export interface ServicePort {
  readonly name?: string;
  readonly protocol: string;
  readonly port: number;
  readonly targetPort?: number | string;
  readonly nodePort?: number;
}

export interface ServiceView {
  readonly namespace: string;
  readonly name: string;
  readonly type: string;
  /** Cluster IPs (none for headless services). */
  readonly clusterIPs: readonly { readonly ip: Ip; readonly source: SourceRef }[];
  readonly ports: readonly ServicePort[];
  readonly selector: Readonly<Record<string, string>>;
  readonly object: KubeObject;
  readonly source: SourceRef;
}

export interface NetworkPolicyView {
  readonly namespace: string;
  readonly name: string;
  readonly podSelector: LabelSelectorSpec;
  readonly policyTypes: readonly string[];
  /** The whole object: policy evaluation reads the rules from here. */
  readonly raw: Readonly<Record<string, unknown>>;
  readonly object: KubeObject;
  readonly source: SourceRef;
}

const ConfigMapSchema = lazySchema((z) => z.object({ data: viewSchemas().strMap.optional() }));

export function readConfigMap(obj: KubeObject): Parsed<ConfigMapView | undefined> {
  if (obj.kind !== "ConfigMap") return wrongKind(obj, "ConfigMap");
  const diagnostics: Diagnostic[] = [];
  const c = parseLenient(ConfigMapSchema(), locatedObject(obj), diagnostics);
  if (!c) return { value: undefined, diagnostics };
  return {
    value: {
      namespace: obj.namespace ?? "default",
      name: obj.name,
      data: c.data ?? {},
      object: obj,
      source: obj.source,
    },
    diagnostics,
  };
}

export function readNamespace(obj: KubeObject): Parsed<NamespaceView | undefined> {
  if (obj.kind !== "Namespace") return wrongKind(obj, "Namespace");
  return {
    value: { name: obj.name, labels: obj.labels, object: obj, source: obj.source },
    diagnostics: [],
  };
}

const ServiceSchema = lazySchema((z) => {
  const { str, strMap } = viewSchemas();
  return z.object({
    spec: z
      .object({
        type: str.optional(),
        clusterIP: str.optional(),
        clusterIPs: z.array(str).optional(),
        selector: strMap.optional(),
        ports: z
          .array(
            z.object({
              name: str.optional(),
              protocol: str.optional(),
              port: z.number().int(),
              targetPort: z.union([z.number().int(), str]).optional(),
              nodePort: z.number().int().optional(),
            }),
          )
          .optional(),
      })
      .optional(),
  });
});

export function readService(obj: KubeObject): Parsed<ServiceView | undefined> {
  if (obj.kind !== "Service") return wrongKind(obj, "Service");
  const diagnostics: Diagnostic[] = [];
  const s = parseLenient(ServiceSchema(), locatedObject(obj), diagnostics);
  if (!s) return { value: undefined, diagnostics };
  const texts = s.spec?.clusterIPs?.length
    ? s.spec.clusterIPs.map((text, i) => ({ text, path: ["spec", "clusterIPs", i] as Path }))
    : s.spec?.clusterIP
      ? [{ text: s.spec.clusterIP, path: ["spec", "clusterIP"] as Path }]
      : [];
  const value: ServiceView = {
    namespace: obj.namespace ?? "default",
    name: obj.name,
    type: s.spec?.type ?? "ClusterIP",
    clusterIPs: addresses(
      obj,
      texts.filter((t) => t.text !== "None" && t.text !== ""),
      parseIpOpt,
      "an IP address or None",
      diagnostics,
    ).map((x) => ({ ip: x.value, source: x.source })),
    ports: (s.spec?.ports ?? []).map((p) => ({
      ...opt("name", p.name),
      protocol: p.protocol ?? "TCP",
      port: p.port,
      ...opt("targetPort", p.targetPort),
      ...opt("nodePort", p.nodePort),
    })),
    selector: s.spec?.selector ?? {},
    object: obj,
    source: obj.source,
  };
  return { value, diagnostics };
}

const NetworkPolicySchema = lazySchema((z) => {
  const { str, LabelSelectorSchema } = viewSchemas();
  return z.object({
    spec: z
      .object({ podSelector: LabelSelectorSchema.optional(), policyTypes: z.array(str).optional() })
      .optional(),
  });
});

export function readNetworkPolicy(obj: KubeObject): Parsed<NetworkPolicyView | undefined> {
  if (obj.kind !== "NetworkPolicy") return wrongKind(obj, "NetworkPolicy");
  const diagnostics: Diagnostic[] = [];
  const n = parseLenient(NetworkPolicySchema(), locatedObject(obj), diagnostics);
  if (!n) return { value: undefined, diagnostics };
  return {
    value: {
      namespace: obj.namespace ?? "default",
      name: obj.name,
      podSelector: toSelector(n.spec?.podSelector),
      policyTypes: n.spec?.policyTypes ?? [],
      raw: obj.raw,
      object: obj,
      source: obj.source,
    },
    diagnostics,
  };
}
