/**
 * @module agents/pod-security/predict — will this pod be admitted, and if not, what exactly will
 * the user see? Pod Security Admission (level and version from the namespace labels), API
 * validation of sysctls on hostNetwork pods, the kubelet's sysctl allowlist, and GKE Autopilot.
 *
 * API (for plans and checks that propose manifests):
 *
 * ```ts
 * predictAdmission(podOrWorkload, {
 *   namespaceLabels?: Record<string, string>,     // pod-security.kubernetes.io/* labels
 *   kubeletConfig?: KubeletSysctlConfig,          // from readKubeletSysctlConfig; absent = unknown
 *   platform?: "gke-autopilot" | "gke-standard" | "generic",
 *   version?: "v1.N" | "latest",                  // Kubernetes minor of the cluster (default latest)
 *   kernelVersion?: string,                       // node kernel, for kernel-gated safe sysctls
 * }) → {
 *   podSecurity: { allowed, level, version, violations, message, warnings, policyErrors },
 *   apiValidation: { allowed, message },
 *   kubelet: { outcome: "ok" | "SysctlForbidden" | "unknown", message, needs?, command? },
 *   autopilot?: { allowed, violations, message, notes },
 *   allowed: "yes" | "no" | "unknown",
 * }
 * ```
 * `podOrWorkload` is a Pod, a pod controller (Deployment, DaemonSet, …) or a bare PodSpec.
 */
import { withAppArmorSkew } from "./apparmor-skew.ts";
import { admit, evaluatePod, forbiddenDetail, type PodSecurityResult } from "./evaluate.ts";
import { type AutopilotVerdict, checkAutopilot } from "./gke-autopilot.ts";
import { configzCommand, type KubeletSysctlConfig } from "./kubelet-config.ts";
import {
  kubeletAdmitSysctls,
  kubeletSafeSysctls,
  normalizeSysctlName,
  type PodSysctl,
  sysctlNamespace,
} from "./kubelet-sysctls.ts";
import {
  asArray,
  asObject,
  asString,
  type JsonObject,
  type PodSpecView,
  podViewOf,
  type SpecContainerView,
} from "./pod-spec.ts";
import {
  effectiveMinor,
  formatVersion,
  type PolicyVersion,
  parseVersion,
  policyFromLabels,
} from "./policy-level.ts";

export type Platform = "gke-autopilot" | "gke-standard" | "generic";

export interface PredictOptions {
  readonly namespaceLabels?: Readonly<Record<string, string>>;
  readonly kubeletConfig?: KubeletSysctlConfig;
  readonly platform?: Platform;
  /** The cluster's Kubernetes version, `v1.N` or `latest`. */
  readonly version?: string | PolicyVersion;
  readonly kernelVersion?: string;
  /** GKE Autopilot with `--workload-policies=allow-net-admin`. */
  readonly allowNetAdmin?: boolean;
}

export interface PodSecurityPrediction
  extends Pick<PodSecurityResult, "allowed" | "level" | "version" | "violations" | "message"> {
  /** `Warning: would violate PodSecurity …` lines kubectl prints. */
  readonly warnings: readonly string[];
  /** Bad `pod-security.kubernetes.io/*` labels, as PSA's audit annotation words them. */
  readonly policyErrors: readonly string[];
}

export interface KubeletPrediction {
  readonly outcome: "ok" | "SysctlForbidden" | "unknown";
  readonly message: string;
  /** What would make it pass, e.g. `allowedUnsafeSysctls: ["net.ipv4.ip_forward"]` on the node. */
  readonly needs?: string;
  /** The command that tells what the node allows. */
  readonly command?: string;
}

export interface AdmissionPrediction {
  readonly podSecurity: PodSecurityPrediction;
  readonly apiValidation: { readonly allowed: boolean; readonly message: string };
  readonly kubelet: KubeletPrediction;
  readonly autopilot?: AutopilotVerdict;
  /** The overall answer: "unknown" when only missing evidence (the kubelet config) leaves it open. */
  readonly allowed: "yes" | "no" | "unknown";
}

function toPodView(input: JsonObject): { pod: PodSpecView; name: string } | undefined {
  const view = podViewOf(input);
  if (view) {
    const meta = asObject(input["metadata"]);
    return { pod: view, name: asString(meta?.["name"]) ?? "" };
  }
  if (Array.isArray(input["containers"])) {
    const wrapped = podViewOf({ kind: "Pod", metadata: {}, spec: input });
    return wrapped ? { pod: wrapped, name: "" } : undefined;
  }
  return undefined;
}

function podSysctls(pod: PodSpecView): PodSysctl[] {
  return asArray(pod.securityContext?.["sysctls"]).map((s) => {
    const o = asObject(s);
    return { name: asString(o?.["name"]) ?? "", value: String(o?.["value"] ?? "") };
  });
}

function needsFor(name: string, hostNetwork: boolean): string {
  if (hostNetwork && sysctlNamespace(name) === "net") {
    return `${name} is a network-namespace sysctl: it cannot be set on a hostNetwork pod at all; drop hostNetwork`;
  }
  return `the node's kubelet must allow it: KubeletConfiguration allowedUnsafeSysctls: ["${name}"] (or --allowed-unsafe-sysctls=${name}; "net.ipv4.*" also covers it), on every node the pod can land on`;
}

const CONTAINER_FIELDS: Readonly<Record<SpecContainerView["kind"], string>> = {
  initContainer: "initContainers",
  container: "containers",
  ephemeralContainer: "ephemeralContainers",
};

/**
 * API validation since Kubernetes 1.30 (kubernetes/kubernetes#123520; the documentation says
 * 1.12 to 1.29 did not enforce it; the message checked against the real 1.36 API server):
 * `procMount: Unmasked` needs the pod in a user namespace (`hostUsers: false`); one error per
 * container, in the server's order.
 */
function unmaskedProcMountErrors(pod: PodSpecView, prefix: string): string[] {
  if (pod.spec["hostUsers"] === false) return [];
  const order: SpecContainerView["kind"][] = ["container", "initContainer", "ephemeralContainer"];
  return order.flatMap((kind) =>
    pod.containers
      .filter((c) => c.kind === kind && c.securityContext?.["procMount"] === "Unmasked")
      .map(
        (c) =>
          `${prefix}.${CONTAINER_FIELDS[kind]}[${c.index}].securityContext.procMount: Invalid value: "Unmasked": \`hostUsers\` must be false to use \`Unmasked\``,
      ),
  );
}

/**
 * Predicts admission of a pod or pod template. See the module header for the shape.
 *
 * @example
 * predictAdmission(deployment, { namespaceLabels: { "pod-security.kubernetes.io/enforce": "baseline" } })
 *   .podSecurity.message  // 'Warning: would violate PodSecurity "baseline:latest": privileged (…)'
 */
export function predictAdmission(
  input: JsonObject,
  opts: PredictOptions = {},
): AdmissionPrediction | undefined {
  if (!toPodView(input)) return undefined;
  const version: PolicyVersion =
    opts.version === undefined
      ? { latest: true }
      : typeof opts.version === "string"
        ? parseVersion(opts.version).version
        : opts.version;
  const minor = effectiveMinor(version);
  // a Pod is admitted as the API server stores it: its AppArmor annotations synced to fields
  const serverInput = withAppArmorSkew(input, minor);
  const found = toPodView(serverInput);
  if (!found) return undefined;
  const { pod, name } = found;

  // Pod Security: the namespace's own level and version decide; the cluster version caps it.
  const { policy, errors } = policyFromLabels(opts.namespaceLabels);
  const object: JsonObject = podViewOf(serverInput)
    ? serverInput
    : { kind: "Pod", metadata: {}, spec: input };
  const response = admit(object, policy, minor);
  const violations = evaluatePod(pod, policy.enforce, minor);
  const podError = response?.error ?? response?.podError ?? "";
  const podSecurity: PodSecurityPrediction = {
    allowed: violations.length === 0,
    level: policy.enforce.level,
    version: formatVersion(policy.enforce.version),
    violations,
    message:
      violations.length === 0
        ? ""
        : podError !== ""
          ? podError
          : `violates PodSecurity "${policy.enforce.level}:${formatVersion(policy.enforce.version)}": ${forbiddenDetail(violations)}`,
    warnings: response?.warnings ?? [],
    policyErrors: errors,
  };

  // API validation (k8s >= 1.29): namespaced sysctls shared with the host are invalid.
  const sysctls = podSysctls(pod);
  const hostNetwork = pod.spec["hostNetwork"] === true;
  const hostIPC = pod.spec["hostIPC"] === true;
  const prefix = pod.specPath.slice(0, -1).concat("spec").join(".");
  // the server validates the containers (init, regular, ephemeral) before the pod's sysctls
  const invalid: string[] = minor >= 30 ? unmaskedProcMountErrors(pod, prefix) : [];
  if (minor >= 29) {
    const bad = sysctls.findIndex((s) => {
      const ns = sysctlNamespace(s.name);
      return (ns === "net" && hostNetwork) || (ns === "ipc" && hostIPC);
    });
    if (bad >= 0) {
      const s = sysctls[bad]!;
      const host = sysctlNamespace(s.name) === "net" ? "hostNetwork" : "hostIPC";
      invalid.push(
        `${prefix}.securityContext.sysctls[${bad}].name: Invalid value: ${JSON.stringify(s.name)}: may not be specified when '${host}' is true`,
      );
    }
  }
  const kindName = `${asString(input["kind"]) ?? "Pod"}`;
  const apiValidation =
    invalid.length === 0
      ? { allowed: true, message: "" }
      : {
          allowed: false,
          message: `${kindName} ${JSON.stringify(name)} is invalid: ${invalid.length === 1 ? invalid[0] : `[${invalid.join(", ")}]`}`,
        };

  // Kubelet: safe set plus the node's allowlist.
  const safe = kubeletSafeSysctls(minor, opts.kernelVersion);
  let kubelet: KubeletPrediction;
  const unsafe = sysctls.filter((s) => !safe.includes(normalizeSysctlName(s.name)));
  if (sysctls.length === 0) {
    kubelet = {
      outcome: "ok",
      message: "no pod sysctls: nothing for the kubelet's sysctl admission to check",
    };
  } else if (opts.platform === "gke-autopilot" && unsafe.length > 0) {
    kubelet = {
      outcome: "SysctlForbidden",
      message: `forbidden sysctl: ${JSON.stringify(normalizeSysctlName(unsafe[0]!.name))} not allowlisted (Autopilot nodes take no kubelet allowlist)`,
      needs: "a GKE Standard node pool whose kubelet allows it, or a different fix",
    };
  } else if (unsafe.length > 0 && opts.kubeletConfig === undefined) {
    const first = normalizeSysctlName(unsafe[0]!.name);
    kubelet = {
      outcome: "unknown",
      message: `${unsafe.map((s) => normalizeSysctlName(s.name)).join(", ")} ${unsafe.length === 1 ? "is" : "are"} not in the kubelet's safe set; whether the node admits the pod depends on its allowedUnsafeSysctls, which the snapshot does not hold. Without it the pod fails with status SysctlForbidden: "Pod was rejected: forbidden sysctl: ${JSON.stringify(first)} not allowlisted"`,
      needs: needsFor(first, hostNetwork),
      command: configzCommand(),
    };
  } else {
    const verdict = kubeletAdmitSysctls(sysctls, {
      allowedUnsafe: opts.kubeletConfig?.allowedUnsafeSysctls ?? [],
      kubernetesMinor: minor,
      hostNetwork,
      hostIPC,
      ...(opts.kernelVersion === undefined ? {} : { kernelVersion: opts.kernelVersion }),
    });
    kubelet =
      verdict.kind === "ok"
        ? {
            outcome: "ok",
            message:
              unsafe.length === 0
                ? "all pod sysctls are in the kubelet's safe set"
                : `allowed by the node's allowedUnsafeSysctls (${opts.kubeletConfig?.source.file}:${opts.kubeletConfig?.source.line}); being allowlisted is required, not sufficient: the container runtime may still refuse (FailedCreatePodSandBox)`,
          }
        : {
            outcome: "SysctlForbidden",
            message: `status.reason=SysctlForbidden, status.message="Pod was rejected: ${verdict.message}" (event reason SysctlForbidden: ${verdict.message}); a Deployment keeps creating replacement pods that fail the same way`,
            needs: needsFor(verdict.sysctl, hostNetwork),
            command: configzCommand(opts.kubeletConfig?.node),
          };
  }

  const autopilot =
    opts.platform === "gke-autopilot"
      ? checkAutopilot(pod, { allowNetAdmin: opts.allowNetAdmin === true, safeSysctls: safe })
      : undefined;

  const blocked =
    !podSecurity.allowed ||
    !apiValidation.allowed ||
    kubelet.outcome === "SysctlForbidden" ||
    (autopilot !== undefined && !autopilot.allowed);
  return {
    podSecurity,
    apiValidation,
    kubelet,
    ...(autopilot ? { autopilot } : {}),
    allowed: blocked ? "no" : kubelet.outcome === "unknown" ? "unknown" : "yes",
  };
}
