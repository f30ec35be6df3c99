/**
 * @module agents/ip-masq-agent/config-keys — the top-level keys of a config file that the running
 * agent does not read. encoding/json ignores them without a word; podpath names each one with its
 * line: as a key another agent reads (a fork's `NonMasqueradeSrcCIDRs`, upstream's
 * `resyncInterval` under Azure's fork), or as a key unknown to podpath.
 */
import type { Diagnostic } from "../../model/types.ts";
import { isJsonBuffer, type Locate } from "./config.ts";
import { type AgentFlavour, FLAVOURS, flavourReadsKey, forkKey } from "./flavour.ts";
import { type GoValue, parseGoJson } from "./go-json.ts";
import { goYamlToJson } from "./go-yaml.ts";

/** The decoded root of a config file, as the agent decodes it (undefined when it cannot). */
export function decodeConfigRoot(content: string | Uint8Array): GoValue | undefined {
  const bytes = typeof content === "string" ? Buffer.from(content, "utf8") : Buffer.from(content);
  const text = bytes.toString("utf8");
  if (isJsonBuffer(text)) {
    const r = parseGoJson(bytes);
    return "error" in r ? undefined : r.value;
  }
  const r = goYamlToJson(text);
  return "error" in r ? undefined : r.value;
}

/**
 * One diagnostic per top-level key the flavour's agent does not read (the agent ignores it).
 * @example unreadKeys('{"NonMasqueradeSrcCIDRs":[]}', "upstream", locate, "ConfigMap x key config")
 */
export function unreadKeys(
  content: string | Uint8Array,
  flavour: AgentFlavour,
  locate: Locate | undefined,
  where: string,
): Diagnostic[] {
  const root = decodeConfigRoot(content);
  if (root?.kind !== "object") return [];
  const agent = FLAVOURS[flavour].name;
  const out: Diagnostic[] = [];
  for (const e of root.entries) {
    if (flavourReadsKey(flavour, e.key)) continue;
    const known = forkKey(e.key);
    out.push({
      code: known ? "IPMASQ_KEY_OTHER_AGENT" : "IPMASQ_KEY_UNKNOWN",
      severity: "warning",
      message: known
        ? `${where}: key "${e.key}" is read by ${known.agent} (${known.meaning}; ${known.reference}), not by ${agent}, which ignores it${known.agent.startsWith("Tencent") ? "; podpath does not model that agent's rules for it" : ""}`
        : `${where}: key "${e.key}" is unknown to podpath and ${agent} ignores it (encoding/json drops keys it has no field for); if another agent reads it, podpath does not model what it does`,
      ...(locate ? { source: locate(e.keyOffset) } : {}),
    });
  }
  return out;
}
