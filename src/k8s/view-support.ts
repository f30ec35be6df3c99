/**
 * @module k8s/view-support — what the typed views share: the zod schemas of pod templates,
 * selectors, taints and tolerations, their view types, and the helpers that cite field lines.
 */
import type { z } from "zod";
import type { KubeObject } from "../evidence/kube-objects.ts";
import { lazySchema } from "../evidence/lazy-zod.ts";
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { type Cidr, type Ip, tryParseCidr, tryParseIp } from "../net/cidr.ts";

/** The schemas the views share, built (and zod loaded) on first use. */
export const viewSchemas = lazySchema((z) => {
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
  const LabelSelectorSchema = z.object({
    matchLabels: strMap.optional(),
    matchExpressions: z
      .array(z.object({ key: str, operator: str, values: z.array(str).optional() }))
      .optional(),
  });
  return {
    str,
    strMap,
    TaintSchema,
    TolerationSchema,
    RequirementSchema,
    NodeSelectorTermSchema,
    AffinitySchema,
    CapabilitiesSchema,
    ContainerSecuritySchema,
    ContainerSchema,
    PodSecuritySchema,
    PodSpecSchema,
    LabelSelectorSchema,
  };
});
type ViewSchemas = ReturnType<typeof viewSchemas>;

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

export interface LabelSelectorSpec {
  readonly matchLabels: Readonly<Record<string, string>>;
  readonly matchExpressions: readonly {
    readonly key: string;
    readonly operator: string;
    readonly values: readonly string[];
  }[];
}

export type Path = readonly (string | number)[];
export const at = (obj: KubeObject, path: Path): SourceRef => obj.locate(path) ?? obj.source;
export const opt = <K extends string, V>(k: K, v: V | undefined): { [P in K]?: V } =>
  (v === undefined ? {} : { [k]: v }) as { [P in K]?: V };

export function wrongKind<T>(obj: KubeObject, want: string): Parsed<T | undefined> {
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

export function addresses<T extends Ip | Cidr>(
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
export const parseIpOpt = (t: string) => tryParseIp(t);
export const parseCidrOpt = (t: string) => {
  const r = tryParseCidr(t, { allowBareAddress: false });
  return "cidr" in r ? r.cidr : undefined;
};

export function containerViews(
  obj: KubeObject,
  base: Path,
  list: readonly z.output<ViewSchemas["ContainerSchema"]>[] | undefined,
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

export const toSelector = (
  s: z.output<ViewSchemas["LabelSelectorSchema"]> | undefined,
): LabelSelectorSpec => ({
  matchLabels: s?.matchLabels ?? {},
  matchExpressions: (s?.matchExpressions ?? []).map((e) => ({
    key: e.key,
    operator: e.operator,
    values: e.values ?? [],
  })),
});
