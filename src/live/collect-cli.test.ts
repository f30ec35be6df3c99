import assert from "node:assert/strict";
import { execFile, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { kubeconfigFor, startFakeApi } from "../../test/k8s-api/server.ts";
import { smallCluster, smallClusterExec } from "../../test/k8s-api/small-cluster.ts";

// End to end: the built CLI (npm test builds dist/ first), as `podpath` and as a kubectl plugin.
const CLI = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "podpath-collect-cli-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
const hasKubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status === 0;

function run(
  cmd: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { env: { ...process.env, ...env }, encoding: "utf8", timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

describe("podpath collect (built CLI)", () => {
  it("works as `kubectl podpath` with kubectl's KUBECONFIG, --context and -n", async () => {
    assert.ok(existsSync(CLI), "dist/cli/main.js is missing: run npm run build");
    const api = await startFakeApi(smallCluster(), { gkeCrds: true, exec: smallClusterExec });
    try {
      const kc = join(scratch, "kc-plugin");
      writeFileSync(kc, kubeconfigFor(api.url, { token: "t" }, "prod"));
      const bin = join(scratch, "bin");
      spawnSync("mkdir", ["-p", bin]);
      const plugin = join(bin, "kubectl-podpath");
      writeFileSync(plugin, `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
      chmodSync(plugin, 0o755);
      const out = join(scratch, "snap-plugin");
      const args = [
        "collect",
        "--allow-plaintext-credentials",
        "--out",
        out,
        "--context",
        "prod",
        "-n",
        "vpn",
        "--pod",
        "openvpn-6f7d8c9b5-x2x7p",
      ];
      const env = { KUBECONFIG: kc, PATH: `${bin}:${process.env["PATH"]}` };
      const r = hasKubectl
        ? await run("kubectl", ["podpath", ...args], env)
        : await run(plugin, args, env);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `${out}\n`);
      // -n gave the pod its namespace, as kubectl does
      assert.match(
        readFileSync(join(out, "pods/vpn/openvpn-6f7d8c9b5-x2x7p/sysctl.txt"), "utf8"),
        /ip_forward = 0/,
      );
    } finally {
      await api.close();
    }
  });

  it("SIGINT while collector pods start: they are removed, the partial snapshot is kept, exit 130", async () => {
    let created = 0;
    let sent = false;
    let child: ReturnType<typeof spawn> | undefined;
    const api = await startFakeApi(smallCluster(), {
      gkeCrds: true,
      exec: smallClusterExec,
      podStartMs: 600_000,
      onRequest: (q) => {
        if (q.verb === "create" && q.resource === "pods" && ++created === 3 && !sent) {
          sent = true;
          setTimeout(() => child?.kill("SIGINT"), 200);
        }
      },
    });
    try {
      const kc = join(scratch, "kc-int");
      writeFileSync(kc, kubeconfigFor(api.url, { token: "t" }));
      const out = join(scratch, "snap-int");
      child = spawn(
        process.execPath,
        [
          CLI,
          "collect",
          "--allow-plaintext-credentials",
          "--out",
          out,
          "--kubeconfig",
          kc,
          "--node-state",
        ],
        {
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let stderr = "";
      child.stderr?.on("data", (b: Buffer) => {
        stderr += b.toString();
      });
      const code = await new Promise<number | null>((resolve) =>
        child?.on("exit", (c) => resolve(c)),
      );
      assert.ok(sent, "the run never started its collectors");
      assert.equal(code, 130, stderr);
      assert.match(
        stderr,
        /interrupted; the partial snapshot is kept and collector pods were removed/,
      );
      assert.doesNotMatch(stderr, /\n\s+at /);
      const left = (api.store.get("pods") ?? []).filter(
        (p) => p.metadata.labels?.["app.kubernetes.io/managed-by"] === "podpath",
      );
      assert.deepEqual(
        left.map((p) => p.metadata.name),
        [],
      );
      assert.equal(api.requests.filter((q) => q.verb === "delete").length, 3);
      assert.ok(existsSync(join(out, "cluster/nodes.yaml")));
    } finally {
      await api.close();
    }
  });
});

describe("podpath diagnose --live", () => {
  it("collects into a kept snapshot that diagnose reads, every finding citing a real line of it", async () => {
    const api = await startFakeApi(smallCluster(), { gkeCrds: true, exec: smallClusterExec });
    try {
      const kc = join(scratch, "kc-diag");
      writeFileSync(kc, kubeconfigFor(api.url, { token: "t" }));
      const keep = join(scratch, "keep-diag");
      const r = await run(
        process.execPath,
        [
          CLI,
          "diagnose",
          "--live",
          "--allow-plaintext-credentials",
          "--kubeconfig",
          kc,
          "--pod",
          "vpn/openvpn-6f7d8c9b5-x2x7p",
          "--node-state",
          "--keep",
          keep,
          "-o",
          "json",
        ],
        {},
      );
      assert.equal(r.code, 1, r.stderr); // error-severity findings
      const answer = JSON.parse(r.stdout) as {
        findings: {
          id: string;
          subject: string;
          evidence: { file: string; line: number; text?: string }[];
        }[];
      };
      const ids = answer.findings.map((f) => `${f.id} ${f.subject}`);
      assert.ok(
        ids.includes("vpn/forwarding-disabled pod/vpn/openvpn-6f7d8c9b5-x2x7p"),
        ids.join("\n"),
      );
      assert.ok(ids.includes("masq/agent-missing pool/pool-b"), ids.join("\n"));
      // the agent's own rules on pool-a match the ConfigMap: no drift reported there
      assert.ok(
        !ids.some((i) => i.startsWith("masq/intent-rules-drift node/gke-prod-pool-a")),
        ids.join("\n"),
      );
      for (const f of answer.findings) {
        assert.ok(f.evidence.length > 0, f.id);
        for (const e of f.evidence) {
          const lines = readFileSync(join(keep, e.file), "utf8").split("\n");
          if (e.text !== undefined)
            assert.ok(
              lines[e.line - 1]?.includes(e.text.replace(/…$/, "").trim()),
              `${e.file}:${e.line}`,
            );
        }
      }
      assert.deepEqual(
        (api.store.get("pods") ?? []).filter(
          (p) => p.metadata.labels?.["app.kubernetes.io/managed-by"] === "podpath",
        ),
        [],
      );
    } finally {
      await api.close();
    }
  });
});
