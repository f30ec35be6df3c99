/**
 * @module agents/ip-masq-agent/config-source — what the agent would find at
 * /etc/config/ip-masq-agent, given either that file itself or the ConfigMap that is mounted
 * there (as kubectl prints it, YAML or JSON, alone, in a List or in a multi-document stream).
 * The DaemonSet mounts ConfigMap key `config` (volume `optional: true`), so a missing ConfigMap
 * or a different key means no file, and the agent runs on its defaults.
 */
import { type KubeObject, readKubeObjects } from "../../evidence/kube-objects.ts";
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { type ConfigFile, fileLocator, type Locate, lineIndex } from "./config.ts";
import { configDirLayout } from "./config-volume.ts";

/** The ConfigMap data key the agent's DaemonSet projects to the config file. */
export const CONFIG_MAP_KEY = "config";
export const CONFIG_MAP_NAME = "ip-masq-agent";

export interface AgentConfigInput {
  /** The file as the agent sees it. */
  readonly file: ConfigFile;
  readonly origin: "file" | "configmap";
  /** The ConfigMap read, when the input was one. */
  readonly configMap?: {
    readonly name: string;
    readonly namespace?: string;
    readonly source: SourceRef;
  };
}

const KUBE_KIND = /^\s*"?kind"?\s*:\s*["']?(ConfigMap|List|ConfigMapList)\b/m;

/** Does the text look like a Kubernetes object stream rather than the agent's config file? */
function looksLikeKubeObjects(text: string): boolean {
  return KUBE_KIND.test(text) && /^\s*"?apiVersion"?\s*:/m.test(text);
}

/**
 * Reads the user's file: the agent's config file itself, or a ConfigMap holding it under
 * `data.config`. Positions of the config's lines are file lines of the input (for a ConfigMap,
 * the lines inside its `config` block).
 */
export function readAgentConfigInput(text: string, file: string): Parsed<AgentConfigInput> {
  if (!looksLikeKubeObjects(text)) {
    return {
      value: {
        file: { present: true, content: text, locate: fileLocator(file, text) },
        origin: "file",
      },
      diagnostics: [],
    };
  }
  const read = readKubeObjects(text, file);
  const diagnostics: Diagnostic[] = [...read.diagnostics];
  const maps = read.value.filter((o) => o.kind === "ConfigMap");
  const cm =
    maps.find((o) => o.name === CONFIG_MAP_NAME && o.namespace === "kube-system") ??
    maps.find((o) => o.name === CONFIG_MAP_NAME) ??
    (maps.length === 1 ? maps[0] : undefined);
  if (!cm) {
    diagnostics.push({
      code: "IPMASQ_NO_CONFIGMAP",
      severity: "warning",
      message:
        maps.length === 0
          ? `${file} holds no ConfigMap: the agent mounts ConfigMap ${CONFIG_MAP_NAME} with optional: true, so without it there is no config file and the agent uses its defaults`
          : `${file} holds ${maps.length} ConfigMaps and none is named ${CONFIG_MAP_NAME}: the agent mounts only that one, so it sees no config file and uses its defaults`,
      source: { file, line: 1 },
    });
    return { value: { file: { present: false }, origin: "configmap" }, diagnostics };
  }
  const configMap = {
    name: cm.name,
    ...(cm.namespace === undefined ? {} : { namespace: cm.namespace }),
    source: cm.source,
  };
  const data = record(cm.raw["data"]);
  const binary = record(cm.raw["binaryData"]);
  const value = data[CONFIG_MAP_KEY];
  if (typeof value === "string") {
    return {
      value: {
        file: {
          present: true,
          content: value,
          locate: stringLocator(cm, value, ["data", CONFIG_MAP_KEY], text),
        },
        origin: "configmap",
        configMap,
      },
      diagnostics,
    };
  }
  const bin = binary[CONFIG_MAP_KEY];
  if (typeof bin === "string") {
    const at = cm.locate(["binaryData", CONFIG_MAP_KEY]) ?? cm.source;
    return {
      value: {
        file: { present: true, content: Buffer.from(bin, "base64"), locate: () => at },
        origin: "configmap",
        configMap,
      },
      diagnostics,
    };
  }
  const keys = [...Object.keys(data), ...Object.keys(binary)];
  diagnostics.push({
    code: "IPMASQ_CONFIGMAP_KEY",
    severity: "warning",
    message: `ConfigMap ${cm.namespace ? `${cm.namespace}/` : ""}${cm.name} has no data key "${CONFIG_MAP_KEY}"${keys.length ? ` (it has: ${keys.join(", ")})` : ""}: the agent's volume projects only that key to ${"/etc/config/ip-masq-agent"}, so the file does not exist and the agent silently uses its defaults`,
    source: cm.locate(["data"]) ?? cm.source,
  });
  return { value: { file: { present: false }, origin: "configmap", configMap }, diagnostics };
}

function record(v: unknown): Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : {};
}

/** Distinct lines looked up through the YAML positions before falling back to the key's line. */
const MAX_LOOKUPS = 256;

/**
 * Maps a byte offset inside the ConfigMap's string to the file line where it is written. A
 * literal block (`config: |`) maps line for line, which is checked at its first and last line
 * and then computed; other styles are looked up (a bounded number of times).
 */
function stringLocator(
  cm: KubeObject,
  value: string,
  path: readonly string[],
  fileText: string,
): Locate {
  const { lineOf, starts } = lineIndex(Buffer.from(value, "utf8"));
  const fallback = cm.locate(path) ?? cm.source;
  const first = cm.locateInString(path, 1);
  const lastLine = starts.length;
  const last = cm.locateInString(path, lastLine);
  const fileLines = fileText.split("\n");
  const linear =
    first !== undefined &&
    last !== undefined &&
    last.line - first.line === lastLine - 1 &&
    first.line - 1 + lastLine <= fileLines.length;
  const memo = new Map<number, SourceRef>();
  return (offset) => {
    const line = lineOf(offset) + 1;
    const known = memo.get(line);
    if (known) return known;
    let ref: SourceRef;
    if (linear) {
      const fileLine = first.line + line - 1;
      const text = (fileLines[fileLine - 1] ?? "").replace(/\r$/, "");
      const col = text.length - text.trimStart().length + 1;
      ref =
        text.length > 500
          ? { file: first.file, line: fileLine }
          : { file: first.file, line: fileLine, col, text: text.trimEnd() };
    } else if (memo.size < MAX_LOOKUPS) {
      ref = cm.locateInString(path, line) ?? fallback;
    } else {
      ref = fallback;
    }
    memo.set(line, ref);
    return ref;
  };
}

/**
 * The file /etc/config/ip-masq-agent as the kubelet lays out the DaemonSet's volume from the
 * ConfigMaps in `text` (any name and key the volume names, `items`, `projected`, `subPath`), or
 * undefined when the DaemonSet mounts nothing there from these objects (then the caller reads the
 * text as before: a ConfigMap named ip-masq-agent, key `config`).
 */
export function readAgentConfigThroughVolume(
  text: string,
  file: string,
  ds: KubeObject,
  containerIndex: number,
): Parsed<AgentConfigInput> | undefined {
  if (!looksLikeKubeObjects(text)) return undefined;
  const read = readKubeObjects(text, file);
  const layout = configDirLayout(ds, containerIndex, read.value, "/etc/config");
  const f = layout.files.find((x) => x.name === "ip-masq-agent" && !x.isDirectory);
  if (!f || f.content === undefined || !f.object) return undefined;
  return {
    value: {
      file: { present: true, content: f.content, ...(f.locate ? { locate: f.locate } : {}) },
      origin: "configmap",
      configMap: {
        name: f.configMap,
        ...(f.namespace === undefined ? {} : { namespace: f.namespace }),
        source: f.object.source,
      },
    },
    diagnostics: [...read.diagnostics, ...layout.diagnostics],
  };
}
