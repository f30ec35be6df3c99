/**
 * End-to-end: `collect --node-state` (the built CLI) on a fleet large enough for the collector
 * DaemonSet, killed (SIGKILL) right after it created the DaemonSet. The DaemonSet left behind
 * carries its own deadline (the container's command ends at `expires-at`, whatever happened to
 * podpath), and once that has passed the next run removes it by its labels. Against the fake API
 * server of test/k8s-api; every wait is for a condition.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fleetCluster, fleetExec } from "../k8s-api/fleet.ts";
import { kubeconfigFor, type Obj, startFakeApi } from "../k8s-api/server.ts";

const CLI = join(import.meta.dirname, "../../dist/cli/main.js");
const scratch = mkdtempSync(join(tmpdir(), "podpath-deadline-e2e-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

function collect(out: string, kc: string) {
  const child = spawn(
    process.execPath,
    [CLI, "collect", "--allow-plaintext-credentials", "--node-state", "--out", out],
    { env: { ...process.env, KUBECONFIG: kc, NO_COLOR: "1" } },
  );
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  child.stdout.resume();
  const done = new Promise<{ code: number | null; signal: string | null; stderr: string }>((r) =>
    child.on("close", (code, signal) => r({ code, signal, stderr })),
  );
  return { child, done };
}

const managed = (o: Obj) => o.metadata.labels?.["app.kubernetes.io/managed-by"] === "podpath";

describe("the collector DaemonSet of a killed run", () => {
  it("ends by its own deadline, and the next run removes it once expired", async () => {
    let kill: () => void = () => {};
    const api = await startFakeApi(fleetCluster(60), {
      exec: fleetExec,
      podStartMs: 100,
      onRequest: (r) => {
        if (r.verb === "create" && r.resource === "daemonsets") kill();
      },
    });
    after(() => api.close());
    const kc = join(scratch, "kubeconfig");
    writeFileSync(kc, kubeconfigFor(api.url, { token: "t" }));

    const first = collect(join(scratch, "first"), kc);
    kill = () => first.child.kill("SIGKILL");
    const killed = await first.done;
    assert.equal(killed.signal, "SIGKILL", killed.stderr);
    // the kill came as the DaemonSet was asked for; the server may still be making it
    let left: Obj[] = [];
    while (left.length === 0) {
      left = (api.store.get("daemonsets") ?? []).filter(managed);
      if (left.length === 0) await new Promise((r) => setImmediate(r));
    }
    assert.equal(left.length, 1);
    const ds = left[0] as Obj;
    const pod = (
      ds["spec"] as {
        template: { spec: { restartPolicy: string; containers: { command: string[] }[] } };
      }
    ).template.spec;
    assert.equal(pod.restartPolicy, "Always");
    const command = pod.containers[0]?.command ?? [];
    assert.equal(command[0], "sh");
    assert.match(command[2] ?? "", /exec timeout "\$left" sleep "\$left"/);
    const expiresAt = Date.parse(ds.metadata.annotations?.["podpath.dev/expires-at"] ?? "");
    // the command's deadline is expires-at in whole seconds (rounded up)
    assert.equal(
      Number(command.at(-1)),
      Math.ceil(expiresAt / 1000),
      "the command ends at expires-at",
    );
    assert.ok(expiresAt > Date.now(), "the deadline lies ahead");

    // the deadline passes (the pods' command has ended; only the DaemonSet object is left)
    (ds.metadata.annotations as Record<string, string>)["podpath.dev/expires-at"] = new Date(
      Date.now() - 1000,
    ).toISOString();
    const next = await collect(join(scratch, "next"), kc).done;
    assert.equal(next.code, 0, next.stderr);
    assert.match(
      next.stderr,
      new RegExp(
        `removed expired collectors of an earlier run: daemonset/kube-system/${ds.metadata.name}`,
      ),
    );
    assert.deepEqual((api.store.get("daemonsets") ?? []).filter(managed), []);
    assert.deepEqual((api.store.get("pods") ?? []).filter(managed), []);
  });
});
