/**
 * @module capture/capture-meta — `captures/<name>.yaml` as the wire question uses it: where a
 * capture was taken (`point`: `node/<n>`, `pod/<ns>/<p>`, `remote/<site>`, `client`) and when
 * (`phase`: before|after a change), with the point also as written. Where a capture was taken
 * decides what an address on it means (a pod address leaving a node is untranslated traffic; on
 * the far side it is what the far side must route back).
 *
 * The file itself, and the point's text, are read by evidence/capture-meta.ts (schema, positions,
 * diagnostics); this is the capture side's view of it.
 */
import { readCaptureMeta } from "../evidence/capture-meta.ts";
import type { Parsed, SourceRef } from "../model/types.ts";

export type CapturePlace =
  | { readonly kind: "node"; readonly name: string }
  | { readonly kind: "pod"; readonly namespace: string; readonly name: string }
  | { readonly kind: "remote"; readonly site: string }
  | { readonly kind: "client" };

export interface CapturePlacement {
  readonly point?: CapturePlace;
  /** The point as written, e.g. `node/gke-a-1`. */
  readonly pointText?: string;
  readonly phase?: "before" | "after";
  readonly source: SourceRef;
}

export function formatCapturePoint(p: CapturePlace): string {
  switch (p.kind) {
    case "node":
      return `node/${p.name}`;
    case "pod":
      return `pod/${p.namespace}/${p.name}`;
    case "remote":
      return `remote/${p.site}`;
    case "client":
      return "client";
  }
}

/**
 * Reads a capture's metadata file. The value is always present (empty when the file says
 * nothing usable); problems are diagnostics with file and line.
 */
export function parseCaptureMeta(text: string, file: string): Parsed<CapturePlacement> {
  const r = readCaptureMeta(text, file);
  const v = r.value;
  if (v === undefined) return { value: { source: { file, line: 1 } }, diagnostics: r.diagnostics };
  const p = v.point;
  const point: CapturePlace =
    p.kind === "node"
      ? { kind: "node", name: p.node }
      : p.kind === "pod"
        ? { kind: "pod", namespace: p.namespace, name: p.pod }
        : p;
  return {
    value: {
      point,
      pointText: formatCapturePoint(point),
      ...(v.phase === undefined ? {} : { phase: v.phase }),
      source: v.pointSource,
    },
    diagnostics: r.diagnostics,
  };
}
