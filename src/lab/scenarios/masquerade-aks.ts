/**
 * @module lab/scenarios/masquerade-aks — the masquerade scenario's AKS flavour (`--flavour aks`):
 * Azure ip-masq-agent-v2 as AKS runs it. The agent's config is two ConfigMaps projected into one
 * volume (the user's `azure-ip-masq-agent-config`, key `ip-masq-agent`, and
 * `azure-ip-masq-agent-config-reconciled`, key `ip-masq-agent-reconciled`, which AKS rewrites),
 * merged as the fork merges them (agents/ip-masq-agent/config-merge); its rules are installed the
 * way the fork writes them (EnsureChain, EnsureRule of the jump with its quoted comment, then
 * iptables-restore --noflush of the chain, MASQUERADE without --random-fully). Pure but for the
 * install.
 */
import { azureV2Chain, azureV2JumpComment } from "../../agents/ip-masq-agent/azure-v2-rules.ts";
import type { ConfigError, MasqConfig } from "../../agents/ip-masq-agent/config.ts";
import { mergeConfigDir } from "../../agents/ip-masq-agent/config-merge.ts";
import { DEFAULT_AGENT_FLAGS } from "../../agents/ip-masq-agent/flags.ts";
import {
  AKS_DAEMONSET,
  AKS_RECONCILED_CONFIGMAP,
  AKS_USER_CONFIGMAP,
} from "../../agents/ip-masq-agent/flavour.ts";
import { mustExec as must, type Namespace } from "../netns.ts";
import type { ReplicaDescription } from "./masquerade-cluster.ts";

export const AKS_AGENT_IMAGE = "mcr.microsoft.com/aks/ip-masq-agent-v2:v0.1.15";
export const AKS_USER_KEY = "ip-masq-agent";
export const AKS_RECONCILED_KEY = "ip-masq-agent-reconciled";

/** The reconciled ConfigMap's text as AKS writes it: the cluster's own ranges. */
export function reconciledText(cidrs: readonly string[]): string {
  return `nonMasqueradeCIDRs:\n${cidrs.map((c) => `  - ${c}\n`).join("")}masqLinkLocal: true\n`;
}

/** The user's file for a list (the fork reads no resyncInterval key: that is a flag). */
export function aksUserText(cidrs: readonly string[]): string {
  return `nonMasqueradeCIDRs:\n${cidrs.map((c) => `  - ${c}\n`).join("")}masqLinkLocal: false\n`;
}

/** One sync of the fork over both files; when it exits on an error, `previous` stays installed. */
export function aksAgentConfig(
  userText: string | undefined,
  reconciled: string,
  enableIpv6: boolean,
  previous: MasqConfig,
): { config: MasqConfig; error?: ConfigError } {
  const r = mergeConfigDir(
    [
      ...(userText === undefined ? [] : [{ name: AKS_USER_KEY, content: userText }]),
      { name: AKS_RECONCILED_KEY, content: reconciled },
    ],
    { nomasqAllReservedRanges: false, enableIpv6 },
  );
  return r.error ? { config: previous, error: r.error } : { config: r.config };
}

/** Installs the fork's rules for `family` in `ns` as one sync of the agent does. */
export async function installAzureV2Rules(
  ns: Namespace,
  config: MasqConfig,
  family: 4 | 6,
  enableIpv6: boolean,
): Promise<void> {
  const chain = azureV2Chain(config, family, { ...DEFAULT_AGENT_FLAGS, enableIpv6 });
  if (!chain) return;
  const ipt = family === 4 ? "iptables" : "ip6tables";
  await ns.exec([ipt, "-w", "-t", "nat", "-N", chain.chain]);
  const jump = [
    "POSTROUTING",
    "-m",
    "comment",
    "--comment",
    azureV2JumpComment(chain.chain),
    "-m",
    "addrtype",
    "!",
    "--dst-type",
    "LOCAL",
    "-j",
    chain.chain,
  ];
  const check = await ns.exec([ipt, "-w", "-t", "nat", "-C", ...jump]);
  if (check.code !== 0) await must(ns, [ipt, "-w", "-t", "nat", "-A", ...jump]);
  const input = `*nat\n:${chain.chain} - [0:0]\n${chain.rules.map((r) => `${r.written}\n`).join("")}COMMIT\n`;
  await must(ns, [`${ipt}-restore`, "--noflush"], input);
}

const meta = (name: string, createdAt: string, extra: Record<string, unknown> = {}) => ({
  name,
  creationTimestamp: createdAt,
  resourceVersion: "1000",
  ...extra,
});

/** AKS's agent objects: the two ConfigMaps, the DaemonSet with its projected volume, its pods. */
export function aksAgentObjects(
  d: ReplicaDescription,
  userText: string | undefined,
  reconciled: string,
): unknown[] {
  const labels = { "k8s-app": AKS_DAEMONSET, "kubernetes.io/cluster-service": "true" };
  const podSpec = (nodeName?: string) => ({
    ...(nodeName ? { nodeName } : {}),
    hostNetwork: true,
    containers: [
      {
        name: AKS_DAEMONSET,
        image: AKS_AGENT_IMAGE,
        args: ["--v=2", "--resync-interval=60", ...(d.enableIpv6 ? ["--enable-ipv6"] : [])],
        securityContext: { privileged: false, capabilities: { add: ["NET_ADMIN", "NET_RAW"] } },
        volumeMounts: [
          { name: "azure-ip-masq-agent-config-volume", mountPath: "/etc/config", readOnly: true },
        ],
      },
    ],
    volumes: [
      {
        name: "azure-ip-masq-agent-config-volume",
        projected: {
          sources: [
            {
              configMap: {
                name: AKS_USER_CONFIGMAP,
                optional: true,
                items: [{ key: AKS_USER_KEY, path: AKS_USER_KEY, mode: 444 }],
              },
            },
            {
              configMap: {
                name: AKS_RECONCILED_CONFIGMAP,
                optional: true,
                items: [{ key: AKS_RECONCILED_KEY, path: AKS_RECONCILED_KEY, mode: 444 }],
              },
            },
          ],
        },
      },
    ],
  });
  const running = d.nodes.filter((n) => n.hasAgent);
  const objects: unknown[] = [];
  if (userText !== undefined) {
    objects.push({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: meta(AKS_USER_CONFIGMAP, d.createdAt, {
        namespace: "kube-system",
        labels: { component: "ip-masq-agent", "addonmanager.kubernetes.io/mode": "EnsureExists" },
      }),
      data: { [AKS_USER_KEY]: userText },
    });
  }
  objects.push(
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: meta(AKS_RECONCILED_CONFIGMAP, d.createdAt, {
        namespace: "kube-system",
        labels: { component: "ip-masq-agent", "addonmanager.kubernetes.io/mode": "Reconcile" },
      }),
      data: { [AKS_RECONCILED_KEY]: reconciled },
    },
    {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: meta(AKS_DAEMONSET, d.createdAt, { namespace: "kube-system", labels }),
      spec: {
        selector: { matchLabels: { "k8s-app": AKS_DAEMONSET } },
        template: { metadata: { labels }, spec: podSpec() },
      },
      status: {
        desiredNumberScheduled: running.length,
        numberReady: running.length,
        numberAvailable: running.length,
      },
    },
  );
  for (const n of running) {
    objects.push({
      apiVersion: "v1",
      kind: "Pod",
      metadata: meta(`${AKS_DAEMONSET}-${n.name.slice(-5)}`, d.createdAt, {
        namespace: "kube-system",
        labels,
        ownerReferences: [
          { apiVersion: "apps/v1", kind: "DaemonSet", name: AKS_DAEMONSET, controller: true },
        ],
      }),
      spec: podSpec(n.name),
      status: {
        phase: "Running",
        hostIP: n.internalIp,
        podIP: n.internalIp,
        containerStatuses: [{ name: AKS_DAEMONSET, ready: true, image: AKS_AGENT_IMAGE }],
      },
    });
  }
  return objects;
}
