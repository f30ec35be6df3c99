/**
 * @module cases/masquerade/plan-config-azure-v2 — the new ConfigMap a `narrow` plan proposes when
 * Azure ip-masq-agent-v2 runs (AKS): the list goes to the user's ConfigMap and key
 * (`azure-ip-masq-agent-config`, `ip-masq-agent`), never to `azure-ip-masq-agent-config-reconciled`,
 * which AKS reconciles (an edit there is overwritten). The agent unites every file's list, so the
 * user's file holds the planned list minus what the reconciled file already adds, and entries only
 * the reconciled file has stay exempt whatever the plan does: a diagnostic says which. The result
 * is checked by the fork's own merge, and the rules are the fork's.
 */
import { azureV2Chain } from "../../agents/ip-masq-agent/azure-v2-rules.ts";
import { mergeConfigDir } from "../../agents/ip-masq-agent/config-merge.ts";
import { agentSavedLines } from "../../agents/ip-masq-agent/rules.ts";
import type { Diagnostic } from "../../model/types.ts";
import type { AgentIntent } from "./intent.ts";

/** What plan-config needs from its own helpers (passed in to keep one direction of imports). */
export interface ConfigMapHelpers {
  readonly rewrite: (
    text: string | undefined,
    list: readonly string[],
  ) => { text: string; rewritten: boolean };
  readonly strip: (raw: Record<string, unknown>) => Record<string, unknown>;
  readonly yaml: (obj: Record<string, unknown>) => string;
}

export interface AzureV2NewConfig {
  readonly newConfigMap: string;
  readonly previousConfigMap?: string;
  readonly validationError?: string;
  readonly expectedRules: readonly string[];
}

/** The user's ConfigMap with `list` (less what the other files add), and the fork's rules. */
export function newAzureV2Config(
  intent: AgentIntent,
  list: readonly string[],
  diagnostics: Diagnostic[],
  h: ConfigMapHelpers,
): AzureV2NewConfig | undefined {
  const target = intent.planTarget;
  if (!target) return undefined;
  const fixed = new Map(target.fixed.map((f) => [f.text, f.configMap]));
  const stays = [...fixed.keys()].filter((c) => !list.includes(c));
  if (stays.length > 0) {
    diagnostics.push({
      code: "PLAN_RECONCILED_KEEPS",
      severity: "warning",
      message: `${stays.join(", ")} ${stays.length === 1 ? "comes" : "come"} from ${[...new Set(stays.map((c) => fixed.get(c)))].join(", ")}, which AKS reconciles: an edit there is overwritten, so the plan edits ${target.name} only and these stay exempt (Azure ip-masq-agent-v2 unites every file's list)`,
    });
  }
  const own = list.filter((c) => !fixed.has(c));
  const data = (intent.configMap?.raw["data"] as Record<string, unknown> | undefined) ?? {};
  const current = typeof data[target.key] === "string" ? (data[target.key] as string) : undefined;
  const rewrite =
    current === undefined
      ? { text: `nonMasqueradeCIDRs:\n${own.map((c) => `  - ${c}`).join("\n")}\n`, rewritten: true }
      : h.rewrite(current, own);
  if (!rewrite.rewritten) {
    diagnostics.push({
      code: "PLAN_CONFIG_REPLACED",
      severity: "warning",
      message: `the current ${target.name} key ${target.key} cannot be read, so the new one is written from scratch`,
    });
  }
  const others = (intent.configFiles ?? []).filter(
    (f) => f.read && !(f.configMap === target.name && f.key === target.key),
  );
  const otherFiles = others.map((f) => ({
    name: f.name,
    content: `nonMasqueradeCIDRs: [${target.fixed
      .filter((x) => x.configMap === f.configMap)
      .map((x) => JSON.stringify(x.text))
      .join(
        ", ",
      )}]\nmasqLinkLocal: ${intent.config.masqLinkLocal}\nmasqLinkLocalIPv6: ${intent.config.masqLinkLocalIPv6}\n`,
  }));
  const ownName =
    (intent.configFiles ?? []).find((f) => f.configMap === target.name && f.key === target.key)
      ?.name ?? target.key;
  const merged = mergeConfigDir([{ name: ownName, content: rewrite.text }, ...otherFiles], {
    nomasqAllReservedRanges: intent.flags.nomasqAllReservedRanges,
    enableIpv6: intent.flags.enableIpv6,
  });
  let validationError = merged.error?.message;
  const got = new Set((merged.config.nonMasqueradeCIDRs ?? []).map((e) => e.text));
  const want = new Set([...list, ...stays]);
  if (
    validationError === undefined &&
    (got.size !== want.size || [...want].some((c) => !got.has(c)))
  )
    validationError = `the new config merges to the list [${[...got].join(",")}], not the planned one`;
  const base = intent.configMap
    ? h.strip(intent.configMap.raw as Record<string, unknown>)
    : {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: target.name, namespace: target.namespace },
        data: {},
      };
  const newConfigMap = h.yaml({
    ...base,
    data: { ...((base["data"] as object) ?? {}), [target.key]: rewrite.text },
  });
  const chain = azureV2Chain(merged.config, 4, intent.flags);
  return {
    newConfigMap,
    ...(intent.configMap
      ? { previousConfigMap: h.yaml(h.strip(intent.configMap.raw as Record<string, unknown>)) }
      : {}),
    ...(validationError !== undefined ? { validationError } : {}),
    expectedRules: chain ? agentSavedLines(chain) : [],
  };
}
