/**
 * @module k8s/pod-view — a Pod as podpath reads it: node, IPs, owners, containers with their
 * security context, pod sysctls, phase and container statuses.
 */
import type { KubeObject } from "../evidence/kube-objects.ts";
import { lazySchema } from "../evidence/lazy-zod.ts";
import { locatedObject, parseLenient } from "../evidence/lenient-parse.ts";
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import type { Ip } from "../net/cidr.ts";
import {
  addresses,
  at,
  type ContainerView,
  containerViews,
  opt,
  type Path,
  parseIpOpt,
  viewSchemas,
  wrongKind,
} from "./view-support.ts";

const StateSchema = lazySchema((z) => {
  const { str } = viewSchemas();
  return z.object({
    running: z.object({ startedAt: str.optional() }).optional(),
    waiting: z.object({ reason: str.optional(), message: str.optional() }).optional(),
    terminated: z
      .object({
        reason: str.optional(),
        exitCode: z.number().optional(),
        startedAt: str.optional(),
      })
      .optional(),
  });
});
const ContainerStatusSchema = lazySchema((z) => {
  const { str } = viewSchemas();
  return z.object({
    name: str,
    restartCount: z.number().int().optional(),
    ready: z.boolean().optional(),
    state: StateSchema().optional(),
    lastState: StateSchema().optional(),
  });
});

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
  /** status.podIPs, or status.podIP when the list is absent. */
  readonly podIPs: readonly { readonly ip: Ip; readonly source: SourceRef }[];
  /** status.podIP as written (the primary address), else the first of podIPs. */
  readonly podIP?: { readonly ip: Ip; readonly source: SourceRef };
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

const PodSchema = lazySchema((z) => {
  const { str, PodSpecSchema } = viewSchemas();
  return z.object({
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
        containerStatuses: z.array(ContainerStatusSchema()).optional(),
      })
      .optional(),
  });
});

export function readPod(obj: KubeObject): Parsed<PodView | undefined> {
  if (obj.kind !== "Pod") return wrongKind(obj, "Pod");
  const diagnostics: Diagnostic[] = [];
  const p = parseLenient(PodSchema(), locatedObject(obj), diagnostics);
  if (!p) return { value: undefined, diagnostics };
  const ipTexts = p.status?.podIPs?.length
    ? p.status.podIPs.map((x, i) => ({ text: x.ip, path: ["status", "podIPs", i, "ip"] as Path }))
    : p.status?.podIP
      ? [{ text: p.status.podIP, path: ["status", "podIP"] as Path }]
      : [];
  const podIPs = addresses(obj, ipTexts, parseIpOpt, "an IP address", diagnostics).map((x) => ({
    ip: x.value,
    source: x.source,
  }));
  const primaryText = p.status?.podIPs?.length ? p.status.podIP : undefined;
  const primary = primaryText
    ? (addresses(
        obj,
        [{ text: primaryText, path: ["status", "podIP"] }],
        parseIpOpt,
        "an IP address",
        diagnostics,
      ).map((x) => ({ ip: x.value, source: x.source }))[0] ?? podIPs[0])
    : podIPs[0];
  const value: PodView = {
    namespace: obj.namespace ?? "default",
    name: obj.name,
    ...opt("nodeName", p.spec?.nodeName),
    podIPs,
    ...opt("podIP", primary),
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
