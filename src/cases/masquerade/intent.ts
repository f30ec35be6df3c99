/**
 * @module cases/masquerade/intent — what the cluster tells ip-masq-agent to do: its ConfigMap
 * (`kube-system/ip-masq-agent`, data key `config`) read exactly as the agent reads it, and the flags
 * from its DaemonSet's container args. Every entry keeps the file line it was written on.
 */

import {
  type AzureV2File,
  type AzureV2PlanTarget,
  readAzureV2Config,
} from "../../agents/ip-masq-agent/azure-v2-config.ts";
import {
  type ConfigError,
  decodeMasqConfig,
  defaultMasqConfig,
  type Locate,
  type MasqConfig,
  validateMasqConfig,
} from "../../agents/ip-masq-agent/config.ts";
import { unreadKeys } from "../../agents/ip-masq-agent/config-keys.ts";
import {
  type AgentFlags,
  agentFlagsFromArgs,
  DEFAULT_AGENT_FLAGS,
} from "../../agents/ip-masq-agent/flags.ts";
import {
  type AgentFlavour,
  AKS_DAEMONSET,
  AKS_RECONCILED_CONFIGMAP,
  AKS_USER_CONFIGMAP,
  flavourOf,
} from "../../agents/ip-masq-agent/flavour.ts";
import type { PortInterval } from "../../agents/ip-masq-agent/intervals.ts";
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { Diagnostic, SourceRef } from "../../model/types.ts";

export interface AgentIntent {
  /** The ConfigMap object, when the snapshot has it. */
  readonly configMap?: KubeObject;
  /** The agent's DaemonSet, when the snapshot has it. */
  readonly daemonSet?: KubeObject;
  /**
   * The config the agent runs with. When the ConfigMap is invalid this is what the agent keeps:
   * the previous config, which podpath can only know as the defaults at the agent's start.
   */
  readonly config: MasqConfig;
  /** Why the ConfigMap's config was refused, in the agent's words. */
  readonly error?: ConfigError;
  /** The defaults are in force: no ConfigMap, no `config` key, or an invalid one at start. */
  readonly usedDefaults: boolean;
  /** Why the defaults are in force, when they are. */
  readonly defaultsReason?: string;
  readonly flags: AgentFlags;
  readonly toPorts: readonly PortInterval[];
  /** The agent would not start with its args (Go flag error). */
  readonly flagsFatal?: string;
  readonly flagsSource?: SourceRef;
  readonly diagnostics: readonly Diagnostic[];
  /** Which agent runs (absent: the upstream agent). */
  readonly flavour?: AgentFlavour;
  /** Azure ip-masq-agent-v2: the files of /etc/config/ and the ConfigMap keys they come from. */
  readonly configFiles?: readonly AzureV2File[];
  /**
   * Where a change to the list goes when it is not data key `config` of `configMap` (Azure
   * ip-masq-agent-v2: the user's ConfigMap and key; entries the reconciled one adds stay).
   */
  readonly planTarget?: AzureV2PlanTarget;
}

const AGENT_CONTAINER = /ip-masq-agent/;

/** The ip-masq-agent DaemonSet: kube-system, named or labelled ip-masq-agent. */
export function findAgentDaemonSet(objects: readonly KubeObject[]): KubeObject | undefined {
  const ds = objects.filter((o) => o.kind === "DaemonSet" && o.namespace === "kube-system");
  return (
    ds.find((o) => o.name === "ip-masq-agent") ??
    ds.find((o) => o.labels["k8s-app"] === "ip-masq-agent") ??
    ds.find((o) => o.name === AKS_DAEMONSET) ??
    ds.find((o) => flavourOfDaemonSet(o) === "azure-v2")
  );
}

/** The flavour a DaemonSet runs (its agent container's image, else its name). */
export function flavourOfDaemonSet(ds: KubeObject): AgentFlavour | undefined {
  const found = agentContainer(ds);
  const image = typeof found?.container.image === "string" ? found.container.image : undefined;
  return flavourOf(image, ds.name);
}

export function findAgentConfigMap(objects: readonly KubeObject[]): KubeObject | undefined {
  return objects.find(
    (o) => o.kind === "ConfigMap" && o.namespace === "kube-system" && o.name === "ip-masq-agent",
  );
}

/** Maps a byte offset inside `data.config` to the line of the ConfigMap file it was written on. */
function configLocator(cm: KubeObject, content: string): Locate {
  const bytes = Buffer.from(content, "utf8");
  return (offset) => {
    let line = 1;
    for (let i = 0; i < Math.min(offset, bytes.length); i++) if (bytes[i] === 0x0a) line++;
    return (
      cm.locateInString(["data", "config"], line) ?? cm.locate(["data", "config"]) ?? cm.source
    );
  };
}

interface ContainerLike {
  readonly name?: unknown;
  readonly image?: unknown;
  readonly args?: unknown;
  readonly command?: unknown;
}

function agentContainer(ds: KubeObject): { container: ContainerLike; index: number } | undefined {
  const spec = (ds.raw["spec"] as { template?: { spec?: { containers?: unknown } } } | undefined)
    ?.template?.spec;
  const containers = Array.isArray(spec?.containers) ? (spec.containers as ContainerLike[]) : [];
  const index = containers.findIndex(
    (c) =>
      (typeof c.image === "string" && AGENT_CONTAINER.test(c.image)) ||
      (typeof c.name === "string" && AGENT_CONTAINER.test(c.name)),
  );
  const i = index >= 0 ? index : containers.length === 1 ? 0 : -1;
  return i >= 0 ? { container: containers[i]!, index: i } : undefined;
}

/** The agent's flags: container `args`, plus any flags after the binary in `command`. */
function flagsOf(ds: KubeObject | undefined): {
  flags: AgentFlags;
  toPorts: readonly PortInterval[];
  fatal?: string;
  source?: SourceRef;
  diagnostics: Diagnostic[];
} {
  if (!ds) return { flags: DEFAULT_AGENT_FLAGS, toPorts: [], diagnostics: [] };
  const found = agentContainer(ds);
  if (!found) return { flags: DEFAULT_AGENT_FLAGS, toPorts: [], diagnostics: [] };
  const strings = (v: unknown) => (Array.isArray(v) ? v.filter((x) => typeof x === "string") : []);
  const command = strings(found.container.command);
  const args = [
    ...command.slice(1).filter((a) => a.startsWith("-")),
    ...strings(found.container.args),
  ];
  const path = ["spec", "template", "spec", "containers", found.index, "args"];
  const source = ds.locate(path) ?? ds.source;
  const r = agentFlagsFromArgs(args, source);
  return {
    flags: r.value.flags,
    toPorts: r.value.toPorts,
    ...(r.value.fatal ? { fatal: r.value.fatal } : {}),
    source,
    diagnostics: r.diagnostics,
  };
}

/** Reads the agent's intent from the cluster objects of a snapshot. */
export function readAgentIntent(objects: readonly KubeObject[]): AgentIntent {
  const daemonSet = findAgentDaemonSet(objects);
  const aksMaps = objects.some(
    (o) =>
      o.kind === "ConfigMap" &&
      (o.name === AKS_USER_CONFIGMAP || o.name === AKS_RECONCILED_CONFIGMAP),
  );
  const flavour = daemonSet ? flavourOfDaemonSet(daemonSet) : aksMaps ? "azure-v2" : undefined;
  if (flavour === "azure-v2") return readAzureV2Intent(daemonSet, objects);
  const configMap = findAgentConfigMap(objects);
  const f = flagsOf(daemonSet);
  const defaults = defaultMasqConfig(f.flags.nomasqAllReservedRanges);
  const base = {
    ...(configMap ? { configMap } : {}),
    ...(daemonSet ? { daemonSet } : {}),
    flags: f.flags,
    toPorts: f.toPorts,
    ...(f.fatal ? { flagsFatal: f.fatal } : {}),
    ...(f.source ? { flagsSource: f.source } : {}),
    diagnostics: f.diagnostics,
  };
  if (!configMap) {
    return {
      ...base,
      config: defaults,
      usedDefaults: true,
      defaultsReason: "there is no ConfigMap kube-system/ip-masq-agent in the snapshot",
    };
  }
  const data = configMap.raw["data"] as Record<string, unknown> | undefined;
  const content = data?.["config"];
  if (typeof content !== "string") {
    const keys = data ? Object.keys(data) : [];
    return {
      ...base,
      config: defaults,
      usedDefaults: true,
      defaultsReason:
        keys.length > 0
          ? `the ConfigMap has no data key "config" (it has ${keys.map((k) => `"${k}"`).join(", ")}); the agent reads only "config", so it runs with its defaults`
          : 'the ConfigMap has no data key "config"; the agent runs with its defaults',
    };
  }
  const locate = configLocator(configMap, content);
  base.diagnostics.push(
    ...unreadKeys(content, "upstream", locate, `ConfigMap ${configMap.name} key config`),
  );
  const decoded = decodeMasqConfig(content, {
    nomasqAllReservedRanges: f.flags.nomasqAllReservedRanges,
    locate,
  });
  if ("error" in decoded) {
    return {
      ...base,
      config: defaults,
      error: decoded.error,
      usedDefaults: true,
      defaultsReason:
        "the ConfigMap's config is refused; the agent keeps the config it ran with before (the defaults, if it started with this ConfigMap)",
    };
  }
  const invalid = validateMasqConfig(decoded.config, f.flags);
  if (invalid) {
    const source = invalid.entry?.source;
    return {
      ...base,
      config: defaults,
      error: {
        message: invalid.message,
        stage: "validate",
        exact: true,
        ...(source ? { source } : {}),
      },
      usedDefaults: true,
      defaultsReason:
        "the ConfigMap's config is refused; the agent keeps the config it ran with before (the defaults, if it started with this ConfigMap)",
    };
  }
  return { ...base, config: decoded.config, usedDefaults: false };
}

/** The intent of Azure ip-masq-agent-v2: its merged config dir, in the same shape. */
function readAzureV2Intent(
  daemonSet: KubeObject | undefined,
  objects: readonly KubeObject[],
): AgentIntent {
  const r = readAzureV2Config(daemonSet, objects);
  const configMap = r.target.object;
  const fatal = r.flags.fatal;
  return {
    ...(configMap ? { configMap } : {}),
    ...(daemonSet ? { daemonSet } : {}),
    config: r.outcome.config,
    ...(r.outcome.error ? { error: r.outcome.error } : {}),
    usedDefaults: r.outcome.usedDefaults,
    ...(r.defaultsReason ? { defaultsReason: r.defaultsReason } : {}),
    flags: r.flags.flags,
    toPorts: [],
    ...(fatal ? { flagsFatal: fatal } : {}),
    ...(r.flagsSource ? { flagsSource: r.flagsSource } : {}),
    diagnostics: r.diagnostics,
    flavour: "azure-v2",
    configFiles: r.files,
    planTarget: r.target,
  };
}
