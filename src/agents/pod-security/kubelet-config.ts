/**
 * @module agents/pod-security/kubelet-config — the kubelet's unsafe-sysctl allowlist from what a
 * snapshot may hold: a KubeletConfiguration file (YAML or JSON), the node's `configz` answer
 * (`kubectl get --raw /api/v1/nodes/NODE/proxy/configz`: `{"kubeletconfig": {...}}`), or the
 * kubelet's command line (`--allowed-unsafe-sysctls=a,b`).
 */
import { isMap, isScalar, isSeq, LineCounter, parseDocument } from "yaml";
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { sysctlPatternError } from "./kubelet-sysctls.ts";

export interface KubeletSysctlConfig {
  /** Patterns as the kubelet takes them: exact names or prefixes ending in `*`. */
  readonly allowedUnsafeSysctls: readonly string[];
  /** Where the setting was read (or the file's first line when it is absent: the default `[]`). */
  readonly source: SourceRef;
  /** The node it describes, when known. */
  readonly node?: string;
}

/** The command that shows a node's effective kubelet configuration. */
export function configzCommand(node = "NODE"): string {
  return `kubectl get --raw /api/v1/nodes/${node}/proxy/configz`;
}

function validate(patterns: readonly string[], source: SourceRef, diagnostics: Diagnostic[]) {
  for (const p of patterns) {
    const error = sysctlPatternError(p);
    if (error) {
      diagnostics.push({
        code: "KUBELET_SYSCTL_PATTERN",
        severity: "error",
        message: `${source.file}:${source.line}: ${error}; the kubelet refuses to start with it`,
        source,
      });
    }
  }
}

/**
 * Reads the unsafe-sysctl allowlist from a kubelet config, configz output or a kubelet command
 * line. `value` is undefined when the text is none of those.
 */
export function readKubeletSysctlConfig(
  text: string,
  file: string,
  node?: string,
): Parsed<KubeletSysctlConfig | undefined> {
  const diagnostics: Diagnostic[] = [];
  const nodeField = node === undefined ? {} : { node };
  const flag = /--allowed-unsafe-sysctls(?:=|\s+)(?:'([^']*)'|"([^"]*)"|(\S*))/.exec(text);
  if (flag) {
    const line = text.slice(0, flag.index).split("\n").length;
    const list = (flag[1] ?? flag[2] ?? flag[3] ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    const source = { file, line, text: flag[0] };
    validate(list, source, diagnostics);
    return { value: { allowedUnsafeSysctls: list, source, ...nodeField }, diagnostics };
  }
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false });
  if (doc.errors.length > 0) {
    const err = doc.errors[0]!;
    const line = err.linePos?.[0]?.line ?? 1;
    diagnostics.push({
      code: "YAML_SYNTAX",
      severity: "error",
      message: `${file}:${line}: expected a KubeletConfiguration (YAML or JSON): ${err.message.split("\n")[0]}`,
      source: { file, line },
    });
    return { value: undefined, diagnostics };
  }
  let root: unknown = doc.contents;
  if (isMap(root) && isMap(root.get("kubeletconfig", true))) root = root.get("kubeletconfig", true);
  if (!isMap(root)) return { value: undefined, diagnostics };
  const kind = root.get("kind");
  const field = root.get("allowedUnsafeSysctls", true);
  const looksLikeConfig =
    kind === "KubeletConfiguration" ||
    field !== undefined ||
    root.has("kubeletconfig") ||
    root.has("syncFrequency") ||
    root.has("clusterDNS");
  if (!looksLikeConfig) return { value: undefined, diagnostics };
  const lineOf = (range: readonly number[] | null | undefined) => lc.linePos(range?.[0] ?? 0).line;
  if (field === undefined || field === null) {
    return {
      value: {
        allowedUnsafeSysctls: [],
        source: {
          file,
          line: lineOf(root.range),
          text: "allowedUnsafeSysctls not set (default [])",
        },
        ...nodeField,
      },
      diagnostics,
    };
  }
  const source: SourceRef = {
    file,
    line: lineOf(
      (
        root.items.find((pair) => isScalar(pair.key) && pair.key.value === "allowedUnsafeSysctls")
          ?.key as { range?: number[] } | undefined
      )?.range,
    ),
    text: `allowedUnsafeSysctls: ${JSON.stringify((field as { toJSON?: () => unknown }).toJSON?.() ?? field)}`,
  };
  if (!isSeq(field)) {
    diagnostics.push({
      code: "SCHEMA",
      severity: "error",
      message: `${file}:${source.line}: allowedUnsafeSysctls must be a list of sysctl names or patterns`,
      source,
    });
    return { value: { allowedUnsafeSysctls: [], source, ...nodeField }, diagnostics };
  }
  const list = field.items.map((i) => String((i as { value?: unknown }).value ?? i));
  validate(list, source, diagnostics);
  return { value: { allowedUnsafeSysctls: list, source, ...nodeField }, diagnostics };
}
