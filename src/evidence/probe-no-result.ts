/**
 * @module evidence/probe-no-result — the warning every per-tool probe reader gives when a tool's
 * output shows no result it can read (`PROBE_NO_RESULT`); the probe's result is then `error`.
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";

/** Records a `PROBE_NO_RESULT` warning at `source`; returns the result such a probe has. */
export function noResult(diagnostics: Diagnostic[], source: SourceRef, message: string): "error" {
  diagnostics.push({ code: "PROBE_NO_RESULT", severity: "warning", message, source });
  return "error";
}
