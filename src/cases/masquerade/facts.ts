/**
 * @module cases/masquerade/facts — the cluster facts the masquerade question stands on, under the
 * names it has always used: they are read once for every case in `k8s/cluster-facts` (nodes, pods,
 * the pod address space) and `k8s/cluster-range` (the cluster range a component states).
 */
export {
  type ClusterFacts,
  clusterFacts,
  isPodAddress,
} from "../../k8s/cluster-facts.ts";
export {
  type ClusterRange,
  statedClusterRange as clusterPodRange,
} from "../../k8s/cluster-range.ts";
