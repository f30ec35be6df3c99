/**
 * @module test/components/fleet-collect — runs podpath's `collect` through its fleet path (one
 * collector DaemonSet instead of per-node pods) as its own process, for the real-node tests: the
 * CLI takes that path only above 50 nodes and sets the collectors' deadline from fixed timeouts,
 * so this runs the same library call the CLI makes (`openCluster`, `collectSnapshot` into a
 * folder) with `daemonSetThreshold: 0` and the timeouts a test chooses. Being a process of its
 * own, a test can SIGKILL it mid-run as a user's Ctrl-\ or an OOM kill would.
 *
 * Usage: `tsx fleet-collect.ts '<json>'` with `{kubeconfig, out, options}` (CollectOptions without
 * the functions); prints `started <runId>` when the run begins and the report as JSON at the end.
 */
import { openCluster } from "../../src/k8s/cluster.ts";
import { collectSnapshot } from "../../src/live/collect.ts";
import type { CollectOptions } from "../../src/live/collect-types.ts";
import { folderWriter } from "../../src/live/collect-writer.ts";

export interface FleetCollectArgs {
  readonly kubeconfig: string;
  readonly out: string;
  readonly options: Omit<CollectOptions, "now" | "signal" | "onProgress">;
}

async function main(raw: string): Promise<void> {
  const args = JSON.parse(raw) as FleetCollectArgs;
  const source = await openCluster({ env: process.env, kubeconfig: args.kubeconfig });
  process.stdout.write(`started ${args.options.runId ?? ""}\n`);
  const report = await collectSnapshot(source, folderWriter(args.out), {
    ...args.options,
    daemonSetThreshold: 0,
  });
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

if (process.argv[2] !== undefined) await main(process.argv[2]);
