/**
 * @module cases/masquerade/model — what the masquerade case reads from one snapshot, built once
 * per snapshot: the agent's intent (ConfigMap, flags, DaemonSet), the cluster facts (nodes, pods,
 * pod ranges), the far sites (`remote/*.yaml`), the pod range a component or kube-proxy's rules
 * state, and where the agent runs; with the diagnostics met reading them. `diagnose`, `plan`,
 * `verify` and the plan's replay all read this model instead of reading the snapshot again.
 */

import { kubeProxyRulesRange } from "../../k8s/cluster-range.ts";
import type { Diagnostic } from "../../model/types.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import { readSites } from "../../snapshot/sites.ts";
import { agentCoverage, type Coverage } from "./coverage.ts";
import { type ClusterFacts, type ClusterRange, clusterFacts, clusterPodRange } from "./facts.ts";
import { type AgentIntent, readAgentIntent } from "./intent.ts";

export interface MasqueradeModel {
  readonly intent: AgentIntent;
  readonly facts: ClusterFacts;
  /** The far sites of `remote/*.yaml`, with the problems met reading them. */
  readonly farSites: FarSites;
  /** The cluster's whole pod range where a component states it (read on first use). */
  readonly statedPodRange: ClusterRange | undefined;
  /** The cluster's pod range as kube-proxy's rules in the nodes' iptables-save show it. */
  readonly rulesPodRange: ClusterRange | undefined;
  /** Where the agent's DaemonSet places a pod and where one runs (worked out on first use). */
  readonly coverage: Coverage;
  /** Every reading problem: the intent's, the cluster facts', the far sites'. */
  readonly diagnostics: readonly Diagnostic[];
}

export type FarSites = ReturnType<typeof readSites>;

const built = new WeakMap<Snapshot, MasqueradeModel>();

/** A value worked out on first use, then kept. */
function once<T>(make: () => T): () => T {
  let done = false;
  let value: T;
  return () => {
    if (!done) {
      value = make();
      done = true;
    }
    return value;
  };
}

function buildModel(snap: Snapshot): MasqueradeModel {
  const intent = readAgentIntent(snap.objects);
  const facts = clusterFacts(snap.objects);
  const farSites = readSites(snap);
  const statedPodRange = once(() => clusterPodRange(snap.objects));
  const rulesPodRange = once(() =>
    kubeProxyRulesRange(
      [...snap.nodes.values()].map((n) => ({
        node: n.name,
        dumps: [n.iptables, n.ip6tables].filter((d) => d !== undefined),
        podCIDRs: facts.nodes.find((v) => v.name === n.name)?.podCIDRs.map((c) => c.cidr) ?? [],
      })),
    ),
  );
  const coverage = once(() => agentCoverage(facts, intent));
  return {
    intent,
    facts,
    farSites,
    get statedPodRange() {
      return statedPodRange();
    },
    get rulesPodRange() {
      return rulesPodRange();
    },
    get coverage() {
      return coverage();
    },
    diagnostics: [...intent.diagnostics, ...facts.diagnostics, ...farSites.diagnostics],
  };
}

/** The masquerade case's model of `snap`, built on first use and kept for the snapshot's life. */
export function masqueradeModel(snap: Snapshot): MasqueradeModel {
  let m = built.get(snap);
  if (m === undefined) {
    m = buildModel(snap);
    built.set(snap, m);
  }
  return m;
}
