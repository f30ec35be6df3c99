/**
 * @module test/k8s-api/fleet — a large simulated fleet for the DaemonSet path: N nodes in node
 * pools of 100, the ip-masq-agent objects, and node answers sized like a real GKE node's
 * (an iptables-save of a few hundred rules).
 */
import type { ExecAnswer, Obj } from "./server.ts";
import {
  emulateScript,
  node,
  nodeIptablesSave,
  smallCluster,
  smallClusterExec,
} from "./small-cluster.ts";

export function fleetNodeName(i: number): string {
  return `gke-fleet-pool-${String(Math.floor(i / 100)).padStart(2, "0")}-${i.toString(36).padStart(4, "0")}`;
}

/** The small cluster's objects with its three nodes replaced by `n` nodes. */
export function fleetCluster(n: number): Obj[] {
  const base = smallCluster().filter((o) => o.kind !== "Node");
  const nodes = Array.from({ length: n }, (_, i) =>
    node(fleetNodeName(i), i, `pool-${String(Math.floor(i / 100)).padStart(2, "0")}`),
  );
  return [...nodes, ...base];
}

const KUBE_SERVICES = Array.from(
  { length: 300 },
  (_, i) =>
    `-A KUBE-SERVICES -d 10.8.${i >> 8}.${i & 255}/32 -p tcp -m comment --comment "ns${i % 25}/svc-${i}:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-${i.toString(36).toUpperCase().padStart(16, "X")}`,
).join("\n");

/** Collector answers for a fleet node: a few hundred rules, so transfers are realistic. */
export function fleetExec(pod: Obj, argv: readonly string[]): ExecAnswer {
  const framed = emulateScript(argv, (a) => fleetExec(pod, a));
  if (framed) return framed;
  const nodeName = String((pod["spec"] as { nodeName?: string }).nodeName ?? "");
  if (argv.join(" ") === "iptables-save") {
    return {
      stdout: nodeIptablesSave(nodeName, true).replace("COMMIT", `${KUBE_SERVICES}\nCOMMIT`),
    };
  }
  return smallClusterExec(pod, argv);
}
