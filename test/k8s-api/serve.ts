/**
 * @module test/k8s-api/serve — runs the fake API server in its own process (for benchmarks, so
 * the measured process holds only podpath): `node --import tsx test/k8s-api/serve.ts fleet 2000`
 * prints the URL on stdout and serves until stdin closes.
 */
import { fleetCluster, fleetExec } from "./fleet.ts";
import { startFakeApi } from "./server.ts";
import { smallCluster, smallClusterExec } from "./small-cluster.ts";

const [what = "small", count = "2000"] = process.argv.slice(2);
const api =
  what === "fleet"
    ? await startFakeApi(fleetCluster(Number(count)), {
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
