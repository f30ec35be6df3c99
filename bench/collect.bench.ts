/**
 * Collect benchmark: a simulated fleet of 2,000 nodes (COLLECT_BENCH_NODES) served by the fake
 * API server (test/k8s-api, in its own process), measured in the same run:
 *
 * 1. objects (read-only): `podpath collect` (built CLI) next to the kubectl commands a person would
 *    run for the same objects (`kubectl get nodes -o yaml`, ..., one after another).
 * 2. node state (`--node-state`, the DaemonSet path): `podpath collect --node-state` next to the
 *    transport floor: a bare WebSocket client that only runs the same one exec per node at the
 *    same concurrency against pods that already run (no discovery, no DaemonSet, no files). kubectl
 *    cannot stand in here: the kubectl this API version selects speaks SPDY for exec.
 *
 * Wall time and peak RSS come from /usr/bin/time; figures are printed as ratios to the reference.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { kubeconfigFor } from "../test/k8s-api/server.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(root, "dist", "cli", "main.js");
const NODES = Number(process.env["COLLECT_BENCH_NODES"] ?? "2000");
const CONCURRENCY = Number(process.env["COLLECT_BENCH_CONCURRENCY"] ?? "20");

interface Measured {
  seconds: number;
  maxRssMb: number;
}

function measure(command: string, env: Record<string, string> = {}): Measured {
  const r = spawnSync("/usr/bin/time", ["-f", "__TIME__ %e %M", "sh", "-c", command], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, ...env },
  });
  const m = /__TIME__ ([\d.]+) (\d+)/.exec(r.stderr);
  if (!m) throw new Error(`failed: ${command}\n${r.stderr.slice(-2000)}`);
  if (r.status !== 0 && r.status !== 3)
    throw new Error(`exit ${r.status}: ${command}\n${r.stderr.slice(-2000)}`);
  return { seconds: Number(m[1]), maxRssMb: Number(m[2]) / 1024 };
}

async function startServer(): Promise<{ url: string; stop: () => void }> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(root, "test", "k8s-api", "serve.ts"), "fleet", String(NODES)],
    { cwd: root, stdio: ["pipe", "pipe", "inherit"] },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let buf = "";
    child.stdout.on("data", (b: Buffer) => {
      buf += b.toString();
      const line = buf.split("\n")[0];
      if (buf.includes("\n") && line) resolve(line.trim());
    });
    child.on("exit", (c) => reject(new Error(`server exited ${c}`)));
  });
  return { url, stop: () => child.stdin.end() };
}

/** The transport floor: one exec of the node script per pod, `limit` at a time, bare WebSocket. */
async function floor(url: string, pods: readonly string[], script: string, limit: number) {
  let next = 0;
  let bytes = 0;
  const one = (pod: string) =>
    new Promise<void>((resolve, reject) => {
      const q = new URLSearchParams([
        ["command", "sh"],
        ["command", "-c"],
        ["command", script],
        ["container", "collector"],
        ["stdout", "true"],
        ["stderr", "true"],
      ]);
      const ws = new WebSocket(
        `${url.replace("http", "ws")}/api/v1/namespaces/kube-system/pods/${pod}/exec?${q}`,
        ["v5.channel.k8s.io", "v4.channel.k8s.io"],
        { headers: { Authorization: "Bearer bench" } },
      );
      ws.on("message", (d: Buffer) => {
        bytes += d.length;
      });
      ws.on("close", () => resolve());
      ws.on("error", reject);
    });
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < pods.length) await one(pods[next++]!);
    }),
  );
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, bytes };
}

const fmt = (m: Measured) => `${m.seconds.toFixed(2)} s, peak RSS ${m.maxRssMb.toFixed(0)} MB`;

async function main(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), "podpath-collect-bench-"));
  const server = await startServer();
  try {
    const kc = join(scratch, "kubeconfig");
    writeFileSync(kc, kubeconfigFor(server.url, { token: "bench" }));
    console.log(`fleet: ${NODES} simulated nodes, concurrency ${CONCURRENCY}`);

    // 1. objects
    const ours = measure(
      `node ${CLI} collect --allow-plaintext-credentials --out ${join(scratch, "objects")} --kubeconfig ${kc} > /dev/null`,
    );
    const cache = join(scratch, "kcache");
    const k = `kubectl --kubeconfig ${kc} --cache-dir ${cache}`;
    const hasKubectl = spawnSync("kubectl", ["version", "--client"]).status === 0;
    if (hasKubectl) {
      spawnSync("sh", ["-c", `${k} get --raw /api > /dev/null`]); // warm the discovery cache
      const ref = measure(
        [
          `${k} get nodes -o yaml`,
          `${k} get namespaces -o yaml`,
          `${k} get configmap -n kube-system ip-masq-agent -o yaml`,
          `${k} get daemonsets -n kube-system -o yaml`,
          `${k} get pods -n kube-system -l k8s-app=ip-masq-agent -o yaml`,
          `${k} get pods -n kube-system -l component=kube-proxy -o yaml`,
          `${k} get services -A -o yaml`,
          `${k} get networkpolicies -A -o yaml`,
          `${k} get egressnatpolicies.networking.gke.io -o yaml`,
        ]
          .map((c) => `${c} > /dev/null`)
          .join(" && "),
      );
      console.log(`objects   podpath collect        ${fmt(ours)}`);
      console.log(`          kubectl get x 9        ${fmt(ref)}`);
      console.log(
        `          ratio podpath/kubectl  time ${(ours.seconds / ref.seconds).toFixed(2)}`,
      );
    } else {
      console.log(
        `objects   podpath collect        ${fmt(ours)} (kubectl not installed: no reference)`,
      );
    }

    // 2. node state through the DaemonSet path
    const nodeState = measure(
      `node ${CLI} collect --allow-plaintext-credentials --out ${join(scratch, "fleet")} --kubeconfig ${kc} --node-state --concurrency ${CONCURRENCY} > /dev/null`,
    );
    const written = readdirSync(join(scratch, "fleet", "nodes")).length;
    // the floor execs into pods the fleet server keeps running on every node (floor-<i>)
    const { NODE_SCRIPT } = await import("../src/live/collect-commands.ts");
    const pods = Array.from({ length: NODES }, (_, i) => `floor-${i}`);
    const f = await floor(server.url, pods, NODE_SCRIPT, CONCURRENCY);
    console.log(
      `nodes     podpath --node-state   ${fmt(nodeState)}; ${written}/${NODES} nodes written`,
    );
    console.log(
      `          bare WebSocket floor   ${f.seconds.toFixed(2)} s (${(f.bytes / 1e6).toFixed(1)} MB streamed, in-process)`,
    );
    console.log(
      `          ratio podpath/floor    time ${(nodeState.seconds / f.seconds).toFixed(2)} (podpath adds the DaemonSet, pod polling, files)`,
    );
  } finally {
    server.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();
