/**
 * @module agents/ip-masq-agent/azure-v2-config — Azure ip-masq-agent-v2's config from cluster
 * objects: the files its DaemonSet's volume puts in /etc/config/ (config-volume), merged as the
 * fork merges them (config-merge), each CIDR cited to its ConfigMap line, keys it does not read
 * named (config-keys), and the ConfigMap a change must edit: the user's one (AKS:
 * `azure-ip-masq-agent-config`), never a `-reconciled` one, which AKS rewrites.
 * Without the DaemonSet, AKS's ConfigMaps are read as a projected volume without `items` lays
 * them out (every data key a file), and that assumption is said.
 */
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { Diagnostic, SourceRef } from "../../model/types.ts";
import { type AzureV2Flags, azureV2FlagsFromArgs } from "./azure-v2-flags.ts";
import { unreadKeys } from "./config-keys.ts";
import { type MergedOutcome, mergeConfigDir } from "./config-merge.ts";
import { configDirLayout, dataKeyLocator, type VolumeFile } from "./config-volume.ts";
import {
  AKS_RECONCILED_CONFIGMAP,
  AKS_USER_CONFIGMAP,
  AZURE_V2_FILE_PREFIX,
  isReconciledConfigMap,
} from "./flavour.ts";

/** One file the fork finds, and whether it reads it. */
export interface AzureV2File {
  readonly name: string;
  readonly configMap: string;
  readonly key: string;
  readonly read: boolean;
  readonly reconciled: boolean;
  readonly at?: SourceRef;
}

/** Where a change to the list goes: a data key of a ConfigMap the user owns. */
export interface AzureV2PlanTarget {
  readonly name: string;
  readonly namespace: string;
  readonly key: string;
  readonly object?: KubeObject;
  /** Entries other files (the reconciled ConfigMap) add: a change to the target cannot drop them. */
  readonly fixed: readonly { readonly text: string; readonly configMap: string }[];
}

export interface AzureV2Config {
  readonly flags: AzureV2Flags;
  readonly flagsSource?: SourceRef;
  readonly outcome: MergedOutcome;
  readonly files: readonly AzureV2File[];
  readonly target: AzureV2PlanTarget;
  /** Why the defaults apply, when they do. */
  readonly defaultsReason?: string;
  readonly diagnostics: readonly Diagnostic[];
}

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/** The fork's container in a DaemonSet: index, args and where they are written. */
function forkContainer(ds: KubeObject): { index: number; args: string[]; at: SourceRef } {
  const spec = ((ds.raw["spec"] as Rec | undefined)?.["template"] as Rec | undefined)?.["spec"];
  const list = isRec(spec) && Array.isArray(spec["containers"]) ? spec["containers"] : [];
  let index = list.findIndex(
    (c) => isRec(c) && typeof c["image"] === "string" && /ip-masq-agent/.test(c["image"]),
  );
  if (index < 0) index = 0;
  const c = isRec(list[index]) ? (list[index] as Rec) : {};
  const strs = (v: unknown) =>
    Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
  const args = [...strs(c["command"]).slice(1), ...strs(c["args"])];
  const base = ["spec", "template", "spec", "containers", index];
  return {
    index,
    args,
    at: ds.locate([...base, "args"]) ?? ds.locate(base) ?? ds.source,
  };
}

/** AKS's ConfigMaps laid out as every data key a file (no DaemonSet to say otherwise). */
function assumedFiles(objects: readonly KubeObject[]): VolumeFile[] {
  const out: VolumeFile[] = [];
  for (const name of [AKS_USER_CONFIGMAP, AKS_RECONCILED_CONFIGMAP]) {
    const cm = objects.find((o) => o.kind === "ConfigMap" && o.name === name);
    const data = cm && isRec(cm.raw["data"]) ? (cm.raw["data"] as Rec) : {};
    for (const [key, v] of Object.entries(data)) {
      if (!cm || typeof v !== "string") continue;
      out.push({
        name: key,
        path: key,
        isDirectory: false,
        configMap: name,
        ...(cm.namespace ? { namespace: cm.namespace } : {}),
        key,
        object: cm,
        content: v,
        locate: dataKeyLocator(cm, key, v),
        declaredAt: cm.locate(["data", key]) ?? cm.source,
      });
    }
  }
  return out;
}

/**
 * Reads the fork's config from its DaemonSet (when known) and the snapshot's ConfigMaps.
 * @example readAzureV2Config(ds, snap.objects).outcome.config.nonMasqueradeCIDRs
 */
export function readAzureV2Config(
  ds: KubeObject | undefined,
  objects: readonly KubeObject[],
): AzureV2Config {
  const diagnostics: Diagnostic[] = [];
  const c = ds ? forkContainer(ds) : undefined;
  const parsed = azureV2FlagsFromArgs(c?.args ?? [], c?.at);
  diagnostics.push(...parsed.diagnostics);
  const flags = parsed.value;
  let files: VolumeFile[];
  let blocked: string | undefined;
  let volumeSources: readonly { name: string; optional: boolean }[] = [];
  if (ds && c) {
    const layout = configDirLayout(ds, c.index, objects, "/etc/config");
    diagnostics.push(...layout.diagnostics);
    files = [...layout.files];
    blocked = layout.podBlocked;
    volumeSources = layout.configMaps;
    if (layout.volume === undefined) {
      diagnostics.push({
        code: "IPMASQ_NOT_MOUNTED",
        severity: "warning",
        message: `DaemonSet ${ds.name} mounts nothing at /etc/config: Azure ip-masq-agent-v2 finds no config file and uses its defaults`,
        source: c.at,
      });
    }
  } else {
    files = assumedFiles(objects);
    if (files.length > 0) {
      diagnostics.push({
        code: "IPMASQ_LAYOUT_ASSUMED",
        severity: "info",
        message: `no ip-masq-agent-v2 DaemonSet in the snapshot: the files of /etc/config/ are taken to be every data key of ${AKS_USER_CONFIGMAP} and ${AKS_RECONCILED_CONFIGMAP} (AKS's projected volume); with the DaemonSet podpath reads its volume instead`,
        ...(files[0]?.object ? { source: files[0].object.source } : {}),
      });
    }
  }
  for (const f of files) {
    if (!f.name.startsWith(AZURE_V2_FILE_PREFIX)) {
      diagnostics.push({
        code: "IPMASQ_FILE_SKIPPED",
        severity: "warning",
        message: `ConfigMap ${f.configMap} key ${f.key} becomes /etc/config/${f.name}, which Azure ip-masq-agent-v2 never reads: it reads only files whose names start with "${AZURE_V2_FILE_PREFIX}"`,
        source: f.declaredAt,
      });
    } else if (f.content !== undefined) {
      diagnostics.push(
        ...unreadKeys(
          f.content,
          "azure-v2",
          f.locate,
          `ConfigMap ${f.configMap} key ${f.key} (/etc/config/${f.name})`,
        ),
      );
    }
  }
  const outcome = mergeConfigDir(
    files.map((f) => ({
      name: f.name,
      isDirectory: f.isDirectory,
      ...(f.content === undefined ? {} : { content: f.content }),
      ...(f.locate ? { locate: f.locate } : {}),
    })),
    { ...flags.flags, resyncIntervalSeconds: flags.resyncIntervalSeconds },
  );
  const listed: AzureV2File[] = files.map((f) => ({
    name: f.name,
    configMap: f.configMap,
    key: f.key,
    read: f.name.startsWith(AZURE_V2_FILE_PREFIX),
    reconciled: isReconciledConfigMap(f.configMap),
    at: f.declaredAt,
  }));
  const target = planTarget(files, volumeSources, ds, objects, outcome);
  const defaultsReason = blocked
    ? `${blocked}; no agent runs there to write rules`
    : outcome.error
      ? `Azure ip-masq-agent-v2 exits on ${outcome.error.file} (${outcome.error.message}); it writes no rules while it crash-loops, and the rules of an earlier run stay`
      : outcome.usedDefaults
        ? files.length === 0
          ? "no ConfigMap data reaches /etc/config/ (the volume's ConfigMaps are absent or empty), so Azure ip-masq-agent-v2 uses its defaults"
          : `no file of /etc/config/ starts with "${AZURE_V2_FILE_PREFIX}", so Azure ip-masq-agent-v2 uses its defaults`
        : undefined;
  return {
    flags,
    ...(c ? { flagsSource: c.at } : {}),
    outcome,
    files: listed,
    target,
    ...(defaultsReason ? { defaultsReason } : {}),
    diagnostics,
  };
}

/** The user's ConfigMap and key: a read file not from a `-reconciled` ConfigMap, else AKS's. */
function planTarget(
  files: readonly VolumeFile[],
  volumeSources: readonly { name: string; optional: boolean }[],
  ds: KubeObject | undefined,
  objects: readonly KubeObject[],
  outcome: MergedOutcome,
): AzureV2PlanTarget {
  const namespace = ds?.namespace ?? files[0]?.namespace ?? "kube-system";
  const own = files.find(
    (f) => f.name.startsWith(AZURE_V2_FILE_PREFIX) && !isReconciledConfigMap(f.configMap),
  );
  const name =
    own?.configMap ??
    volumeSources.find((s) => !isReconciledConfigMap(s.name))?.name ??
    AKS_USER_CONFIGMAP;
  const key = own?.key ?? "ip-masq-agent";
  const object = own?.object ?? objects.find((o) => o.kind === "ConfigMap" && o.name === name);
  const fixed: { text: string; configMap: string }[] = [];
  for (const r of outcome.read) {
    const f = files.find((x) => x.name === r.name);
    if (!f || (f.configMap === name && f.key === key)) continue;
    for (const e of r.cidrs) fixed.push({ text: e.text, configMap: f.configMap });
  }
  return { name, namespace, key, ...(object ? { object } : {}), fixed };
}
