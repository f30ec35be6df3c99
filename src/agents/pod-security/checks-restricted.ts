/**
 * @module agents/pod-security/checks-restricted — the Restricted Pod Security checks, one function
 * per upstream check version (k8s.io/pod-security-admission policy/check_*.go), worded exactly as
 * upstream.
 */
import {
  ALLOWED,
  type CheckResult,
  containersPhrase,
  forbidden,
  inUserNamespace,
  isWindowsPod,
  joinQuote,
  pluralize,
  sortedSet,
} from "./check-result.ts";
import { validSeccompType } from "./checks-baseline.ts";
import { asArray, asObject, asString, type PodSpecView } from "./pod-spec.ts";

export function allowPrivilegeEscalation18(pod: PodSpecView): CheckResult {
  const bad = pod.containers
    .filter((c) => c.securityContext?.["allowPrivilegeEscalation"] !== false)
    .map((c) => c.name);
  if (bad.length === 0) return ALLOWED;
  return forbidden(
    "allowPrivilegeEscalation != false",
    `${containersPhrase(bad)} must set securityContext.allowPrivilegeEscalation=false`,
  );
}

export function allowPrivilegeEscalation125(pod: PodSpecView): CheckResult {
  return isWindowsPod(pod) ? ALLOWED : allowPrivilegeEscalation18(pod);
}

export function capabilitiesRestricted122(pod: PodSpecView): CheckResult {
  const missingDrop: string[] = [];
  const adding: string[] = [];
  const caps: string[] = [];
  for (const c of pod.containers) {
    const capabilities = asObject(c.securityContext?.["capabilities"]);
    if (!capabilities) {
      missingDrop.push(c.name);
      continue;
    }
    if (!asArray(capabilities["drop"]).some((d) => d === "ALL")) missingDrop.push(c.name);
    let addsForbidden = false;
    for (const a of asArray(capabilities["add"])) {
      if (a !== "NET_BIND_SERVICE") {
        addsForbidden = true;
        caps.push(String(a));
      }
    }
    if (addsForbidden) adding.push(c.name);
  }
  const details: string[] = [];
  if (missingDrop.length > 0) {
    details.push(
      `${containersPhrase(missingDrop)} must set securityContext.capabilities.drop=["ALL"]`,
    );
  }
  if (adding.length > 0) {
    details.push(
      `${containersPhrase(adding)} must not include ${joinQuote(sortedSet(caps))} in securityContext.capabilities.add`,
    );
  }
  return details.length === 0
    ? ALLOWED
    : forbidden("unrestricted capabilities", details.join("; "));
}

export function capabilitiesRestricted125(pod: PodSpecView): CheckResult {
  return isWindowsPod(pod) ? ALLOWED : capabilitiesRestricted122(pod);
}

const VOLUME_OK = [
  "configMap",
  "csi",
  "downwardAPI",
  "emptyDir",
  "ephemeral",
  "image",
  "persistentVolumeClaim",
  "projected",
  "secret",
];
/** In upstream's order: the first one present names the volume's type. */
const VOLUME_RESTRICTED = [
  "hostPath",
  "gcePersistentDisk",
  "awsElasticBlockStore",
  "gitRepo",
  "nfs",
  "iscsi",
  "glusterfs",
  "rbd",
  "flexVolume",
  "cinder",
  "cephfs",
  "flocker",
  "fc",
  "azureFile",
  "vsphereVolume",
  "quobyte",
  "azureDisk",
  "photonPersistentDisk",
  "portworxVolume",
  "scaleIO",
  "storageos",
];

const present = (o: Readonly<Record<string, unknown>>, k: string) =>
  o[k] !== undefined && o[k] !== null;

export function restrictedVolumes(pod: PodSpecView): CheckResult {
  const bad: string[] = [];
  const types = new Set<string>();
  for (const v of asArray(pod.spec["volumes"])) {
    const vol = asObject(v) ?? {};
    if (VOLUME_OK.some((k) => present(vol, k))) continue;
    // the API server defaults a volume without any source to emptyDir before admission sees it
    if (!VOLUME_RESTRICTED.some((k) => present(vol, k))) continue;
    bad.push(asString(vol["name"]) ?? "");
    types.add(VOLUME_RESTRICTED.find((k) => present(vol, k)) ?? "unknown");
  }
  if (bad.length === 0) return ALLOWED;
  const list = sortedSet(types);
  return forbidden(
    "restricted volume types",
    `${pluralize("volume", "volumes", bad.length)} ${joinQuote(bad)} ${pluralize("uses", "use", bad.length)} ${pluralize("restricted volume type", "restricted volume types", list.length)} ${joinQuote(list)}`,
  );
}

export function runAsNonRoot10(pod: PodSpecView): CheckResult {
  const setters: string[] = [];
  let podNonRoot = false;
  const podValue = pod.securityContext?.["runAsNonRoot"];
  if (typeof podValue === "boolean") {
    if (!podValue) setters.push("pod");
    else podNonRoot = true;
  }
  const explicit: string[] = [];
  const implicit: string[] = [];
  for (const c of pod.containers) {
    const v = c.securityContext?.["runAsNonRoot"];
    if (typeof v === "boolean") {
      if (!v) explicit.push(c.name);
    } else if (!podNonRoot) {
      implicit.push(c.name);
    }
  }
  if (explicit.length > 0) setters.push(containersPhrase(explicit));
  if (setters.length > 0) {
    return forbidden(
      "runAsNonRoot != true",
      `${setters.join(" and ")} must not set securityContext.runAsNonRoot=false`,
    );
  }
  if (implicit.length > 0) {
    return forbidden(
      "runAsNonRoot != true",
      `pod or ${containersPhrase(implicit)} must set securityContext.runAsNonRoot=true`,
    );
  }
  return ALLOWED;
}

export function runAsNonRoot135(pod: PodSpecView): CheckResult {
  return inUserNamespace(pod) ? ALLOWED : runAsNonRoot10(pod);
}

export function runAsUser123(pod: PodSpecView): CheckResult {
  const setters: string[] = [];
  if (pod.securityContext?.["runAsUser"] === 0) setters.push("pod");
  const bad = pod.containers
    .filter((c) => c.securityContext?.["runAsUser"] === 0)
    .map((c) => c.name);
  if (bad.length > 0) setters.push(containersPhrase(bad));
  if (setters.length === 0) return ALLOWED;
  return forbidden("runAsUser=0", `${setters.join(" and ")} must not set runAsUser=0`);
}

export function runAsUser135(pod: PodSpecView): CheckResult {
  return inUserNamespace(pod) ? ALLOWED : runAsUser123(pod);
}

export function seccompProfileRestricted119(pod: PodSpecView): CheckResult {
  const setters: string[] = [];
  const values = new Set<string>();
  let podSet = false;
  const podProfile = asObject(pod.securityContext?.["seccompProfile"]);
  if (podProfile) {
    if (!validSeccompType(podProfile["type"])) {
      setters.push("pod");
      values.add(String(podProfile["type"] ?? ""));
    } else {
      podSet = true;
    }
  }
  const explicit: string[] = [];
  const implicit: string[] = [];
  for (const c of pod.containers) {
    const profile = asObject(c.securityContext?.["seccompProfile"]);
    if (profile) {
      if (!validSeccompType(profile["type"])) {
        explicit.push(c.name);
        values.add(String(profile["type"] ?? ""));
      }
    } else if (!podSet) {
      implicit.push(c.name);
    }
  }
  if (explicit.length > 0) setters.push(containersPhrase(explicit));
  if (setters.length > 0) {
    return forbidden(
      "seccompProfile",
      `${setters.join(" and ")} must not set securityContext.seccompProfile.type to ${joinQuote(sortedSet(values))}`,
    );
  }
  if (implicit.length > 0) {
    return forbidden(
      "seccompProfile",
      `pod or ${containersPhrase(implicit)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`,
    );
  }
  return ALLOWED;
}

export function seccompProfileRestricted125(pod: PodSpecView): CheckResult {
  return isWindowsPod(pod) ? ALLOWED : seccompProfileRestricted119(pod);
}
