/**
 * @module cli/commands/admission-check — `podpath admission check MANIFEST`: for every Pod or pod
 * controller in the manifest, Pod Security Admission's verdict in its own words, API validation
 * of sysctls, and the kubelet's sysctl admission (`questions/admission`). Exit 1 when any object
 * would be denied. `-o json` in the envelope; md and html render the answer's document.
 */
import { type Level, parseVersion } from "../../agents/pod-security/policy-level.ts";
import type { Platform } from "../../agents/pod-security/predict.ts";
import { envelope } from "../../model/envelope.ts";
import type { Diagnostic } from "../../model/types.ts";
import {
  type AdmissionCheck,
  type AdmissionCheckResult,
  AdmissionInputError,
  type AdmissionRejection,
  checkAdmission,
} from "../../questions/admission.ts";
import {
  code,
  type Document,
  item,
  list,
  paragraph,
  type Text,
  toned,
} from "../../report/document.ts";
import { isFormat, renderReport } from "../../report/render.ts";
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
  const { results, rejected, diagnostics } = check;
  printDiagnostics(diagnostics, io);
  const format = isFormat(opts["output"]) ? opts["output"] : "text";
  // text keeps its own lines (colour, no wrapping: the admission messages are quoted whole)
  if (format === "text")
    io.out(
      [
        ...rejected.map((r) => renderRejected(r, io)),
        ...results.map((r) => renderText(r, io)),
      ].join("\n"),
    );
  else {
    const json = envelope("admission-check", {
      results: results.map((r) => ({
        object: r.object,
        allowed: r.allowed,
        policySource: r.policySource,
        ...(r.strictDecoding ? { strictDecoding: r.strictDecoding } : {}),
        ...(r.kubeletRefusal ? { kubeletRefusal: r.kubeletRefusal } : {}),
        podSecurity: r.prediction.podSecurity,
        apiValidation: r.prediction.apiValidation,
        kubelet: r.prediction.kubelet,
        ...(r.prediction.autopilot ? { autopilot: r.prediction.autopilot } : {}),
      })),
      ...(rejected.length > 0 ? { rejected } : {}),
      diagnostics,
    });
    io.out(renderReport({ json, document: admissionDocument(results, rejected) }, format));
  }
  return rejected.length > 0 || results.some((r) => r.denied) ? EXIT.findings : EXIT.ok;
}

/** Every object's verdict, then Pod Security, API validation, the kubelet and Autopilot under it. */
function admissionDocument(
  results: readonly AdmissionCheckResult[],
  rejected: readonly AdmissionRejection[],
): Document {
  return {
    question: "admission check",
    title: "podpath admission check",
    blocks: [
      ...rejected.flatMap((r) => [
        paragraph([
          toned("bad", "DENIED"),
          ` ${idOf(r.object)} (`,
          code(`${r.object.file}:${r.object.line}`),
          ")",
        ]),
        list(apiServerLines(r, "").map(([head, ...rest]) => item(head!, rest))),
      ]),
      ...results.flatMap((r) => {
        const p = r.prediction;
        const ps = p.podSecurity;
        const verdict =
          r.allowed === "no"
            ? toned("bad", "DENIED")
            : r.allowed === "unknown"
              ? toned("warn", "UNKNOWN")
              : toned("good", "ALLOWED");
        const o = r.object;
        const podSecurity =
          o.kind === "Pod"
            ? [ps.allowed ? "allowed" : ps.message, ...ps.warnings]
            : [
                ...ps.warnings.map((w) => `on apply: ${w}`),
                ps.allowed ? "its pods are allowed" : `each pod it creates: ${ps.message}`,
              ];
        return [
          paragraph([
            verdict,
            ` ${o.kind} ${o.namespace ? `${o.namespace}/` : ""}${o.name} (`,
            code(`${o.file}:${o.line}`),
            ")",
          ]),
          list([
            ...apiServerLines(r).map(([head, ...rest]) => item(head!, rest)),
            item(`Pod Security ${ps.level}:${ps.version} [${r.policySource}]`, [
              ...podSecurity,
              ...ps.policyErrors.map((e) => `label error: ${e}`),
            ]),
            ...(p.apiValidation.allowed ? [] : [`API validation: ${p.apiValidation.message}`]),
            ...kubeletRefusalLines(r).map(([head, ...rest]) => item(head!, rest)),
            ...(r.kubeletRefusal
              ? []
              : [
                  item(`kubelet sysctls: ${p.kubelet.outcome}: ${p.kubelet.message}`, [
                    ...(p.kubelet.needs ? [`needs: ${p.kubelet.needs}`] : []),
                  ]),
                  ...(p.kubelet.command ? [["check: ", code(p.kubelet.command)] as Text] : []),
                ]),
            ...(p.autopilot
              ? [
                  item(
                    `GKE Autopilot: ${p.autopilot.allowed ? "allowed" : p.autopilot.message}`,
                    p.autopilot.notes.map((n) => `note: ${n}`),
                  ),
                ]
              : []),
          ]),
        ];
      }),
    ],
  };
}

function renderText(r: AdmissionCheckResult, io: Io): string {
  const c = io.colors;
  const p = r.prediction;
  const id = `${r.object.kind} ${r.object.namespace ? `${r.object.namespace}/` : ""}${r.object.name}`;
  const verdict =
    r.allowed === "no"
      ? c.red("DENIED")
      : r.allowed === "unknown"
        ? c.yellow("UNKNOWN")
        : c.green("ALLOWED");
  const lines = [`${verdict} ${id} (${r.object.file}:${r.object.line})`];
  for (const [head, ...rest] of apiServerLines(r))
    lines.push(`  ${head}`, ...rest.map((x) => `    ${x}`));
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
  for (const [head, ...rest] of kubeletRefusalLines(r))
    lines.push(`  ${head}`, ...rest.map((x) => `    ${x}`));
  if (!r.kubeletRefusal) {
    lines.push(`  kubelet sysctls: ${p.kubelet.outcome}: ${p.kubelet.message}`);
    if (p.kubelet.needs) lines.push(`    needs: ${p.kubelet.needs}`);
    if (p.kubelet.command) lines.push(`    check: ${p.kubelet.command}`);
  }
  if (p.autopilot) {
    lines.push(`  GKE Autopilot: ${p.autopilot.allowed ? "allowed" : p.autopilot.message}`);
    for (const n of p.autopilot.notes) lines.push(`    note: ${n}`);
  }
  return `${lines.join("\n")}\n`;
}

const idOf = (o: AdmissionCheckResult["object"]) =>
  `${o.kind} ${o.namespace ? `${o.namespace}/` : ""}${o.name}`;

/** An object the API server rejects and whose pod spec cannot be read: its message only. */
function renderRejected(r: AdmissionRejection, io: Io): string {
  const lines = [
    `${io.colors.red("DENIED")} ${idOf(r.object)} (${r.object.file}:${r.object.line})`,
  ];
  for (const [head, ...rest] of apiServerLines(r, ""))
    lines.push(`  ${head}`, ...rest.map((x) => `    ${x}`));
  return `${lines.join("\n")}\n`;
}

/** The API server's strict decoding, met before admission: its message, then each field's line. */
function apiServerLines(
  r: Pick<AdmissionCheckResult, "strictDecoding">,
  more = "what follows holds once the fields are fixed",
): string[][] {
  const sd = r.strictDecoding;
  if (sd?.state === "unchecked") return [[`API server fields: not checked: ${sd.reason}`]];
  if (sd?.state !== "rejected") return [];
  return [
    [
      `API server (strict field validation, before admission): ${sd.message}`,
      ...(sd.typeError
        ? [
            `${sd.typeError.source ? `${sd.typeError.source.file}:${sd.typeError.source.line}: ` : ""}${sd.typeError.path}: ${sd.typeError.detail}`,
          ]
        : []),
      ...sd.fields.map(
        (f) => `${f.source ? `${f.source.file}:${f.source.line}: ` : ""}unknown field "${f.path}"`,
      ),
      `the object never reaches admission${more ? `; ${more}` : ""}`,
    ],
  ];
}

/** A kubelet that refuses its config runs no pod: each refused item at its line. */
function kubeletRefusalLines(r: AdmissionCheckResult): string[][] {
  if (!r.kubeletRefusal) return [];
  return [
    [
      "kubelet: refuses to start with its config, so it admits no pod:",
      ...r.kubeletRefusal.map((x) => `${x.source.file}:${x.source.line}: ${x.message}`),
    ],
  ];
}
