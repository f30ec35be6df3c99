/**
 * @module live/collect-types — what `collect` takes and gives back: options, progress events,
 * the snapshot writer it writes through, and the report of what was collected and what failed.
 */

/** Where collected files go (a folder on disk, or memory in tests). Paths use forward slashes. */
export interface SnapshotWriter {
  write(rel: string, data: string | Uint8Array): Promise<void>;
}

export interface PodTarget {
  readonly namespace: string;
  readonly name: string;
}

export type Progress =
  | { readonly kind: "phase"; readonly message: string }
  | {
      readonly kind: "nodes";
      readonly done: number;
      readonly failed: number;
      readonly total: number;
    }
  | { readonly kind: "warning"; readonly message: string };

export interface CollectOptions {
  /** A label selector (`pool=a,env!=dev`) or node names separated by commas. */
  readonly nodes?: string;
  /** Pods whose own network namespace is read (sysctl, iptables-save, ip route, ip addr). */
  readonly pods?: readonly PodTarget[];
  /** Limits Services and NetworkPolicies to this namespace (kubectl's -n). */
  readonly namespace?: string;
  /** Creates short-lived collector pods to read node state. Off by default. */
  readonly nodeState?: boolean;
  /** With nodeState: a bounded capture of traffic with this host on every node. */
  readonly capture?: { readonly host: string; readonly seconds: number };
  /** Parallel node reads (default 10). */
  readonly concurrency?: number;
  /** Above this many nodes one DaemonSet replaces per-node pods (default 50). */
  readonly daemonSetThreshold?: number;
  readonly collectorImage?: string;
  readonly collectorNamespace?: string;
  readonly execTimeoutMs?: number;
  /** Bytes kept per stream of each exec (default k8s/output-limit EXEC_OUTPUT_LIMIT_BYTES). */
  readonly execOutputLimitBytes?: number;
  readonly podStartTimeoutMs?: number;
  readonly pollMs?: number;
  /** Unique id of this run (labels the collectors). */
  readonly runId?: string;
  readonly now?: () => Date;
  readonly signal?: AbortSignal;
  readonly onProgress?: (p: Progress) => void;
}

/** Something that could not be collected, and why, in one sentence. */
export interface CollectFailure {
  /** `node/NAME`, `pod/NS/NAME`, `cluster/RESOURCE`. */
  readonly subject: string;
  readonly what: string;
  readonly why: string;
}

export interface CollectReport {
  readonly context: string;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly files: readonly string[];
  readonly failures: readonly CollectFailure[];
  /** Optional tools that are not there (no ipset or nft on the node): normal, not failures. */
  readonly notAvailable: readonly CollectFailure[];
  readonly nodes: { readonly total: number; readonly done: number; readonly failed: number };
  /** Collector objects created and removed (`pod/NS/NAME`, `daemonset/NS/NAME`). */
  readonly collectorsCreated: readonly string[];
  readonly collectorsRemoved: readonly string[];
  /** Collectors of earlier runs that had expired and were removed at start. */
  readonly staleRemoved: readonly string[];
  readonly aborted: boolean;
}
