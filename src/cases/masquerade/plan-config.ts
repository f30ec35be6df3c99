/**
 * @module cases/masquerade/plan-config — the new ip-masq-agent ConfigMap a `narrow` plan proposes:
 * the config text with only its `nonMasqueradeCIDRs` rewritten (every other key and comment kept,
 * JSON kept JSON), checked the way the agent reads its file, the ConfigMap to apply and the one to
 * roll back to, and the rules the agent then writes on every node.
 */
import { Document, isMap, isScalar, parseDocument } from "yaml";
import { decodeMasqConfig, validateMasqConfig } from "../../agents/ip-masq-agent/config.ts";
import { agentSavedLines, expectedAgentChain } from "../../agents/ip-masq-agent/rules.ts";
import { deleteServerFields } from "../../k8s/server-fields.ts";
import type { Diagnostic } from "../../model/types.ts";
import type { AgentIntent } from "./intent.ts";
import { newAzureV2Config } from "./plan-config-azure-v2.ts";

/** A config holding only the list; the agent's defaults apply to every other key. */
function freshConfigText(list: readonly string[]): string {
  return `nonMasqueradeCIDRs:\n${list.map((c) => `  - ${c}`).join("\n")}\nmasqLinkLocal: false\nresyncInterval: 60s\n`;
}

/** The agent matches keys case-insensitively (encoding/json), so every spelling is the key. */
const isListKey = (k: unknown) => typeof k === "string" && k.toLowerCase() === "nonmasqueradecidrs";

/**
 * Rewrites the `nonMasqueradeCIDRs` of a config text, keeping every other key and comment, and
 * JSON as JSON (the agent reads a file that starts with `{` as JSON). A text that cannot be read
 * (or is not a mapping) is replaced by a fresh config: `rewritten` then says false.
 */
export function rewriteConfigTextChecked(
  text: string | undefined,
  list: readonly string[],
): { text: string; rewritten: boolean } {
  if (text === undefined || text.trim() === "")
    return { text: freshConfigText(list), rewritten: true };
  if (text.trim().startsWith("{")) {
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch {
      return { text: freshConfigText(list), rewritten: false };
    }
    if (typeof obj !== "object" || obj === null || Array.isArray(obj))
      return { text: freshConfigText(list), rewritten: false };
    const rec = obj as Record<string, unknown>;
    const keys = Object.keys(rec).filter(isListKey);
    for (const k of keys.slice(1)) delete rec[k];
    rec[keys[0] ?? "nonMasqueradeCIDRs"] = [...list];
    return { text: `${JSON.stringify(rec, null, 2)}\n`, rewritten: true };
  }
  const doc = parseDocument(text, { uniqueKeys: false });
  if (doc.errors.length > 0 || !isMap(doc.contents))
    return { text: freshConfigText(list), rewritten: false };
  const keys = doc.contents.items
    .map((i) => (isScalar(i.key) ? i.key.value : i.key))
    .filter(isListKey);
  for (const k of keys.slice(1)) doc.delete(k);
  doc.set(keys[0] ?? "nonMasqueradeCIDRs", doc.createNode([...list]));
  return { text: doc.toString({ lineWidth: 0 }), rewritten: true };
}

/** {@link rewriteConfigTextChecked}, text only. */
export function rewriteConfigText(text: string | undefined, list: readonly string[]): string {
  return rewriteConfigTextChecked(text, list).text;
}

function stripServerFields(raw: Record<string, unknown>): Record<string, unknown> {
  const meta = { ...((raw["metadata"] as Record<string, unknown>) ?? {}) };
  deleteServerFields(meta);
  const ann = meta["annotations"] as Record<string, unknown> | undefined;
  if (ann && "kubectl.kubernetes.io/last-applied-configuration" in ann) {
    const rest = { ...ann };
    delete rest["kubectl.kubernetes.io/last-applied-configuration"];
    if (Object.keys(rest).length === 0) delete meta["annotations"];
    else meta["annotations"] = rest;
  }
  return {
    apiVersion: raw["apiVersion"] ?? "v1",
    kind: "ConfigMap",
    metadata: meta,
    data: raw["data"],
  };
}

function configMapYaml(obj: Record<string, unknown>): string {
  return new Document(obj).toString({ lineWidth: 0, blockQuote: "literal" });
}

/** The new ConfigMap, the previous one, the agent's verdict on the new config and its rules. */
export interface NewAgentConfig {
  readonly newConfigMap: string;
  readonly previousConfigMap?: string;
  /** The agent's verdict on the new config: undefined when it accepts it. */
  readonly validationError?: string;
  /** The rules the agent writes for the new config (iptables-save form). */
  readonly expectedRules: readonly string[];
}

/** The `config` key of the ConfigMap's data, when it is a string. */
function currentConfigText(intent: AgentIntent): string | undefined {
  const config = (intent.configMap?.raw["data"] as Record<string, unknown> | undefined)?.["config"];
  return typeof config === "string" ? config : undefined;
}

/**
 * The new config text with `list`, decoded and validated the way the agent reads its file; the
 * decoded list must be the planned one (a rewrite that lost or added an entry is a bug here).
 * A current config that cannot be rewritten adds `PLAN_CONFIG_REPLACED` to `diagnostics`.
 */
function checkedConfigText(
  intent: AgentIntent,
  list: readonly string[],
  diagnostics: Diagnostic[],
): { text: string; config: AgentIntent["config"]; validationError?: string } {
  const rewrite = rewriteConfigTextChecked(currentConfigText(intent), list);
  if (!rewrite.rewritten) {
    diagnostics.push({
      code: "PLAN_CONFIG_REPLACED",
      severity: "warning",
      message: `the current config cannot be read${intent.error ? ` (${intent.error.message})` : ""}, so the new one is written from scratch: the new list, and the agent's defaults for every other key`,
      ...(intent.error?.source ? { source: intent.error.source } : {}),
    });
  }
  const decoded = decodeMasqConfig(rewrite.text, {
    nomasqAllReservedRanges: intent.flags.nomasqAllReservedRanges,
  });
  if ("error" in decoded)
    return { text: rewrite.text, config: intent.config, validationError: decoded.error.message };
  let validationError = validateMasqConfig(decoded.config, intent.flags)?.message;
  const got = (decoded.config.nonMasqueradeCIDRs ?? []).map((e) => e.text).join(",");
  if (validationError === undefined && got !== list.join(","))
    validationError = `the new config decodes to the list [${got}], not the planned one`;
  return {
    text: rewrite.text,
    config: decoded.config,
    ...(validationError !== undefined ? { validationError } : {}),
  };
}

/** The ConfigMaps and rules of a plan whose new list is `list`. */
export function newAgentConfig(
  intent: AgentIntent,
  list: readonly string[],
  diagnostics: Diagnostic[],
): NewAgentConfig {
  // Azure ip-masq-agent-v2: the user's ConfigMap of the merged set, never the reconciled one
  const azure = newAzureV2Config(intent, list, diagnostics, {
    rewrite: rewriteConfigTextChecked,
    strip: stripServerFields,
    yaml: configMapYaml,
  });
  if (azure) return azure;
  const checked = checkedConfigText(intent, list, diagnostics);
  const base = intent.configMap
    ? stripServerFields(intent.configMap.raw as Record<string, unknown>)
    : {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "ip-masq-agent", namespace: "kube-system" },
        data: {},
      };
  const newConfigMap = configMapYaml({
    ...base,
    data: { ...((base["data"] as object) ?? {}), config: checked.text },
  });
  const previousConfigMap = intent.configMap
    ? configMapYaml(stripServerFields(intent.configMap.raw as Record<string, unknown>))
    : undefined;
  const expected = expectedAgentChain(checked.config, intent.flags, {
    family: 4,
    toPorts: intent.toPorts,
  });
  return {
    newConfigMap,
    ...(previousConfigMap ? { previousConfigMap } : {}),
    ...(checked.validationError ? { validationError: checked.validationError } : {}),
    expectedRules: expected ? agentSavedLines(expected) : [],
  };
}
