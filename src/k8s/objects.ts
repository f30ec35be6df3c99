/**
 * @module k8s/objects — narrow typed views of the Kubernetes objects podpath reads (Node, Pod,
 * DaemonSet, ConfigMap, Namespace, Service, NetworkPolicy), validated with zod (unknown fields
 * allowed), each keeping the file lines of the fields podpath cites.
 */
import { z } from "zod";
import type { KubeObject } from "../evidence/kube-objects.ts";
import { locatedObject, parseLenient } from "../evidence/lenient-parse.ts";
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { type Cidr, type Ip, tryParseCidr, tryParseIp } from "../net/cidr.ts";

/** The GKE label naming a node's pool. */
export const GKE_NODE_POOL_LABEL = "cloud.google.com/gke-nodepool";

const str = z.string();
const strMap = z.record(z.string(), z.string());

const TaintSchema = z.object({
  key: str,
  value: str.optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
});
const TolerationSchema = z.object({
  key: str.optional(),
  operator: z.enum(["Exists", "Equal"]).optional(),
  value: str.optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute", ""]).optional(),
  tolerationSeconds: z.number().int().optional(),
});
const RequirementSchema = z.object({
  key: str,
  operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
  values: z.array(str).optional(),
});
const NodeSelectorTermSchema = z.object({
  matchExpressions: z.array(RequirementSchema).optional(),
  matchFields: z.array(RequirementSchema).optional(),
});
const AffinitySchema = z.object({
  nodeAffinity: z
    .object({
      requiredDuringSchedulingIgnoredDuringExecution: z
        .object({ nodeSelectorTerms: z.array(NodeSelectorTermSchema) })
        .optional(),
    })
    .optional(),
});
const CapabilitiesSchema = z.object({
  add: z.array(str).optional(),
  drop: z.array(str).optional(),
});
const ContainerSecuritySchema = z.object({
  privileged: z.boolean().optional(),
  capabilities: CapabilitiesSchema.optional(),
  runAsNonRoot: z.boolean().optional(),
  runAsUser: z.number().int().optional(),
  allowPrivilegeEscalation: z.boolean().optional(),
  readOnlyRootFilesystem: z.boolean().optional(),
});
const ContainerSchema = z.object({
  name: str,
  image: str.optional(),
  command: z.array(str).optional(),
  args: z.array(str).optional(),
  securityContext: ContainerSecuritySchema.optional(),
});
const PodSecuritySchema = z.object({
  runAsNonRoot: z.boolean().optional(),
  runAsUser: z.number().int().optional(),
  sysctls: z.array(z.object({ name: str, value: str })).optional(),
});
const PodSpecSchema = z.object({
  nodeName: str.optional(),
  hostNetwork: z.boolean().optional(),
  nodeSelector: strMap.optional(),
  affinity: AffinitySchema.optional(),
  tolerations: z.array(TolerationSchema).optional(),
  containers: z.array(ContainerSchema).optional(),
  initContainers: z.array(ContainerSchema).optional(),
  securityContext: PodSecuritySchema.optional(),
});
const StateSchema = z.object({
  running: z.object({ startedAt: str.optional() }).optional(),
  waiting: z.object({ reason: str.optional(), message: str.optional() }).optional(),
  terminated: z
    .object({ reason: str.optional(), exitCode: z.number().optional(), startedAt: str.optional() })
    .optional(),
});
const ContainerStatusSchema = z.object({
  name: str,
  restartCount: z.number().int().optional(),
  ready: z.boolean().optional(),
  state: StateSchema.optional(),
  lastState: StateSchema.optional(),
});

export type TaintEffect = "NoSchedule" | "PreferNoSchedule" | "NoExecute";

export interface Taint {
  readonly key: string;
  readonly value?: string;
  readonly effect: TaintEffect;
  readonly source: SourceRef;
}

export interface Toleration {
  readonly key?: string;
  /** `Equal` when the manifest leaves it out. */
  readonly operator: "Exists" | "Equal";
  readonly value?: string;
  /** Empty matches every effect. */
  readonly effect?: TaintEffect | "";
  readonly tolerationSeconds?: number;
  /** Absent for the tolerations the DaemonSet controller adds by itself. */
  readonly source?: SourceRef;
}

export interface NodeSelectorRequirement {
  readonly key: string;
  readonly operator: "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt";
  readonly values: readonly string[];
  readonly source: SourceRef;
}

export interface NodeSelectorTerm {
  readonly matchExpressions: readonly NodeSelectorRequirement[];
  readonly matchFields: readonly NodeSelectorRequirement[];
  readonly source: SourceRef;
}

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

export interface ContainerView {
  readonly name: string;
  readonly image?: string;
  readonly command: readonly string[];
  readonly args: readonly string[];
  readonly privileged: boolean;
  readonly capabilities: { readonly add: readonly string[]; readonly drop: readonly string[] };
  readonly runAsNonRoot?: boolean;
  readonly runAsUser?: number;
  readonly allowPrivilegeEscalation?: boolean;
  readonly readOnlyRootFilesystem?: boolean;
  readonly source: SourceRef;
}

export interface ContainerStatusView {
  readonly name: string;
  readonly restartCount: number;
  readonly ready?: boolean;
  readonly state?: "running" | "waiting" | "terminated";
  /** Waiting or terminated reason (`CreateContainerConfigError`, `CrashLoopBackOff`...). */
  readonly reason?: string;
  readonly startedAt?: string;
  readonly source: SourceRef;
}

export interface PodView {
  readonly namespace: string;
  readonly name: string;
  readonly nodeName?: string;
  readonly podIPs: readonly { readonly ip: Ip; readonly source: SourceRef }[];
  readonly hostNetwork: boolean;
  readonly labels: Readonly<Record<string, string>>;
  readonly ownerReferences: readonly {
    readonly kind: string;
    readonly name: string;
    readonly controller: boolean;
  }[];
  readonly containers: readonly ContainerView[];
  readonly initContainers: readonly ContainerView[];
  readonly runAsNonRoot?: boolean;
  readonly sysctls: readonly {
    readonly name: string;
    readonly value: string;
    readonly source: SourceRef;
  }[];
  readonly phase?: string;
  readonly containerStatuses: readonly ContainerStatusView[];
  readonly object: KubeObject;
  readonly source: SourceRef;
}

export interface LabelSelector {
  readonly matchLabels: Readonly<Record<string, string>>;
  readonly matchExpressions: readonly {
    readonly key: string;
    readonly operator: string;
    readonly values: readonly string[];
  }[];
}

export interface DaemonSetView {
  readonly namespace: string;
  readonly name: string;
  readonly selector: LabelSelector;
  readonly templateLabels: Readonly<Record<string, string>>;
  readonly nodeSelector: Readonly<Record<string, string>>;
  readonly nodeSelectorSource?: SourceRef;
  /** Required node affinity terms (ORed); undefined when the template has none. */
  readonly requiredNodeAffinity?: readonly NodeSelectorTerm[];
  readonly tolerations: readonly Toleration[];
  readonly hostNetwork: boolean;
  readonly containers: readonly ContainerView[];
  readonly initContainers: readonly ContainerView[];
  readonly status: {
    readonly desired?: number;
    readonly current?: number;
    readonly ready?: number;
    readonly available?: number;
    readonly misscheduled?: number;
    readonly updated?: number;
  };
  readonly object: KubeObject;
  readonly source: SourceRef;
}

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
  readonly podSelector: LabelSelector;
  readonly policyTypes: readonly string[];
  /** The whole object: policy evaluation reads the rules from here. */
  readonly raw: Readonly<Record<string, unknown>>;
  readonly object: KubeObject;
  readonly source: SourceRef;
}

type Path = readonly (string | number)[];
const at = (obj: KubeObject, path: Path): SourceRef => obj.locate(path) ?? obj.source;
const opt = <K extends string, V>(k: K, v: V | undefined): { [P in K]?: V } =>
  (v === undefined ? {} : { [k]: v }) as { [P in K]?: V };

function wrongKind<T>(obj: KubeObject, want: string): Parsed<T | undefined> {
  return {
    value: undefined,
    diagnostics: [
      {
        code: "KUBE_KIND",
        severity: "error",
        message: `expected a ${want}, found ${obj.kind} ${obj.name}`,
        source: obj.source,
      },
    ],
  };
}

function addresses<T extends Ip | Cidr>(
  obj: KubeObject,
  texts: readonly { text: string; path: Path }[],
  parse: (t: string) => T | undefined,
  what: string,
  diagnostics: Diagnostic[],
): { value: T; source: SourceRef }[] {
  const out: { value: T; source: SourceRef }[] = [];
  for (const { text, path } of texts) {
    const v = parse(text);
    const source = at(obj, path);
    if (v === undefined) {
      diagnostics.push({
        code: "KUBE_SCHEMA",
        severity: "warning",
        message: `${obj.kind} ${obj.name}: ${path.join(".")} is ${JSON.stringify(text)}; expected ${what}`,
        source,
      });
    } else out.push({ value: v, source });
  }
  return out;
}
const parseIpOpt = (t: string) => tryParseIp(t);
const parseCidrOpt = (t: string) => {
  const r = tryParseCidr(t, { allowBareAddress: false });
  return "cidr" in r ? r.cidr : undefined;
};

const NodeSchema = z.object({
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

export function readNode(obj: KubeObject): Parsed<NodeView | undefined> {
  if (obj.kind !== "Node") return wrongKind(obj, "Node");
  const diagnostics: Diagnostic[] = [];
  const n = parseLenient(NodeSchema, locatedObject(obj), diagnostics);
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

function containerViews(
  obj: KubeObject,
  base: Path,
  list: readonly z.output<typeof ContainerSchema>[] | undefined,
): ContainerView[] {
  return (list ?? []).map((c, i) => {
    const sc = c.securityContext;
    return {
      name: c.name,
      ...opt("image", c.image),
      command: c.command ?? [],
      args: c.args ?? [],
      privileged: sc?.privileged === true,
      capabilities: { add: sc?.capabilities?.add ?? [], drop: sc?.capabilities?.drop ?? [] },
      ...opt("runAsNonRoot", sc?.runAsNonRoot),
      ...opt("runAsUser", sc?.runAsUser),
      ...opt("allowPrivilegeEscalation", sc?.allowPrivilegeEscalation),
      ...opt("readOnlyRootFilesystem", sc?.readOnlyRootFilesystem),
      source: at(obj, [...base, i]),
    };
  });
}

const PodSchema = z.object({
  metadata: z
    .object({
      ownerReferences: z
        .array(z.object({ kind: str, name: str, controller: z.boolean().optional() }))
        .optional(),
    })
    .optional(),
  spec: PodSpecSchema.optional(),
  status: z
    .object({
      phase: str.optional(),
      podIP: str.optional(),
      podIPs: z.array(z.object({ ip: str })).optional(),
      containerStatuses: z.array(ContainerStatusSchema).optional(),
    })
    .optional(),
});

export function readPod(obj: KubeObject): Parsed<PodView | undefined> {
  if (obj.kind !== "Pod") return wrongKind(obj, "Pod");
  const diagnostics: Diagnostic[] = [];
  const p = parseLenient(PodSchema, locatedObject(obj), diagnostics);
  if (!p) return { value: undefined, diagnostics };
  const ipTexts = p.status?.podIPs?.length
    ? p.status.podIPs.map((x, i) => ({ text: x.ip, path: ["status", "podIPs", i, "ip"] as Path }))
    : p.status?.podIP
      ? [{ text: p.status.podIP, path: ["status", "podIP"] as Path }]
      : [];
  const value: PodView = {
    namespace: obj.namespace ?? "default",
    name: obj.name,
    ...opt("nodeName", p.spec?.nodeName),
    podIPs: addresses(obj, ipTexts, parseIpOpt, "an IP address", diagnostics).map((x) => ({
      ip: x.value,
      source: x.source,
    })),
    hostNetwork: p.spec?.hostNetwork === true,
    labels: obj.labels,
    ownerReferences: (p.metadata?.ownerReferences ?? []).map((o) => ({
      kind: o.kind,
      name: o.name,
      controller: o.controller === true,
    })),
    containers: containerViews(obj, ["spec", "containers"], p.spec?.containers),
    initContainers: containerViews(obj, ["spec", "initContainers"], p.spec?.initContainers),
    ...opt("runAsNonRoot", p.spec?.securityContext?.runAsNonRoot),
    sysctls: (p.spec?.securityContext?.sysctls ?? []).map((s, i) => ({
      name: s.name,
      value: s.value,
      source: at(obj, ["spec", "securityContext", "sysctls", i]),
    })),
    ...opt("phase", p.status?.phase),
    containerStatuses: (p.status?.containerStatuses ?? []).map((s, i) => {
      const st = s.state;
      const state: ContainerStatusView["state"] = st?.running
        ? "running"
        : st?.waiting
          ? "waiting"
          : st?.terminated
            ? "terminated"
            : undefined;
      return {
        name: s.name,
        restartCount: s.restartCount ?? 0,
        ...opt("ready", s.ready),
        ...opt("state", state),
        ...opt("reason", st?.waiting?.reason ?? st?.terminated?.reason),
        ...opt("startedAt", st?.running?.startedAt ?? st?.terminated?.startedAt),
        source: at(obj, ["status", "containerStatuses", i]),
      } satisfies ContainerStatusView;
    }),
    object: obj,
    source: obj.source,
  };
  return { value, diagnostics };
}

const LabelSelectorSchema = z.object({
  matchLabels: strMap.optional(),
  matchExpressions: z
    .array(z.object({ key: str, operator: str, values: z.array(str).optional() }))
    .optional(),
});
const toSelector = (s: z.output<typeof LabelSelectorSchema> | undefined): LabelSelector => ({
  matchLabels: s?.matchLabels ?? {},
  matchExpressions: (s?.matchExpressions ?? []).map((e) => ({
    key: e.key,
    operator: e.operator,
    values: e.values ?? [],
  })),
});

const DaemonSetSchema = z.object({
  spec: z
    .object({
      selector: LabelSelectorSchema.optional(),
      template: z
        .object({
          metadata: z.object({ labels: strMap.optional() }).optional(),
          spec: PodSpecSchema.optional(),
        })
        .optional(),
    })
    .optional(),
  status: z
    .object({
      desiredNumberScheduled: z.number().optional(),
      currentNumberScheduled: z.number().optional(),
      numberReady: z.number().optional(),
      numberAvailable: z.number().optional(),
      numberMisscheduled: z.number().optional(),
      updatedNumberScheduled: z.number().optional(),
    })
    .optional(),
});

export function readDaemonSet(obj: KubeObject): Parsed<DaemonSetView | undefined> {
  if (obj.kind !== "DaemonSet") return wrongKind(obj, "DaemonSet");
  const diagnostics: Diagnostic[] = [];
  const d = parseLenient(DaemonSetSchema, locatedObject(obj), diagnostics);
  if (!d) return { value: undefined, diagnostics };
  const spec = d.spec?.template?.spec;
  const tpl: Path = ["spec", "template", "spec"];
  const required = spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  const reqPath: Path = [
    ...tpl,
    "affinity",
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
  ];
  const requirement =
    (termPath: Path, kind: "matchExpressions" | "matchFields") =>
    (r: z.output<typeof RequirementSchema>, i: number): NodeSelectorRequirement => ({
      key: r.key,
      operator: r.operator,
      values: r.values ?? [],
      source: at(obj, [...termPath, kind, i]),
    });
  const s = d.status;
  const value: DaemonSetView = {
    namespace: obj.namespace ?? "default",
    name: obj.name,
    selector: toSelector(d.spec?.selector),
    templateLabels: d.spec?.template?.metadata?.labels ?? {},
    nodeSelector: spec?.nodeSelector ?? {},
    ...opt("nodeSelectorSource", obj.locate([...tpl, "nodeSelector"])),
    ...opt(
      "requiredNodeAffinity",
      required?.nodeSelectorTerms.map((t, i) => {
        const termPath: Path = [...reqPath, i];
        return {
          matchExpressions: (t.matchExpressions ?? []).map(
            requirement(termPath, "matchExpressions"),
          ),
          matchFields: (t.matchFields ?? []).map(requirement(termPath, "matchFields")),
          source: at(obj, termPath),
        };
      }),
    ),
    tolerations: (spec?.tolerations ?? []).map((t, i) => ({
      ...opt("key", t.key || undefined),
      operator: t.operator ?? "Equal",
      ...opt("value", t.value),
      ...opt("effect", t.effect),
      ...opt("tolerationSeconds", t.tolerationSeconds),
      source: at(obj, [...tpl, "tolerations", i]),
    })),
    hostNetwork: spec?.hostNetwork === true,
    containers: containerViews(obj, [...tpl, "containers"], spec?.containers),
    initContainers: containerViews(obj, [...tpl, "initContainers"], spec?.initContainers),
    status: {
      ...opt("desired", s?.desiredNumberScheduled),
      ...opt("current", s?.currentNumberScheduled),
      ...opt("ready", s?.numberReady),
      ...opt("available", s?.numberAvailable),
      ...opt("misscheduled", s?.numberMisscheduled),
      ...opt("updated", s?.updatedNumberScheduled),
    },
    object: obj,
    source: obj.source,
  };
  return { value, diagnostics };
}

const ConfigMapSchema = z.object({ data: strMap.optional() });

export function readConfigMap(obj: KubeObject): Parsed<ConfigMapView | undefined> {
  if (obj.kind !== "ConfigMap") return wrongKind(obj, "ConfigMap");
  const diagnostics: Diagnostic[] = [];
  const c = parseLenient(ConfigMapSchema, locatedObject(obj), diagnostics);
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

const ServiceSchema = z.object({
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

export function readService(obj: KubeObject): Parsed<ServiceView | undefined> {
  if (obj.kind !== "Service") return wrongKind(obj, "Service");
  const diagnostics: Diagnostic[] = [];
  const s = parseLenient(ServiceSchema, locatedObject(obj), diagnostics);
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

const NetworkPolicySchema = z.object({
  spec: z
    .object({ podSelector: LabelSelectorSchema.optional(), policyTypes: z.array(str).optional() })
    .optional(),
});

export function readNetworkPolicy(obj: KubeObject): Parsed<NetworkPolicyView | undefined> {
  if (obj.kind !== "NetworkPolicy") return wrongKind(obj, "NetworkPolicy");
  const diagnostics: Diagnostic[] = [];
  const n = parseLenient(NetworkPolicySchema, locatedObject(obj), diagnostics);
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
