/**
 * @module agents/ip-masq-agent/flavour — which ip-masq-agent runs: the upstream agent
 * (kubernetes-sigs/ip-masq-agent: one file, /etc/config/ip-masq-agent) or Azure's fork
 * ip-masq-agent-v2 (AKS's `azure-ip-masq-agent`: every `ip-masq*` file in /etc/config/, merged).
 * Told from the container image (`mcr.microsoft.com/aks/ip-masq-agent-v2`), else the DaemonSet's
 * name. Also the config keys each flavour reads, and the keys other forks add, so that a key this
 * agent does not read is named, never dropped without a word.
 */

/** The agents podpath models. */
export type AgentFlavour = "upstream" | "azure-v2";

export interface FlavourFacts {
  readonly flavour: AgentFlavour;
  /** As sentences name it. */
  readonly name: string;
  /** The directory the agent reads. */
  readonly configDir: string;
  /** Which files of that directory it reads. */
  readonly fileRule: string;
  /** The config keys it decodes (encoding/json: matched case-insensitively). */
  readonly keys: readonly string[];
}

export const FLAVOURS: Readonly<Record<AgentFlavour, FlavourFacts>> = {
  upstream: {
    flavour: "upstream",
    name: "ip-masq-agent",
    configDir: "/etc/config/",
    fileRule: "the one file /etc/config/ip-masq-agent",
    keys: [
      "nonMasqueradeCIDRs",
      "cidrLimit",
      "masqLinkLocal",
      "masqLinkLocalIPv6",
      "resyncInterval",
    ],
  },
  "azure-v2": {
    flavour: "azure-v2",
    name: "Azure ip-masq-agent-v2",
    configDir: "/etc/config/",
    fileRule: 'every file in /etc/config/ whose name starts with "ip-masq", merged',
    keys: ["nonMasqueradeCIDRs", "masqLinkLocal", "masqLinkLocalIPv6"],
  },
};

/** Azure ip-masq-agent-v2 reads files of its config dir whose names start with this. */
export const AZURE_V2_FILE_PREFIX = "ip-masq";

/** AKS's names for the fork's DaemonSet and its two ConfigMaps. */
export const AKS_DAEMONSET = "azure-ip-masq-agent";
export const AKS_USER_CONFIGMAP = "azure-ip-masq-agent-config";
export const AKS_RECONCILED_CONFIGMAP = "azure-ip-masq-agent-config-reconciled";

/** A ConfigMap the platform reconciles: edits to it are overwritten, so a plan never targets it. */
export function isReconciledConfigMap(name: string): boolean {
  return /-reconciled$/.test(name);
}

/** The flavour a container image or DaemonSet name says; undefined when neither tells. */
export function flavourOf(image: string | undefined, daemonSet?: string): AgentFlavour | undefined {
  if (image !== undefined && /(^|\/)ip-masq-agent-v2(:|@|$)/.test(image)) return "azure-v2";
  if (daemonSet === AKS_DAEMONSET) return "azure-v2";
  if (image !== undefined && /(^|\/)ip-masq-agent(-amd64|-arm64)?(:|@|$)/.test(image))
    return "upstream";
  return undefined;
}

/** A config key some fork of the agent reads, with where that is documented. */
export interface ForkKey {
  readonly key: string;
  readonly agent: string;
  readonly meaning: string;
  readonly reference: string;
}

/**
 * Keys other agents read. Tencent TKE's ip-masq-agent (v2.6.2 and later) reads
 * `NonMasqueradeSrcCIDRs` in ConfigMap kube-system/ip-masq-agent-config: sources whose packets
 * it never masquerades (its source is not public; Tencent Cloud's TKE documentation describes it).
 */
export const FORK_KEYS: readonly ForkKey[] = [
  {
    key: "NonMasqueradeSrcCIDRs",
    agent: "Tencent TKE's ip-masq-agent (v2.6.2 and later)",
    meaning: "pod sources whose packets are never masqueraded, whatever the destination",
    reference: "Tencent Cloud TKE documentation, ip-masq-agent-config",
  },
  {
    key: "cidrLimit",
    agent: "the upstream ip-masq-agent",
    meaning: "the most nonMasqueradeCIDRs entries accepted",
    reference: "kubernetes-sigs/ip-masq-agent cmd/ip-masq-agent",
  },
  {
    key: "resyncInterval",
    agent: "the upstream ip-masq-agent",
    meaning: "how often the config is re-read (Azure ip-masq-agent-v2 takes --resync-interval)",
    reference: "kubernetes-sigs/ip-masq-agent cmd/ip-masq-agent",
  },
];

/** Is `key` one of the flavour's keys (encoding/json's case-insensitive match)? */
export function flavourReadsKey(flavour: AgentFlavour, key: string): boolean {
  const k = key.toLowerCase();
  return FLAVOURS[flavour].keys.some((x) => x.toLowerCase() === k);
}

/** Another agent that reads `key`, when podpath knows one. */
export function forkKey(key: string): ForkKey | undefined {
  const k = key.toLowerCase();
  return FORK_KEYS.find((f) => f.key.toLowerCase() === k);
}
