/**
 * @module agents/ip-masq-agent/agent-view — the agent's own view of one node: its flags (from a
 * DaemonSet and/or explicit arguments), the config file it finds, and the config it runs with
 * after one sync. Pure: callers pass file contents.
 */
import type { Diagnostic } from "../../model/types.ts";
import { azureV2AgentView } from "./agent-view-azure-v2.ts";
import { defaultMasqConfig, type MasqConfig, type SyncOutcome, syncMasqConfig } from "./config.ts";
import { unreadKeys } from "./config-keys.ts";
import {
  type AgentConfigInput,
  readAgentConfigInput,
  readAgentConfigThroughVolume,
} from "./config-source.ts";
import { type AgentContainerArgs, agentArgsFromDaemonSet } from "./daemonset-args.ts";
import { type AgentFlagsResult, agentFlagsFromArgs } from "./flags.ts";
import { agentChain, restoreProblems } from "./rules.ts";

export interface AgentViewInput {
  /** The config file or ConfigMap text; absent: no config file (the agent's defaults). */
  readonly config?: { readonly text: string; readonly file: string };
  /** A DaemonSet whose agent container's arguments give the flags. */
  readonly daemonSet?: { readonly text: string; readonly file: string };
  /** Flags given explicitly, in Go flag syntax; applied after the DaemonSet's (later wins). */
  readonly flagArgs?: readonly string[];
  /** The config the agent ran with before this sync (default: its startup defaults). */
  readonly previous?: MasqConfig;
}

export interface AgentView {
  readonly flags: AgentFlagsResult;
  readonly input?: AgentConfigInput;
  /** Undefined when the agent would not start (`flags.fatal`). */
  readonly outcome?: SyncOutcome;
  readonly diagnostics: readonly Diagnostic[];
}

/**
 * Runs the agent's startup flag parsing and one config sync.
 * @example
 *   const view = agentView({ config: { text, file: "cm.yaml" }, flagArgs: ["--enable-ipv6"] });
 *   view.outcome?.error?.message; // the agent's exact error text, or undefined
 */
export function agentView(input: AgentViewInput): AgentView {
  // Azure ip-masq-agent-v2 reads every ip-masq* file of its volume, merged
  const fork = azureV2AgentView(input);
  if (fork) return fork;
  const diagnostics: Diagnostic[] = [];
  let dsObject: { object: NonNullable<AgentContainerArgs["object"]>; index: number } | undefined;
  let dsArgs: readonly string[] = [];
  let dsSource: Diagnostic["source"];
  if (input.daemonSet) {
    const ds = agentArgsFromDaemonSet(input.daemonSet.text, input.daemonSet.file);
    diagnostics.push(...ds.diagnostics);
    if (ds.value) {
      dsArgs = ds.value.args;
      dsSource = ds.value.source;
      if (ds.value.object)
        dsObject = { object: ds.value.object, index: ds.value.containerIndex ?? 0 };
    }
  }
  const dsFlags = agentFlagsFromArgs(dsArgs, dsSource);
  const parsed = agentFlagsFromArgs([...dsArgs, ...(input.flagArgs ?? [])], dsSource);
  // report the DaemonSet's own problems with its position; the combined parse decides
  diagnostics.push(...(dsArgs.length > 0 ? dsFlags.diagnostics : []));
  if (parsed.value.fatal !== undefined && dsFlags.value.fatal === undefined) {
    diagnostics.push(...parsed.diagnostics.filter((d) => d.code === "IPMASQ_FLAG_FATAL"));
  }
  const flags = parsed.value;
  if (flags.fatal !== undefined) return { flags, diagnostics };

  let configInput: AgentConfigInput | undefined;
  if (input.config) {
    // the file the DaemonSet's volume puts at /etc/config/ip-masq-agent, else ConfigMap key config
    const r =
      (dsObject &&
        readAgentConfigThroughVolume(
          input.config.text,
          input.config.file,
          dsObject.object,
          dsObject.index,
        )) ??
      readAgentConfigInput(input.config.text, input.config.file);
    diagnostics.push(...r.diagnostics);
    configInput = r.value;
    const f = configInput.file;
    if (f.present) {
      const where = configInput.configMap
        ? `ConfigMap ${configInput.configMap.name}`
        : input.config.file;
      diagnostics.push(...unreadKeys(f.content, "upstream", f.locate, where));
    }
  }
  const previous = input.previous ?? defaultMasqConfig(flags.flags.nomasqAllReservedRanges);
  const outcome = syncMasqConfig(previous, configInput?.file ?? { present: false }, flags.flags);
  if (outcome.applied) {
    diagnostics.push(...restoreDiagnostics(outcome.config, flags));
    diagnostics.push(...behaviourNotes(outcome.config));
  }
  return {
    flags,
    ...(configInput ? { input: configInput } : {}),
    outcome,
    diagnostics,
  };
}

/** Rules the agent would write for an accepted config that the real iptables-restore refuses. */
function restoreDiagnostics(config: MasqConfig, flags: AgentFlagsResult): Diagnostic[] {
  const out: Diagnostic[] = [];
  for (const family of [4, 6] as const) {
    const chain = agentChain(config, family, { flags: flags.flags, toPorts: flags.toPorts });
    if (!chain) continue;
    for (const p of restoreProblems(chain)) {
      const source = p.rule?.entry?.source;
      out.push({
        code: "IPMASQ_RESTORE_REFUSED",
        severity: "error",
        message: `the agent accepts this config, but ${family === 4 ? "iptables" : "ip6tables"}-restore refuses line ${p.line} of what it writes (${p.message}): the agent logs "Error syncing masquerade rules" every cycle and the rules installed before stay as they are`,
        ...(source ? { source } : {}),
      });
    }
  }
  return out;
}

/** Accepted settings whose effect surprises: worth a line on stderr, not an error. */
function behaviourNotes(config: MasqConfig): Diagnostic[] {
  const out: Diagnostic[] = [];
  const at = (ref: Diagnostic["source"]) => (ref ? { source: ref } : {});
  if (config.resyncIntervalNs <= 0n) {
    out.push({
      code: "IPMASQ_RESYNC_ZERO",
      severity: "warning",
      message:
        "resyncInterval is zero or negative: the agent accepts it and re-syncs without pausing (a busy loop re-reading the file and rewriting the rules)",
      ...at(config.sources.resyncInterval),
    });
  }
  if (config.nonMasqueradeCIDRs === null) {
    out.push({
      code: "IPMASQ_NO_EXCEPTIONS",
      severity: "info",
      message:
        "nonMasqueradeCIDRs is empty (null): the chain has no RETURN rule besides link-local, so every non-local destination is masqueraded, pod-to-pod traffic across nodes and traffic DNATed to pods included",
      ...at(config.sources.nonMasqueradeCIDRs),
    });
  }
  return out;
}
