/**
 * @module live/collect-collector — podpath's own collector objects for `--node-state`: the
 * host-network pod pinned to one node, the DaemonSet used for large fleets, their labels, and the
 * removal of expired collectors left by runs that died. Manifests are pure; `removeStale` talks to
 * the cluster.
 */
import { type ApiObject, ClusterError, type ClusterSource, RESOURCES } from "../k8s/cluster.ts";
import { listAll } from "./collect-objects.ts";

export const COLLECTOR_LABELS = {
  name: "app.kubernetes.io/name",
  managedBy: "app.kubernetes.io/managed-by",
  run: "podpath.dev/run",
} as const;
export const EXPIRES_ANNOTATION = "podpath.dev/expires-at";
export const COLLECTOR_SELECTOR = `${COLLECTOR_LABELS.name}=podpath-collector,${COLLECTOR_LABELS.managedBy}=podpath`;
/** Carries tcpdump, iptables(-legacy/-nft), iproute2 and conntrack. */
export const DEFAULT_COLLECTOR_IMAGE = "nicolaka/netshoot:v0.13";
export const DEFAULT_COLLECTOR_NAMESPACE = "kube-system";

export interface CollectorSpec {
  readonly runId: string;
  readonly image: string;
  readonly namespace: string;
  /** The pod ends itself after this long, whatever happens to podpath. */
  readonly lifetimeSeconds: number;
  readonly now: Date;
  /** The run captures (`--capture`): tcpdump then needs to change to its own user. */
  readonly capture?: boolean;
}

/**
 * The collector's capabilities: NET_ADMIN (iptables-save, nft, ipset, conntrack read through
 * netlink) and NET_RAW; with a capture also SETUID and SETGID, since tcpdump as Debian and Ubuntu
 * build it opens the device as root and then changes to its own user (or to `-Z`'s), and stops
 * with "Couldn't change to 'tcpdump'" when it may not.
 */
export function collectorCapabilities(spec: CollectorSpec): string[] {
  return ["NET_ADMIN", "NET_RAW", ...(spec.capture ? ["SETUID", "SETGID"] : [])];
}

/** When the collectors of a run end: the start plus their lifetime (`expires-at`). */
export function collectorDeadline(spec: CollectorSpec): Date {
  return new Date(spec.now.getTime() + spec.lifetimeSeconds * 1000);
}

/**
 * The collector container's own command: it waits (podpath execs the fixed read commands into it)
 * until the run's deadline, an absolute time, and no longer, whatever happens to podpath. Started
 * again after the deadline (a DaemonSet's pods always restart) it ends at once, so a DaemonSet
 * left by a killed run holds no working collector past its deadline, only idle restarts until the
 * next run removes it.
 */
export function collectorCommand(spec: CollectorSpec): string[] {
  const deadline = Math.ceil(collectorDeadline(spec).getTime() / 1000);
  return [
    "sh",
    "-c",
    'left=$(( $1 - $(date +%s) )); [ "$left" -gt 0 ] || exit 0; exec timeout "$left" sleep "$left"',
    "podpath-collector",
    String(deadline),
  ];
}

function meta(spec: CollectorSpec, name: string) {
  return {
    name,
    namespace: spec.namespace,
    labels: {
      [COLLECTOR_LABELS.name]: "podpath-collector",
      [COLLECTOR_LABELS.managedBy]: "podpath",
      [COLLECTOR_LABELS.run]: spec.runId,
    },
    annotations: {
      [EXPIRES_ANNOTATION]: collectorDeadline(spec).toISOString(),
      "podpath.dev/purpose": "reads node network state for podpath collect; safe to delete",
    },
  };
}

function podSpec(spec: CollectorSpec, restartPolicy: "Never" | "Always") {
  return {
    hostNetwork: true,
    dnsPolicy: "ClusterFirstWithHostNet",
    restartPolicy,
    terminationGracePeriodSeconds: 0,
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    tolerations: [{ operator: "Exists" }],
    containers: [
      {
        name: "collector",
        image: spec.image,
        // the container only waits, until the run's deadline; podpath execs the read commands
        command: collectorCommand(spec),
        securityContext: {
          privileged: false,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ["ALL"], add: collectorCapabilities(spec) },
        },
        resources: {
          requests: { cpu: "10m", memory: "32Mi" },
          limits: { memory: "256Mi" },
        },
      },
    ],
  };
}

/** A short name that stays valid (<= 63 chars) whatever the node is called. */
export function collectorName(runId: string, node: string): string {
  let h = 2166136261;
  for (const ch of node) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
  const safe = node
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 24)
    .replace(/-+$/, "");
  return `podpath-${runId}-${safe}-${h.toString(36)}`.slice(0, 63).replace(/-+$/, "");
}

/** One host-network pod on `node`, with an active deadline: it ends by itself. */
export function collectorPod(spec: CollectorSpec, node: string): ApiObject {
  const rest = podSpec(spec, "Never");
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta(spec, collectorName(spec.runId, node)),
    spec: { ...rest, nodeName: node, activeDeadlineSeconds: spec.lifetimeSeconds },
  };
}

/**
 * One DaemonSet over `nodes` (pinned by name), for fleets. A DaemonSet's pods must restart
 * (`restartPolicy: Always`) and may not carry `activeDeadlineSeconds`: the deadline is in the
 * container's command ({@link collectorCommand}), and the next run removes the DaemonSet by label
 * once it has expired ({@link removeStale}).
 */
export function collectorDaemonSet(
  spec: CollectorSpec,
  nodes: readonly string[] | undefined,
): ApiObject {
  const m = meta(spec, `podpath-collector-${spec.runId}`);
  const ps = podSpec(spec, "Always");
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: m,
    spec: {
      selector: { matchLabels: { [COLLECTOR_LABELS.run]: spec.runId } },
      updateStrategy: { type: "OnDelete" },
      template: {
        metadata: { labels: m.labels, annotations: m.annotations },
        spec: {
          ...ps,
          ...(nodes === undefined
            ? {}
            : {
                affinity: {
                  nodeAffinity: {
                    requiredDuringSchedulingIgnoredDuringExecution: {
                      nodeSelectorTerms: [
                        {
                          matchFields: [
                            { key: "metadata.name", operator: "In", values: [...nodes] },
                          ],
                        },
                      ],
                    },
                  },
                },
              }),
        },
      },
    },
  };
}

/**
 * Removes collectors of other runs whose lifetime has passed (their run died or overran it).
 * Collectors of runs still within their lifetime (another podpath at work) are left alone; pods
 * owned by a DaemonSet go with it.
 */
export async function removeStale(
  src: ClusterSource,
  namespace: string,
  runId: string,
  now: Date,
  signal?: AbortSignal,
): Promise<string[]> {
  const removed: string[] = [];
  const sig = signal === undefined ? {} : { signal };
  const expired = (o: ApiObject) => {
    if (o.metadata?.labels?.[COLLECTOR_LABELS.run] === runId) return false;
    const at = Date.parse(o.metadata?.annotations?.[EXPIRES_ANNOTATION] ?? "");
    return Number.isNaN(at) || at <= now.getTime();
  };
  for (const [res, kind] of [
    [RESOURCES.daemonsets, "daemonset"],
    [RESOURCES.pods, "pod"],
  ] as const) {
    const items = await listAll(src, res, { namespace, labelSelector: COLLECTOR_SELECTOR, ...sig });
    for (const o of items) {
      if (!expired(o)) continue;
      if (kind === "pod" && Array.isArray(o.metadata?.["ownerReferences"])) continue;
      const name = o.metadata?.name ?? "";
      try {
        await src.delete(res, name, { namespace, ...sig });
        removed.push(`${kind}/${namespace}/${name}`);
      } catch (e) {
        if (!(e instanceof ClusterError && e.reason === "NotFound")) throw e;
      }
    }
  }
  return removed;
}
