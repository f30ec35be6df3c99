/**
 * @module evidence/capture-meta — `captures/<name>.yaml`: where and when a capture was taken
 * (`point: node/<n> | pod/<ns>/<p> | remote/<site> | client`, `phase: before|after`).
 */
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { lazySchema } from "./lazy-zod.ts";
import { parseLenient } from "./lenient-parse.ts";
import { readYamlSource } from "./yaml-source.ts";

export type CapturePoint =
  | { readonly kind: "node"; readonly node: string }
  | { readonly kind: "pod"; readonly namespace: string; readonly pod: string }
  | { readonly kind: "remote"; readonly site: string }
  | { readonly kind: "client" };

export interface CaptureMeta {
  readonly point: CapturePoint;
  readonly phase?: "before" | "after";
  /** When it was taken, as written (ISO 8601 expected). */
  readonly time?: string;
  /** The command that made it (`tcpdump -ni any host 10.20.30.40 -w before.pcap`). */
  readonly command?: string;
  readonly source: SourceRef;
  readonly pointSource: SourceRef;
}

// RFC 1123 names as Kubernetes uses them for nodes, namespaces and pods.
const NAME = "[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?";
const POINT = new RegExp(`^(?:node/(${NAME})|pod/(${NAME})/(${NAME})|remote/([^/\\s]+)|client)$`);

const MetaSchema = lazySchema((z) => {
  return z.strictObject({
    point: z
      .string()
      .regex(POINT, "expected node/<name>, pod/<namespace>/<name>, remote/<site> or client"),
    phase: z.enum(["before", "after"]).optional(),
    time: z
      .string()
      .refine(
        (t) => !Number.isNaN(Date.parse(t)),
        "expected an ISO 8601 time such as 2026-11-29T14:05:00Z",
      )
      .optional(),
    command: z.string().optional(),
  });
});

/** Reads a capture's metadata file. Unknown keys are warnings; a bad `point` leaves no value. */
export function readCaptureMeta(text: string, file: string): Parsed<CaptureMeta | undefined> {
  const { source, diagnostics } = readYamlSource(text, file);
  const d = source.documents.find((x) => x.ok && x.value !== null && x.value !== undefined);
  if (source.documents.filter((x) => x.value !== null && x.value !== undefined).length > 1) {
    diagnostics.push({
      code: "CAPTURE_META",
      severity: "warning",
      message: "more than one document; only the first is read",
      source: { file, line: 1 },
    });
  }
  if (!d) {
    if (!diagnostics.some((x) => x.severity === "error"))
      diagnostics.push({
        code: "CAPTURE_META",
        severity: "error",
        message: "empty file; expected `point:` and `phase:`",
        source: { file, line: 1 },
      });
    return { value: undefined, diagnostics };
  }
  const root = d.doc.contents;
  const docRef = source.locate(root, []) ?? source.refAt(0);
  const own: Diagnostic[] = [];
  const m = parseLenient(
    MetaSchema(),
    { raw: d.value, locate: (p) => source.locate(root, p), source: docRef, label: file },
    own,
    "CAPTURE_META",
  );
  diagnostics.push(...own);
  if (!m) return { value: undefined, diagnostics };
  const p = POINT.exec(m.point)!;
  const point: CapturePoint = p[1]
    ? { kind: "node", node: p[1] }
    : p[2]
      ? { kind: "pod", namespace: p[2], pod: p[3]! }
      : p[4]
        ? { kind: "remote", site: p[4] }
        : { kind: "client" };
  return {
    value: {
      point,
      ...(m.phase ? { phase: m.phase } : {}),
      ...(m.time !== undefined ? { time: m.time } : {}),
      ...(m.command !== undefined ? { command: m.command } : {}),
      source: docRef,
      pointSource: source.locate(root, ["point"]) ?? docRef,
    },
    diagnostics,
  };
}
