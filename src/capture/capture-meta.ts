/**
 * @module capture/capture-meta — `captures/<name>.yaml`: where a capture was taken (`point`:
 * `node/<n>`, `pod/<ns>/<p>`, `remote/<site>`, `client`) and when (`phase`: before|after a change).
 * Where a capture was taken decides what an address on it means (a pod address on a node's eth0
 * is untranslated traffic; on the far side it is what the far side must route back).
 */
import { isMap, LineCounter, parseDocument } from "yaml";
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";

export type CapturePoint =
  | { readonly kind: "node"; readonly name: string }
  | { readonly kind: "pod"; readonly namespace: string; readonly name: string }
  | { readonly kind: "remote"; readonly site: string }
  | { readonly kind: "client" };

export interface CaptureMeta {
  readonly point?: CapturePoint;
  /** The point as written, e.g. `node/gke-a-1`. */
  readonly pointText?: string;
  readonly phase?: "before" | "after";
  readonly source: SourceRef;
}

/** Parses `point: node/NAME | pod/NS/NAME | remote/SITE | client`. */
export function parseCapturePoint(text: string): CapturePoint | undefined {
  const parts = text.trim().split("/");
  if (parts[0] === "client" && parts.length === 1) return { kind: "client" };
  if (parts[0] === "node" && parts.length === 2 && parts[1])
    return { kind: "node", name: parts[1] };
  if (parts[0] === "remote" && parts.length === 2 && parts[1])
    return { kind: "remote", site: parts[1] };
  if (parts[0] === "pod" && parts.length === 3 && parts[1] && parts[2])
    return { kind: "pod", namespace: parts[1], name: parts[2] };
  return undefined;
}

/** Reads a capture's metadata file; unknown keys and bad values are diagnostics, not errors. */
export function parseCaptureMeta(text: string, file: string): Parsed<CaptureMeta> {
  const diagnostics: Diagnostic[] = [];
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc });
  const at = (offset: number | undefined): SourceRef => {
    const pos = lc.linePos(offset ?? 0);
    return { file, line: pos.line, col: pos.col };
  };
  for (const e of doc.errors) {
    diagnostics.push({
      code: "YAML_SYNTAX",
      severity: "error",
      message: `${file}: ${e.message.split("\n")[0]}`,
      source: at(e.pos[0]),
    });
  }
  const meta: {
    point?: CapturePoint;
    pointText?: string;
    phase?: "before" | "after";
    source: SourceRef;
  } = { source: { file, line: 1 } };
  const root = doc.contents;
  if (!isMap(root)) {
    if (root !== null)
      diagnostics.push({
        code: "SCHEMA",
        severity: "error",
        message: `${file}: expected a mapping with point and phase`,
        source: at(root.range?.[0]),
      });
    return { value: meta, diagnostics };
  }
  for (const item of root.items) {
    const key = String((item.key as { value?: unknown } | null)?.value ?? "");
    const node = item.value as { value?: unknown; range?: [number, number, number] } | null;
    const value = node?.value;
    const ref = at(node?.range?.[0]);
    if (key === "point") {
      const p = typeof value === "string" ? parseCapturePoint(value) : undefined;
      if (p === undefined)
        diagnostics.push({
          code: "SCHEMA",
          severity: "error",
          message: `${file}:${ref.line}: point ${JSON.stringify(value)} is not one of node/NAME, pod/NS/NAME, remote/SITE, client`,
          source: ref,
        });
      else {
        meta.point = p;
        meta.pointText = String(value);
        meta.source = ref;
      }
    } else if (key === "phase") {
      if (value === "before" || value === "after") meta.phase = value;
      else
        diagnostics.push({
          code: "SCHEMA",
          severity: "error",
          message: `${file}:${ref.line}: phase ${JSON.stringify(value)} is neither before nor after`,
          source: ref,
        });
    } else {
      diagnostics.push({
        code: "UNKNOWN_KEY",
        severity: "warning",
        message: `${file}:${ref.line}: unknown key ${JSON.stringify(key)} (expected point, phase)`,
        source: ref,
      });
    }
  }
  return { value: meta, diagnostics };
}
