import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { promisify } from "node:util";
import { kubeconfigFor, startFakeApi } from "../../test/k8s-api/server.ts";
import { smallCluster, smallClusterExec } from "../../test/k8s-api/small-cluster.ts";
import { openCluster } from "../k8s/cluster.ts";
import { collectSnapshot } from "./collect.ts";
import { memoryWriter } from "./collect-writer.ts";

// Oracle: what kubectl itself prints for the same objects from the same API server. The golden
// files were recorded with kubectl v1.29.14 against test/k8s-api's small cluster
// (UPDATE_GOLDEN=1 records them again); where kubectl is installed the test also runs it live.
const GOLDEN = new URL("../../test/k8s-api/golden/kubectl/", import.meta.url);
const CASES: [string, string[]][] = [
  ["cluster/nodes.yaml", ["get", "nodes", "-o", "yaml"]],
  ["cluster/namespaces.yaml", ["get", "namespaces", "-o", "yaml"]],
  ["cluster/services.yaml", ["get", "services", "-A", "-o", "yaml"]],
  ["cluster/networkpolicies.yaml", ["get", "networkpolicies", "-A", "-o", "yaml"]],
  ["cluster/egressnatpolicies.yaml", ["get", "egressnatpolicies.networking.gke.io", "-o", "yaml"]],
  [
    "cluster/configmap-ip-masq-agent.yaml",
    ["get", "configmap", "-n", "kube-system", "ip-masq-agent", "-o", "yaml"],
  ],
  [
    "cluster/daemonsets.yaml",
    ["get", "daemonsets", "-n", "kube-system", "-l", "k8s-app=ip-masq-agent", "-o", "yaml"],
  ],
];

const scratch = mkdtempSync(join(tmpdir(), "podpath-kubectl-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
const hasKubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status === 0;

describe("cluster/*.yaml as kubectl prints it", () => {
  it("equals kubectl get -o yaml byte for byte, managedFields removed", async () => {
    // kubectl sends no bearer token to a plain-http server, so this server asks for none
    const api = await startFakeApi(smallCluster(), { gkeCrds: true, exec: smallClusterExec });
    try {
      const kc = join(scratch, "kubeconfig");
      writeFileSync(kc, kubeconfigFor(api.url, { token: "unused" }));
      const w = memoryWriter();
      const rep = await collectSnapshot(
        await openCluster({ kubeconfig: kc, env: {}, allowPlaintextCredentials: true }),
        w,
        {},
      );
      assert.deepEqual(rep.failures, []);
      const update = process.env["UPDATE_GOLDEN"] === "1";
      if (update) mkdirSync(GOLDEN, { recursive: true });
      for (const [file, argv] of CASES) {
        const ours = w.files.get(file)?.toString("utf8");
        assert.ok(ours !== undefined, `${file} not collected`);
        assert.doesNotMatch(ours, /managedFields/);
        const golden = new URL(file.replace("cluster/", ""), GOLDEN);
        if (hasKubectl || update) {
          // asynchronous: the API server answering kubectl runs in this process
          const r = await promisify(execFile)(
            "kubectl",
            ["--kubeconfig", kc, "--cache-dir", join(scratch, "cache"), ...argv],
            { encoding: "utf8", timeout: 30_000 },
          );
          if (update) writeFileSync(golden, r.stdout);
          assert.equal(ours, r.stdout, `${file} differs from kubectl ${argv.join(" ")}`);
        }
        assert.equal(
          ours,
          readFileSync(golden, "utf8"),
          `${file} differs from the recorded kubectl output`,
        );
      }
    } finally {
      await api.close();
    }
  });
});
