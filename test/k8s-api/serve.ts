/**
 * @module test/k8s-api/serve — runs the fake API server in its own process (for benchmarks, so
 * the measured process holds only podpath): `node --import tsx test/k8s-api/serve.ts fleet 2000`
 * prints the URL on stdout and serves until stdin closes. The fleet also keeps one running pod
 * per node (`kube-system/floor-<i>`) that answers like a collector, for the benchmark's floor.
 */
import { fleetCluster, fleetExec, fleetNodeName } from "./fleet.ts";
import { type Obj, startFakeApi } from "./server.ts";
import { smallCluster, smallClusterExec } from "./small-cluster.ts";

const floorPods = (n: number): Obj[] =>
  Array.from({ length: n }, (_, i) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `floor-${i}`, namespace: "kube-system", labels: { "bench/floor": "true" } },
    spec: { nodeName: fleetNodeName(i), containers: [{ name: "collector", image: "x" }] },
    status: { phase: "Running" },
  }));

const [what = "small", count = "2000"] = process.argv.slice(2);
const api =
  what === "fleet"
    ? await startFakeApi([...fleetCluster(Number(count)), ...floorPods(Number(count))], {
        gkeCrds: true,
        exec: fleetExec,
        podStartMs: 50,
      })
    : await startFakeApi(smallCluster(), { gkeCrds: true, exec: smallClusterExec });
process.stdout.write(`${api.url}\n`);
process.stdin.resume();
process.stdin.on("end", () => {
  void api.close().then(() => process.exit(0));
});
