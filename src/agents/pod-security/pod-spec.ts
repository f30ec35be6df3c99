/**
 * @module agents/pod-security/pod-spec — finds the pod metadata and spec inside a Pod or a pod
 * controller (Deployment, DaemonSet, StatefulSet, ReplicaSet, ReplicationController, Job, CronJob,
 * PodTemplate), as Pod Security Admission's PodSpecExtractor does, plus the small typed views of
 * untyped JSON that the checks read.
 */

export type JsonObject = Readonly<Record<string, unknown>>;

export function asObject(v: unknown): JsonObject | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as JsonObject) : undefined;
}

export function asArray(v: unknown): readonly unknown[] {
  return Array.isArray(v) ? v : [];
}

export function asString(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** A container as the checks see it. */
export interface SpecContainerView {
  readonly name: string;
  readonly kind: "initContainer" | "container" | "ephemeralContainer";
  readonly index: number;
  readonly raw: JsonObject;
  readonly securityContext: JsonObject | undefined;
}

export interface PodSpecView {
  readonly metadata: JsonObject;
  readonly spec: JsonObject;
  readonly securityContext: JsonObject | undefined;
  /** initContainers, then containers, then ephemeralContainers (PSA's visitor order). */
  readonly containers: readonly SpecContainerView[];
  /** Path of the pod spec inside the object, e.g. `["spec","template","spec"]`. */
  readonly specPath: readonly string[];
  /** True for a controller (checked for warn and audit only), false for a Pod. */
  readonly isController: boolean;
}

/** Where each kind keeps its pod template (metadata and spec), as PSA's DefaultPodSpecExtractor. */
const TEMPLATE_PATHS: Readonly<Record<string, readonly string[]>> = {
  Pod: [],
  PodTemplate: ["template"],
  ReplicationController: ["spec", "template"],
  ReplicaSet: ["spec", "template"],
  Deployment: ["spec", "template"],
  DaemonSet: ["spec", "template"],
  StatefulSet: ["spec", "template"],
  Job: ["spec", "template"],
  CronJob: ["spec", "jobTemplate", "spec", "template"],
};

/** The kinds that carry a pod spec. */
export const POD_KINDS: readonly string[] = Object.keys(TEMPLATE_PATHS);

/**
 * The pod view of an object, or undefined when its kind has no pod spec (or a controller has no
 * template, which PSA also skips).
 */
export function podViewOf(object: JsonObject): PodSpecView | undefined {
  const kind = asString(object["kind"]);
  if (kind === undefined) return undefined;
  const path = TEMPLATE_PATHS[kind];
  if (path === undefined) return undefined;
  let node: JsonObject | undefined = object;
  for (const key of path) node = asObject(node?.[key]);
  if (node === undefined) return undefined;
  const spec = asObject(node["spec"]);
  if (spec === undefined) return undefined;
  const metadata = asObject(node["metadata"]) ?? {};
  const containers: SpecContainerView[] = [];
  const visit = (key: string, kindName: SpecContainerView["kind"]) => {
    asArray(spec[key]).forEach((c, index) => {
      const raw = asObject(c) ?? {};
      containers.push({
        name: asString(raw["name"]) ?? "",
        kind: kindName,
        index,
        raw,
        securityContext: asObject(raw["securityContext"]),
      });
    });
  };
  visit("initContainers", "initContainer");
  visit("containers", "container");
  visit("ephemeralContainers", "ephemeralContainer");
  return {
    metadata,
    spec,
    securityContext: asObject(spec["securityContext"]),
    containers,
    specPath: [...path, "spec"],
    isController: kind !== "Pod",
  };
}
