/**
 * @module cli/commands/admission-check — `podpath admission check MANIFEST`: for every Pod or pod
 * controller in the manifest, Pod Security Admission's verdict in its own words, API validation
 * of sysctls, and the kubelet's sysctl admission. Exit 1 when any object would be denied.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { readKubeletSysctlConfig } from "../../agents/pod-security/kubelet-config.ts";
import { podViewOf } from "../../agents/pod-security/pod-spec.ts";
import { LABELS, type Level, parseVersion } from "../../agents/pod-security/policy-level.ts";
import {
  type AdmissionPrediction,
  type Platform,
  predictAdmission,
} from "../../agents/pod-security/predict.ts";
import { type KubeObject, readKubeObjects } from "../../evidence/kube-objects.ts";
import type { Diagnostic } from "../../model/types.ts";
import { EXIT, type Io, UsageError } from "../io.ts";

interface Result {
  readonly object: { kind: string; namespace?: string; name: string; file: string; line: number };
  /** Where the level came from: the --level flag, a Namespace's labels, or the default. */
  readonly policySource: string;
  readonly prediction: AdmissionPrediction;
  readonly denied: boolean;
}

async function readText(path: string, what: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(
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
      throw new UsageError(`${path}: no .yaml, .yml or .json files in this directory`);
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

/** `file:line: ` unless the message already starts with it. */
function where(d: Diagnostic): string {
  if (!d.source) return "";
  const prefix = `${d.source.file}:${d.source.line}`;
  return d.message.startsWith(`${d.source.file}:`) ? "" : `${prefix}: `;
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

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const file = args[0];
  if (file === undefined) throw new UsageError("admission check needs a MANIFEST file");
  const levelFlag = opts["level"] as Level | undefined;
  const versionText = String(opts["policyVersion"] ?? opts["version"] ?? "latest");
  const { version, error } = parseVersion(versionText);
  if (error) throw new UsageError(`policy version ${JSON.stringify(versionText)}: ${error}`);
  const platform = (opts["platform"] as Platform | undefined) ?? "generic";

  const parsed = await readManifests(file);
  const diagnostics: Diagnostic[] = [...parsed.diagnostics];

  let kubeletConfig: ReturnType<typeof readKubeletSysctlConfig>["value"];
  const kubeletFile = opts["kubeletConfig"] as string | undefined;
  if (kubeletFile !== undefined) {
    const k = readKubeletSysctlConfig(await readText(kubeletFile, "kubelet config"), kubeletFile);
    diagnostics.push(...k.diagnostics);
    if (!k.value) {
      throw new UsageError(
        `${kubeletFile}: expected a KubeletConfiguration, configz JSON or a kubelet command line with --allowed-unsafe-sysctls`,
      );
    }
    kubeletConfig = k.value;
  }

  const namespaces = parsed.value.filter((o) => o.kind === "Namespace");
  const workloads = parsed.value.filter((o) => podViewOf(o.raw) !== undefined);
  if (workloads.length === 0) {
    for (const d of diagnostics) io.err(`podpath: ${d.severity}: ${where(d)}${d.message}\n`);
    const why =
      parsed.value.length === 0
        ? "no Kubernetes objects could be read"
        : "no Pod or pod controller found";
    throw new UsageError(
      `${file}: ${why} (expected a Pod, Deployment, DaemonSet, StatefulSet, ReplicaSet, Job or CronJob)`,
    );
  }

  const results: Result[] = [];
  for (const o of workloads) {
    let labels: Record<string, string> | undefined;
    let policySource: string;
    if (levelFlag !== undefined) {
      labels = { [LABELS.enforce]: levelFlag, [LABELS.enforceVersion]: versionText };
      policySource = `--level ${levelFlag} --version ${versionText}`;
    } else {
      const ns =
        namespaces.find((n) => n.name === o.namespace) ??
        (o.namespace === undefined && namespaces.length === 1 ? namespaces[0] : undefined);
      const nsLabels = ns ? psaLabels(ns) : undefined;
      if (ns && nsLabels) {
        labels = nsLabels;
        policySource = `labels of Namespace ${ns.name} (${ns.source.file}:${ns.source.line})`;
      } else if (ns) {
        // the namespace is known and unlabelled: PSA's cluster default applies
        labels = {};
        policySource = `Namespace ${ns.name} (${ns.source.file}:${ns.source.line}) has no pod-security labels: PSA's default, privileged:latest, unless the cluster's AdmissionConfiguration sets another`;
      } else {
        labels = { [LABELS.enforce]: "restricted", [LABELS.enforceVersion]: versionText };
        policySource = `no --level and its Namespace is not in the manifests: checked against restricted, the strictest`;
      }
    }
    const prediction = predictAdmission(o.raw, {
      namespaceLabels: labels,
      version,
      platform,
      ...(kubeletConfig ? { kubeletConfig } : {}),
    });
    if (!prediction) continue;
    const denied = prediction.allowed === "no";
    results.push({
      object: {
        kind: o.kind,
        ...(o.namespace === undefined ? {} : { namespace: o.namespace }),
        name: o.name,
        file: o.source.file,
        line: o.source.line,
      },
      policySource,
      prediction,
      denied,
    });
  }

  for (const d of diagnostics) io.err(`podpath: ${d.severity}: ${where(d)}${d.message}\n`);
  if (opts["output"] === "json") {
    io.out(
      `${JSON.stringify(
        {
          schemaVersion: 1,
          tool: "podpath",
          question: "admission-check",
          results: results.map((r) => ({
            object: r.object,
            allowed: r.prediction.allowed,
            policySource: r.policySource,
            podSecurity: r.prediction.podSecurity,
            apiValidation: r.prediction.apiValidation,
            kubelet: r.prediction.kubelet,
            ...(r.prediction.autopilot ? { autopilot: r.prediction.autopilot } : {}),
          })),
          diagnostics,
        },
        null,
        2,
      )}\n`,
    );
  } else {
    io.out(results.map((r) => renderText(r, io)).join("\n"));
  }
  return results.some((r) => r.denied) ? EXIT.findings : EXIT.ok;
}

function renderText(r: Result, io: Io): string {
  const c = io.colors;
  const p = r.prediction;
  const id = `${r.object.kind} ${r.object.namespace ? `${r.object.namespace}/` : ""}${r.object.name}`;
  const verdict =
    p.allowed === "no"
      ? c.red("DENIED")
      : p.allowed === "unknown"
        ? c.yellow("UNKNOWN")
        : c.green("ALLOWED");
  const lines = [`${verdict} ${id} (${r.object.file}:${r.object.line})`];
  const ps = p.podSecurity;
  lines.push(`  Pod Security ${ps.level}:${ps.version} [${r.policySource}]`);
  if (r.object.kind === "Pod") {
    lines.push(ps.allowed ? "    allowed" : `    ${ps.message}`);
    for (const w of ps.warnings) lines.push(`    ${w}`);
  } else {
    for (const w of ps.warnings) lines.push(`    on apply: ${w}`);
    lines.push(ps.allowed ? "    its pods are allowed" : `    each pod it creates: ${ps.message}`);
  }
  for (const e of ps.policyErrors) lines.push(`    label error: ${e}`);
  if (!p.apiValidation.allowed) lines.push(`  API validation: ${p.apiValidation.message}`);
  lines.push(`  kubelet sysctls: ${p.kubelet.outcome}: ${p.kubelet.message}`);
  if (p.kubelet.needs) lines.push(`    needs: ${p.kubelet.needs}`);
  if (p.kubelet.command) lines.push(`    check: ${p.kubelet.command}`);
  if (p.autopilot) {
    lines.push(`  GKE Autopilot: ${p.autopilot.allowed ? "allowed" : p.autopilot.message}`);
    for (const n of p.autopilot.notes) lines.push(`    note: ${n}`);
  }
  return `${lines.join("\n")}\n`;
}
