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
  /**
   * Patterns the kubelet refuses at start (`--allowed-unsafe-sysctls` validation), each with the
   * line of the item: a kubelet with any of them does not run, so it admits no pod.
   */
  readonly refused?: readonly { readonly message: string; readonly source: SourceRef }[];
}

/** The command that shows a node's effective kubelet configuration. */
export function configzCommand(node = "NODE"): string {
  return `kubectl get --raw /api/v1/nodes/${node}/proxy/configz`;
}

/** The patterns the kubelet refuses, each at its own line (`sourceOf(i)`), as diagnostics too. */
function validate(
  patterns: readonly string[],
  sourceOf: (i: number) => SourceRef,
  diagnostics: Diagnostic[],
): { refused?: { message: string; source: SourceRef }[] } {
  const refused: { message: string; source: SourceRef }[] = [];
  patterns.forEach((p, i) => {
    const error = sysctlPatternError(p);
    if (error) {
      const source = sourceOf(i);
      const message = `${error}; the kubelet refuses to start with it`;
      refused.push({ message, source });
      diagnostics.push({
        code: "KUBELET_SYSCTL_PATTERN",
        severity: "error",
        message: `${source.file}:${source.line}: ${message}`,
        source,
      });
    }
  });
  return refused.length > 0 ? { refused } : {};
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
    const refused = validate(list, () => source, diagnostics);
    return { value: { allowedUnsafeSysctls: list, source, ...nodeField, ...refused }, diagnostics };
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
  const refused = validate(
    list,
    (i) => {
      const item = field.items[i] as { range?: number[] } | undefined;
      return item?.range ? { file, line: lineOf(item.range), text: list[i]! } : source;
    },
    diagnostics,
  );
  return { value: { allowedUnsafeSysctls: list, source, ...nodeField, ...refused }, diagnostics };
}
