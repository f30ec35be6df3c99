/**
 * @module agents/ip-masq-agent/agent-view-azure-v2 — the agent's own view when the DaemonSet runs
 * Azure ip-masq-agent-v2 (its image, or AKS's DaemonSet name): the fork's flags, and every
 * `ip-masq*` file its volume lays out in /etc/config/ from the ConfigMaps given, merged as the
 * fork merges them. Undefined when the DaemonSet runs another agent.
 */
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import type { AgentView, AgentViewInput } from "./agent-view.ts";
import { readAzureV2Config } from "./azure-v2-config.ts";
import { agentArgsFromDaemonSet } from "./daemonset-args.ts";
import { flavourOf } from "./flavour.ts";

/** The image of the DaemonSet's agent container, when it is a string. */
function imageOf(raw: Readonly<Record<string, unknown>>, index: number): string | undefined {
  const spec = (raw["spec"] as { template?: { spec?: { containers?: unknown } } } | undefined)
    ?.template?.spec;
  const c = Array.isArray(spec?.containers) ? (spec.containers[index] as { image?: unknown }) : {};
  return typeof c?.image === "string" ? c.image : undefined;
}

/**
 * @example azureV2AgentView({ daemonSet: { text, file }, config: { text: cms, file } })?.outcome
 */
export function azureV2AgentView(input: AgentViewInput): AgentView | undefined {
  if (!input.daemonSet) return undefined;
  const ds = agentArgsFromDaemonSet(input.daemonSet.text, input.daemonSet.file);
  const obj = ds.value?.object;
  if (!obj || flavourOf(imageOf(obj.raw, ds.value?.containerIndex ?? 0), obj.name) !== "azure-v2")
    return undefined;
  const objects = input.config ? readKubeObjects(input.config.text, input.config.file) : undefined;
  const r = readAzureV2Config(obj, objects?.value ?? []);
  const diagnostics = [...(objects?.diagnostics ?? []), ...r.diagnostics];
  if (r.defaultsReason) {
    diagnostics.push({
      code: r.outcome.error ? "IPMASQ_AGENT_EXITS" : "IPMASQ_DEFAULTS",
      severity: r.outcome.error ? "error" : "info",
      message: r.defaultsReason,
      ...(r.outcome.error?.source ? { source: r.outcome.error.source } : {}),
    });
  }
  if (r.flags.fatal !== undefined) return { flags: r.flags, diagnostics };
  return {
    flags: r.flags,
    outcome: {
      config: r.outcome.config,
      applied: r.outcome.error === undefined,
      ...(r.outcome.error ? { error: r.outcome.error } : {}),
      usedDefaults: r.outcome.usedDefaults,
    },
    diagnostics,
  };
}
