/**
 * @module k8s/daemonset-view — a DaemonSet as podpath reads it: selector, template labels, node
 * selection (nodeSelector, required node affinity, tolerations), containers and status.
 */
import type { z } from "zod";
import type { KubeObject } from "../evidence/kube-objects.ts";
import { lazySchema } from "../evidence/lazy-zod.ts";
import { locatedObject, parseLenient } from "../evidence/lenient-parse.ts";
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import {
  at,
  type ContainerView,
  containerViews,
  type LabelSelectorSpec,
  type NodeSelectorRequirement,
  type NodeSelectorTerm,
  opt,
  type Path,
  type Toleration,
  toSelector,
  viewSchemas,
  wrongKind,
} from "./view-support.ts";

export interface DaemonSetView {
  readonly namespace: string;
  readonly name: string;
  readonly selector: LabelSelectorSpec;
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

const DaemonSetSchema = lazySchema((z) => {
  const { LabelSelectorSchema, PodSpecSchema, strMap } = viewSchemas();
  return z.object({
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
});

export function readDaemonSet(obj: KubeObject): Parsed<DaemonSetView | undefined> {
  if (obj.kind !== "DaemonSet") return wrongKind(obj, "DaemonSet");
  const diagnostics: Diagnostic[] = [];
  const d = parseLenient(DaemonSetSchema(), locatedObject(obj), diagnostics);
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
    (
      r: z.output<ReturnType<typeof viewSchemas>["RequirementSchema"]>,
      i: number,
    ): NodeSelectorRequirement => ({
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
