/**
 * @module cli/commands/admission-check — `podpath admission check MANIFEST`: for every Pod or pod
 * controller in the manifest, Pod Security Admission's verdict in its own words, API validation
 * of sysctls, and the kubelet's sysctl admission (`questions/admission`). Exit 1 when any object
 * would be denied.
 */
import { type Level, parseVersion } from "../../agents/pod-security/policy-level.ts";
import type { Platform } from "../../agents/pod-security/predict.ts";
import type { Diagnostic } from "../../model/types.ts";
import {
  type AdmissionCheck,
  type AdmissionCheckResult,
  AdmissionInputError,
  checkAdmission,
} from "../../questions/admission.ts";
import { EXIT, type Io, UsageError } from "../io.ts";

/** `file:line: ` unless the message already starts with it. */
function where(d: Diagnostic): string {
  if (!d.source) return "";
  const prefix = `${d.source.file}:${d.source.line}`;
  return d.message.startsWith(`${d.source.file}:`) ? "" : `${prefix}: `;
}

function printDiagnostics(diagnostics: readonly Diagnostic[], io: Io): void {
  for (const d of diagnostics) io.err(`podpath: ${d.severity}: ${where(d)}${d.message}\n`);
}

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const file = args[0];
  if (file === undefined) throw new UsageError("admission check needs a MANIFEST file");
  const level = opts["level"] as Level | undefined;
  const versionText = String(opts["policyVersion"] ?? opts["version"] ?? "latest");
  const { version, error } = parseVersion(versionText);
  if (error) throw new UsageError(`policy version ${JSON.stringify(versionText)}: ${error}`);
  const kubeletConfigFile = opts["kubeletConfig"] as string | undefined;
  let check: AdmissionCheck;
  try {
    check = await checkAdmission(file, {
      ...(level !== undefined ? { level } : {}),
      versionText,
      version,
      platform: (opts["platform"] as Platform | undefined) ?? "generic",
      ...(kubeletConfigFile !== undefined ? { kubeletConfigFile } : {}),
    });
  } catch (e) {
    if (!(e instanceof AdmissionInputError)) throw e;
    printDiagnostics(e.diagnostics, io);
    throw new UsageError(e.message);
  }
  const { results, diagnostics } = check;
  printDiagnostics(diagnostics, io);
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

function renderText(r: AdmissionCheckResult, io: Io): string {
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
