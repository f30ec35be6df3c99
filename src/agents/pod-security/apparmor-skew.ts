/**
 * @module agents/pod-security/apparmor-skew — what the API server does to a Pod's AppArmor
 * annotations before admission (Kubernetes >= 1.30, `applyAppArmorVersionSkew` in
 * pkg/registry/core/pod/strategy.go): a container's deprecated annotation
 * `container.apparmor.security.beta.kubernetes.io/<name>` is copied into that container's
 * `securityContext.appArmorProfile` when the container sets no profile itself, the value is valid
 * (`unconfined`, `runtime/default`, `localhost/<profile>`) and differs from the pod-level profile.
 * Pod Security then sees both, and names both in its message. Windows pods are left alone, and so
 * are pod templates (only Pods are created through this strategy). Pure: returns a copy.
 */
import { asArray, asObject, asString, type JsonObject } from "./pod-spec.ts";

const PREFIX = "container.apparmor.security.beta.kubernetes.io/";

/** The field the server derives from an annotation value; undefined when it derives none. */
function fieldFor(annotation: string): JsonObject | undefined {
  if (annotation === "unconfined") return { type: "Unconfined" };
  if (annotation === "runtime/default") return { type: "RuntimeDefault" };
  if (annotation.startsWith("localhost/")) {
    const profile = annotation.slice("localhost/".length);
    if (profile !== "" && profile.length <= 4095)
      return { type: "Localhost", localhostProfile: profile };
  }
  return undefined;
}

function sameProfile(a: JsonObject, b: JsonObject | undefined): boolean {
  return (
    b !== undefined &&
    a["type"] === b["type"] &&
    (a["localhostProfile"] ?? undefined) === (b["localhostProfile"] ?? undefined)
  );
}

/** The Pod as the API server hands it to admission, for a cluster of Kubernetes minor `minor`. */
export function withAppArmorSkew(pod: JsonObject, minor: number): JsonObject {
  if (minor < 30 || pod["kind"] !== "Pod") return pod;
  const spec = asObject(pod["spec"]);
  const annotations = asObject(asObject(pod["metadata"])?.["annotations"]);
  if (!spec || !annotations) return pod;
  if (asString(asObject(spec["os"])?.["name"]) === "windows") return pod;
  const podProfile = asObject(asObject(spec["securityContext"])?.["appArmorProfile"]);
  let changed = false;
  const sync = (c: unknown): unknown => {
    const ctr = asObject(c);
    const name = asString(ctr?.["name"]);
    if (!ctr || name === undefined) return c;
    const annotation = asString(annotations[PREFIX + name]);
    const sc = asObject(ctr["securityContext"]);
    if (annotation === undefined || sc?.["appArmorProfile"] != null) return c;
    const field = fieldFor(annotation);
    if (field === undefined || sameProfile(field, podProfile)) return c;
    changed = true;
    return { ...ctr, securityContext: { ...(sc ?? {}), appArmorProfile: field } };
  };
  const out: Record<string, unknown> = { ...spec };
  for (const key of ["initContainers", "containers", "ephemeralContainers"]) {
    if (Array.isArray(spec[key])) out[key] = asArray(spec[key]).map(sync);
  }
  return changed ? { ...pod, spec: out } : pod;
}
