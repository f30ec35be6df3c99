/**
 * @module questions/admission — `admission check MANIFEST`: for every Pod or pod controller in a
 * manifest file (or the YAML and JSON files below a directory), which Pod Security policy applies
 * (the level given, its Namespace's labels, or PSA's defaults) and the admission prediction under
 * it: Pod Security's verdict in its own words, API validation of sysctls, the kubelet's sysctl
 * admission, GKE Autopilot. Before admission, the API server's strict field validation: a
 * manifest with a field its type does not have (a misplaced `sysctls`) is rejected with the
 * server's own message, each field at its line, and admission is never reached. A kubelet config
 * the kubelet refuses at start admits no pod. Unreadable input is an {@link AdmissionInputError}.
 */
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { type StrictDecoding, strictDecoding } from "../agents/kube-apiserver/strict-decoding.ts";
import {
  type KubeletSysctlConfig,
  readKubeletSysctlConfig,
} from "../agents/pod-security/kubelet-config.ts";
import { podViewOf } from "../agents/pod-security/pod-spec.ts";
import { LABELS, type Level, type PolicyVersion } from "../agents/pod-security/policy-level.ts";
import {
  type AdmissionPrediction,
  type Platform,
  predictAdmission,
} from "../agents/pod-security/predict.ts";
import { type KubeObject, readKubeObjects } from "../evidence/kube-objects.ts";
import type { Diagnostic } from "../model/types.ts";
import { InputFileError, readRegularText } from "../snapshot/input-file.ts";

/** Input the check cannot read; `diagnostics` are the problems met before it gave up. */
export class AdmissionInputError extends Error {
  override readonly name = "AdmissionInputError";
  readonly code = "ERR_ADMISSION_INPUT";
  readonly diagnostics: readonly Diagnostic[];
  constructor(message: string, diagnostics: readonly Diagnostic[] = []) {
    super(message);
    this.diagnostics = diagnostics;
  }
}

export interface AdmissionCheckOptions {
  /** `--level`: overrides the Namespace's labels. */
  readonly level?: Level;
  /** The policy version as given (`v1.N` or `latest`), and as parsed. */
  readonly versionText: string;
  readonly version: PolicyVersion;
  readonly platform: Platform;
  /** A KubeletConfiguration, configz JSON or kubelet command line. */
  readonly kubeletConfigFile?: string;
}

export interface AdmissionCheckResult {
  readonly object: { kind: string; namespace?: string; name: string; file: string; line: number };
  /** Where the level came from: the --level flag, a Namespace's labels, or the default. */
  readonly policySource: string;
  readonly prediction: AdmissionPrediction;
  /**
   * The API server's strict decoding when it rejects the object (or cannot check its kind):
   * a rejected object never reaches admission.
   */
  readonly strictDecoding?: Exclude<StrictDecoding, { state: "ok" }>;
  /** The kubelet refuses its config (each refused item at its line): it runs and admits no pod. */
  readonly kubeletRefusal?: NonNullable<KubeletSysctlConfig["refused"]>;
  /** "no" when the API server, Pod Security, the kubelet or Autopilot rejects it. */
  readonly allowed: AdmissionPrediction["allowed"];
  readonly denied: boolean;
}

/** An object the API server rejects under strict decoding whose pod spec cannot be read. */
export interface AdmissionRejection {
  readonly object: AdmissionCheckResult["object"];
  readonly strictDecoding: Extract<StrictDecoding, { state: "rejected" }>;
}

export interface AdmissionCheck {
  readonly results: readonly AdmissionCheckResult[];
  /** Objects rejected by the API server before admission, with no pod spec to predict for. */
  readonly rejected: readonly AdmissionRejection[];
  readonly diagnostics: readonly Diagnostic[];
}

async function readText(path: string, what: string): Promise<string> {
  try {
    // a FIFO or device is refused, not waited on; UTF-16 (PowerShell's >) is decoded
    return readRegularText(path, `${what} ${path}`);
  } catch (e) {
    if (e instanceof InputFileError) throw new AdmissionInputError(e.message);
    const code = (e as NodeJS.ErrnoException).code;
    throw new AdmissionInputError(
      `cannot read ${what} ${path}: ${code === "ENOENT" ? "no such file" : code === "EISDIR" ? "is a directory" : (e as Error).message}`,
    );
  }
}

/**
 * Every object in a manifest file, or in the YAML and JSON files below a directory (a snapshot's
 * `cluster/`), so Namespaces in one file label the workloads of another.
 */
async function readManifests(
  path: string,
): Promise<{ value: KubeObject[]; diagnostics: Diagnostic[] }> {
  let files = [path];
  const info = await stat(path).catch(() => undefined);
  if (info?.isDirectory()) {
    const entries = await readdir(path, { recursive: true, withFileTypes: true });
    files = entries
      .filter((e) => e.isFile() && /\.(ya?ml|json)$/.test(e.name))
      .map((e) => join(e.parentPath, e.name))
      .sort();
    if (files.length === 0)
      throw new AdmissionInputError(`${path}: no .yaml, .yml or .json files in this directory`);
  }
  const value: KubeObject[] = [];
  const diagnostics: Diagnostic[] = [];
  for (const f of files) {
    const r = readKubeObjects(await readText(f, "manifest"), f);
    value.push(...r.value);
    diagnostics.push(...r.diagnostics);
  }
  return { value, diagnostics };
}

/** The kubelet's sysctl allowlist from its config file; unreadable is an input error. */
async function readKubeletConfig(
  file: string,
  diagnostics: Diagnostic[],
): Promise<KubeletSysctlConfig> {
  const k = readKubeletSysctlConfig(await readText(file, "kubelet config"), file);
  diagnostics.push(...k.diagnostics);
  if (!k.value) {
    throw new AdmissionInputError(
      `${file}: expected a KubeletConfiguration, configz JSON or a kubelet command line with --allowed-unsafe-sysctls`,
    );
  }
  return k.value;
}

function psaLabels(o: KubeObject): Record<string, string> | undefined {
  const meta = o.raw["metadata"];
  const labels =
    typeof meta === "object" && meta !== null
      ? (meta as Record<string, unknown>)["labels"]
      : undefined;
  if (typeof labels !== "object" || labels === null) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels)) {
    if (k.startsWith("pod-security.kubernetes.io/")) out[k] = String(v);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * The Pod Security labels that apply to a workload, and where they come from: `--level`, the
 * labels of its Namespace in the manifests, PSA's default for an unlabelled Namespace, or
 * restricted (the strictest) when its Namespace is not in the manifests.
 */
function policyFor(
  o: KubeObject,
  namespaces: readonly KubeObject[],
  opts: AdmissionCheckOptions,
): { labels: Record<string, string>; policySource: string } {
  const { level, versionText } = opts;
  if (level !== undefined) {
    return {
      labels: { [LABELS.enforce]: level, [LABELS.enforceVersion]: versionText },
      policySource: `--level ${level} --version ${versionText}`,
    };
  }
  const ns =
    namespaces.find((n) => n.name === o.namespace) ??
    (o.namespace === undefined && namespaces.length === 1 ? namespaces[0] : undefined);
  const nsLabels = ns ? psaLabels(ns) : undefined;
  if (ns && nsLabels) {
    return {
      labels: nsLabels,
      policySource: `labels of Namespace ${ns.name} (${ns.source.file}:${ns.source.line})`,
    };
  }
  if (ns) {
    // the namespace is known and unlabelled: PSA's cluster default applies
    return {
      labels: {},
      policySource: `Namespace ${ns.name} (${ns.source.file}:${ns.source.line}) has no pod-security labels: PSA's default, privileged:latest, unless the cluster's AdmissionConfiguration sets another`,
    };
  }
  return {
    labels: { [LABELS.enforce]: "restricted", [LABELS.enforceVersion]: versionText },
    policySource: `no --level and its Namespace is not in the manifests: checked against restricted, the strictest`,
  };
}

/** Every workload of the manifest at `file`, with the policy that applies and its prediction. */
export async function checkAdmission(
  file: string,
  opts: AdmissionCheckOptions,
): Promise<AdmissionCheck> {
  const parsed = await readManifests(file);
  const diagnostics: Diagnostic[] = [...parsed.diagnostics];
  const kubeletConfig =
    opts.kubeletConfigFile !== undefined
      ? await readKubeletConfig(opts.kubeletConfigFile, diagnostics)
      : undefined;
  const namespaces = parsed.value.filter((o) => o.kind === "Namespace");
  const workloads = parsed.value.filter((o) => podViewOf(o.raw) !== undefined);
  const models = await import("@kubernetes/client-node");
  const rejected: AdmissionRejection[] = [];
  for (const o of parsed.value) {
    if (podViewOf(o.raw) !== undefined) continue;
    const d = strictDecoding(models, o);
    if (d.state === "rejected") rejected.push({ object: objectRef(o), strictDecoding: d });
  }
  if (workloads.length === 0 && rejected.length === 0) {
    const why =
      parsed.value.length === 0
        ? "no Kubernetes objects could be read"
        : "no Pod or pod controller found";
    throw new AdmissionInputError(
      `${file}: ${why} (expected a Pod, Deployment, DaemonSet, StatefulSet, ReplicaSet, Job or CronJob)`,
      diagnostics,
    );
  }
  const results: AdmissionCheckResult[] = [];
  for (const o of workloads) {
    const decoding = strictDecoding(models, o);
    const { labels, policySource } = policyFor(o, namespaces, opts);
    const prediction = predictAdmission(o.raw, {
      namespaceLabels: labels,
      version: opts.version,
      platform: opts.platform,
      ...(kubeletConfig ? { kubeletConfig } : {}),
    });
    if (!prediction) continue;
    const rejected = decoding.state === "rejected";
    const refused = kubeletConfig?.refused;
    const allowed = rejected || refused ? "no" : prediction.allowed;
    results.push({
      object: objectRef(o),
      policySource,
      prediction,
      ...(decoding.state === "ok" ? {} : { strictDecoding: decoding }),
      ...(refused ? { kubeletRefusal: refused } : {}),
      allowed,
      denied: allowed === "no",
    });
  }
  return { results, rejected, diagnostics };
}

function objectRef(o: KubeObject): AdmissionCheckResult["object"] {
  return {
    kind: o.kind,
    ...(o.namespace === undefined ? {} : { namespace: o.namespace }),
    name: o.name,
    file: o.source.file,
    line: o.source.line,
  };
}
