/**
 * @module test/e2e/fake-api-collect — `podpath collect` (the built CLI) against test/k8s-api's fake
 * API server with the small cluster, for the tests that need its output. The fake API answers in
 * the test's own process, so the CLI runs beside it (spawn), never blocking it (spawnSync).
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { kubeconfigFor, startFakeApi } from "../k8s-api/server.ts";
import { smallCluster, smallClusterExec } from "../k8s-api/small-cluster.ts";

const CLI = join(import.meta.dirname, "../../dist/cli/main.js");

/** Runs `collect --out <dir>/snap -o <format>` with a kubeconfig written into `dir`. */
export async function collectFromFakeApi(
  dir: string,
  format: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const api = await startFakeApi(smallCluster(), { gkeCrds: true, exec: smallClusterExec });
  try {
    const kc = join(dir, "kubeconfig");
    writeFileSync(kc, kubeconfigFor(api.url, { token: "t" }, "prod"));
    const child = spawn(
      process.execPath,
      [CLI, "collect", "--allow-plaintext-credentials", "--out", join(dir, "snap"), "-o", format],
      {
        env: { ...process.env, KUBECONFIG: kc, NO_COLOR: "1" },
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const code = await new Promise<number | null>((done) => child.on("close", done));
    return { code, stdout, stderr };
  } finally {
    await api.close();
  }
}
