/**
 * Component test: DaemonSets on a real node, placed by the real controllers. The real
 * kube-controller-manager (DaemonSet, service account, root CA and garbage collector controllers)
 * and kube-scheduler run against the test API server; the real kubelet and containerd run the
 * pods in a lab namespace (real-node.ts). Proves: (a) a DaemonSet created through the API gets its
 * pod on the node from the controller and the scheduler, the kubelet runs it with its service
 * account's token, and deleting the DaemonSet removes the pod; (b) podpath's fleet collector (the
 * DaemonSet `collect --node-state` uses for large fleets) reads the same node state as its
 * per-node collector pod; (c) podpath killed (SIGKILL) while its collector DaemonSet's pods run:
 * the collector containers end by themselves at the run's deadline, and the next `collect`
 * removes the DaemonSet left behind.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createLab, type Lab, type Namespace } from "../../src/lab/netns.ts";
import {
  BridgeCniOptions,
  CONF_FILE,
  conflist,
  planBridgeReplica,
} from "../../src/lab/scenarios/bridge-cni.ts";
import { COLLECTOR_LABELS, EXPIRES_ANNOTATION } from "../../src/live/collect-collector.ts";
import { type Cluster, DAEMONSET_CONTROLLERS, startCluster } from "./cluster.ts";
import { componentSkip } from "./component-guard.ts";
import type { FleetCollectArgs } from "./fleet-collect.ts";
import { writeKubeconfig } from "./live-objects.ts";
import { runPodpath } from "./podpath-cli.ts";
import {
  collectorImage,
  PAUSE_IMAGE,
  type RealNode,
  realNodeSkip,
  startRealNode,
} from "./real-node.ts";

const NODE = "real-node-ds";
const NODE_IP = "192.168.51.10";
const UPLINK_IP = "192.168.51.1";
const ROOT = join(import.meta.dirname, "../..");
const FLEET = join(import.meta.dirname, "fleet-collect.ts");
const COLLECTOR = "podpath.local/collector:1";
const NS = "kube-system";
/** A rule of our own on the node, so that both collectors have something distinctive to read. */
const MARK_CHAIN = "PODPATH-FLEET-MARK";

const skip =
  componentSkip("kubelet") ||
  componentSkip("kube-apiserver", { kernel: false }) ||
  componentSkip("kube-controller-manager", { kernel: false }) ||
  componentSkip("kube-scheduler", { kernel: false }) ||
  componentSkip("etcd", { kernel: false }) ||
  realNodeSkip();

interface Terminated {
  readonly exitCode: number;
  readonly startedAt?: string;
  readonly finishedAt?: string;
}
interface ContainerStatus {
  readonly containerID?: string;
  readonly ready?: boolean;
  readonly restartCount?: number;
  readonly state?: { running?: unknown; terminated?: Terminated; waiting?: { reason?: string } };
  readonly lastState?: { terminated?: Terminated };
}
interface PodView {
  readonly metadata: {
    name: string;
    ownerReferences?: { kind: string; name: string; controller?: boolean }[];
    annotations?: Record<string, string>;
  };
  readonly spec: { nodeName?: string };
  readonly status?: { phase?: string; containerStatuses?: ContainerStatus[] };
}

function podpath(args: readonly string[], kubeconfig: string) {
  return runPodpath(args, kubeconfig, 300_000);
}

/** Starts the fleet collector (fleet-collect.ts) as its own process. */
function startFleet(args: FleetCollectArgs): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, ["--import", "tsx", FLEET, JSON.stringify(args)], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let text = "";
  child.stdout?.on("data", (d: Buffer) => (text += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (text += d.toString()));
  return { child, output: () => text };
}

async function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
  context: () => string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}\n${context()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The `-A` lines of an iptables-save text (counters and timestamps left out). */
const rules = (t: string) => t.split("\n").filter((l) => l.startsWith("-A "));

describe("DaemonSets on a real node, placed by the real controller manager and scheduler", {
  skip,
  concurrency: false,
}, () => {
  let cluster: Cluster | undefined;
  let lab: Lab | undefined;
  let node: RealNode | undefined;
  let uplink: Namespace | undefined;
  let work = "";
  let admin = "";
  const context = () => `${cluster?.logs() ?? ""}\n${node?.logs() ?? ""}`;

  const pods = async (namespace: string, selector: string): Promise<PodView[]> => {
    const c = cluster!;
    const q = encodeURIComponent(selector);
    const r = await c.api(
      "GET",
      `/api/v1/namespaces/${namespace}/pods?labelSelector=${q}`,
      c.adminToken,
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return (r.body as { items: PodView[] }).items;
  };
  const audit = (pred: (e: Record<string, unknown>) => boolean) =>
    cluster!.auditEvents().filter(pred);
  const by = (e: Record<string, unknown>) => (e["user"] as { username?: string }).username;
  const ref = (e: Record<string, unknown>) =>
    (e["objectRef"] ?? {}) as {
      resource?: string;
      subresource?: string;
      name?: string;
      namespace?: string;
    };

  before(async () => {
    work = mkdtempSync(join(tmpdir(), "podpath-real-node-ds-test-"));
    cluster = await startCluster({
      nodeEgressSocket: join(work, "egress.sock"),
      controllers: DAEMONSET_CONTROLLERS,
      scheduler: true,
    });
    lab = await createLab({ prefix: "ppds" });
    uplink = await lab.addNamespace("uplink");
    node = await startRealNode(
      cluster,
      lab,
      { ns: uplink, ifname: "node0" },
      {
        name: NODE,
        nodeIp: NODE_IP,
        egressSocket: join(work, "egress.sock"),
        cni: { [CONF_FILE]: conflist(planBridgeReplica(BridgeCniOptions.parse({}))) },
        images: [PAUSE_IMAGE, collectorImage(COLLECTOR)],
      },
    );
    for (const [ns, argv] of [
      [uplink, ["ip", "addr", "add", `${UPLINK_IP}/24`, "dev", "node0"]],
      [uplink, ["ip", "link", "set", "node0", "up"]],
      [node.ns, ["iptables", "-t", "nat", "-N", MARK_CHAIN]],
      [node.ns, ["iptables", "-t", "nat", "-A", MARK_CHAIN, "-d", "10.99.0.0/16", "-j", "RETURN"]],
      [node.ns, ["iptables", "-t", "nat", "-A", "POSTROUTING", "-j", MARK_CHAIN]],
    ] as const) {
      const r = await ns.exec([...argv]);
      assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
    }
    admin = writeKubeconfig(cluster, cluster.adminToken, join(work, "admin-kubeconfig"));
  });
  after(async () => {
    await node?.stop();
    await lab?.destroy();
    await cluster?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("a DaemonSet created through the API: the controller makes its pod, the scheduler binds it to the node, the kubelet runs it with its service account; deleted, its pod goes", async () => {
    const c = cluster!;
    const ds = {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "probe", namespace: "default" },
      spec: {
        selector: { matchLabels: { app: "probe" } },
        template: {
          metadata: { labels: { app: "probe" } },
          spec: {
            terminationGracePeriodSeconds: 0,
            containers: [
              {
                name: "probe",
                image: COLLECTOR,
                imagePullPolicy: "Never",
                command: ["sleep", "3600"],
              },
            ],
          },
        },
      },
    };
    // the namespace's `default` service account comes from the controller; admission needs it
    await waitUntil(
      "the default service account",
      async () =>
        (await c.api("GET", "/api/v1/namespaces/default/serviceaccounts/default", c.adminToken))
          .status === 200 || undefined,
      60_000,
      context,
    );
    const made = await c.api(
      "POST",
      "/apis/apps/v1/namespaces/default/daemonsets",
      c.adminToken,
      ds,
    );
    assert.equal(made.status, 201, JSON.stringify(made.body));
    let seen: unknown = [];
    const events = async () =>
      JSON.stringify(
        (
          (await c.api("GET", "/api/v1/namespaces/default/events", c.adminToken)).body as {
            items?: { reason?: string; message?: string }[];
          }
        ).items?.map((e) => `${e.reason}: ${e.message}`),
      );
    const pod = await waitUntil(
      "the DaemonSet's pod to run",
      async () => {
        const [p, ...more] = await pods("default", "app=probe");
        seen = [p?.spec, p?.status, await events()];
        assert.equal(more.length, 0, "one node, one pod");
        return p?.status?.phase === "Running" && p.status.containerStatuses?.[0]?.ready
          ? p
          : undefined;
      },
      180_000,
      () => `${JSON.stringify(seen, null, 1)}\n${context()}`,
    );
    assert.equal(pod.spec.nodeName, NODE);
    assert.deepEqual(
      pod.metadata.ownerReferences?.map((o) => [o.kind, o.name, o.controller]),
      [["DaemonSet", "probe", true]],
    );
    // made by the DaemonSet controller, bound by the scheduler, each under its own identity
    const name = pod.metadata.name;
    const made1 = audit(
      (e) =>
        e["verb"] === "create" &&
        ref(e).resource === "pods" &&
        ref(e).subresource === undefined &&
        ref(e).namespace === "default",
    );
    assert.deepEqual(made1.map(by), ["system:serviceaccount:kube-system:daemon-set-controller"]);
    const bound = audit(
      (e) => e["verb"] === "create" && ref(e).subresource === "binding" && ref(e).name === name,
    );
    assert.deepEqual(bound.map(by), ["system:kube-scheduler"]);
    // the kubelet runs it, with the token the service account controllers made possible
    const id =
      pod.status?.containerStatuses?.[0]?.containerID?.replace(/^containerd:\/\//, "") ?? "";
    const r = node!.execIn(id, ["cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"]);
    assert.deepEqual([r.code, r.output], [0, "default"]);
    const status = await waitUntil(
      "the DaemonSet's status",
      async () => {
        const a = await c.api(
          "GET",
          "/apis/apps/v1/namespaces/default/daemonsets/probe",
          c.adminToken,
        );
        const s = (a.body as { status?: Record<string, number> }).status ?? {};
        return s["numberReady"] === 1 ? s : undefined;
      },
      60_000,
      context,
    );
    assert.equal(status["desiredNumberScheduled"], 1);

    const del = await c.api(
      "DELETE",
      "/apis/apps/v1/namespaces/default/daemonsets/probe",
      c.adminToken,
    );
    assert.equal(del.status, 200, JSON.stringify(del.body));
    await waitUntil(
      "the pod to be removed",
      async () => ((await pods("default", "app=probe")).length === 0 ? true : undefined),
      120_000,
      context,
    );
    const collected = audit(
      (e) => e["verb"] === "delete" && ref(e).resource === "pods" && ref(e).name === name,
    );
    assert.ok(
      collected.map(by).includes("system:serviceaccount:kube-system:generic-garbage-collector"),
      JSON.stringify(collected.map(by)),
    );
  });

  it("podpath's fleet collector (a DaemonSet) runs on the node and reads what its per-node collector pod reads", async () => {
    // The collectors run on the host network; the pod network is not theirs. A pod removed just
    // before (the first test's) leaves the node's bridge after its API object is gone: its veth
    // goes, then cni0 loses its carrier (`linkdown` routes) and its IPv6 link-local route. Both
    // collectors must read the node in one state, so wait until that state has settled.
    const netState = async () => {
      const ports = (await node!.ns.exec(["ip", "-o", "link", "show", "master", "cni0"])).stdout;
      const bridge = await node!.ns.exec(["ip", "-o", "link", "show", "dev", "cni0"]);
      const reads = await Promise.all(
        [
          ["ip", "route", "show", "table", "all"],
          ["ip", "-6", "route", "show", "table", "all"],
          ["ip", "addr"],
        ].map(async (argv) => (await node!.ns.exec(argv)).stdout),
      );
      const idle =
        ports.trim() === "" && (bridge.code !== 0 || /NO-CARRIER|state DOWN/.test(bridge.stdout));
      return { idle, text: reads.join("\n") };
    };
    let last = "";
    await waitUntil(
      "the pod network on the node to settle (no pod on cni0, the same routes twice)",
      async () => {
        const s = await netState();
        const settled = s.idle && s.text === last;
        last = s.text;
        return settled || undefined;
      },
      120_000,
      () => `${last}\n${context()}`,
    );
    const fleetDir = join(work, "fleet");
    const runId = "fleet1";
    const f = startFleet({
      kubeconfig: admin,
      out: fleetDir,
      options: { nodeState: true, nodes: NODE, collectorImage: COLLECTOR, runId },
    });
    const code = await new Promise<number | null>((r) => f.child.once("exit", r));
    assert.equal(code, 0, `${f.output()}\n${context()}`);
    const report = JSON.parse(f.output().trim().split("\n").at(-1) ?? "") as {
      failures: unknown[];
      collectorsCreated: string[];
      collectorsRemoved: string[];
      nodes: { total: number; done: number; failed: number };
    };
    assert.deepEqual(report.failures, [], f.output());
    const dsKey = `daemonset/${NS}/podpath-collector-${runId}`;
    assert.deepEqual(report.collectorsCreated, [dsKey]);
    assert.deepEqual(report.collectorsRemoved, [dsKey]);
    assert.deepEqual(report.nodes, { total: 1, done: 1, failed: 0 });
    // the collector pod came from the real DaemonSet controller and scheduler
    const created = audit(
      (e) =>
        e["verb"] === "create" &&
        ref(e).resource === "pods" &&
        ref(e).subresource === undefined &&
        ref(e).namespace === NS,
    );
    assert.deepEqual(created.map(by), ["system:serviceaccount:kube-system:daemon-set-controller"]);

    const podDir = join(work, "per-node");
    const p = await podpath(
      ["collect", "--out", podDir, "--node-state", "--collector-image", COLLECTOR],
      admin,
    );
    assert.equal(p.code, 0, `${p.stderr}\n${context()}`);
    const files = (d: string) => readdirSync(join(d, "nodes", NODE)).sort();
    assert.deepEqual(files(fleetDir), files(podDir));
    const read = (d: string, f: string) => readFileSync(join(d, "nodes", NODE, f), "utf8");
    const direct = (await node!.ns.exec(["iptables-save"])).stdout;
    assert.ok(rules(direct).includes(`-A POSTROUTING -j ${MARK_CHAIN}`), direct);
    assert.deepEqual(rules(read(fleetDir, "iptables-save.txt")), rules(direct));
    assert.deepEqual(rules(read(podDir, "iptables-save.txt")), rules(direct));
    for (const f of [
      "ip-route.txt",
      "ip-rule.txt",
      "ip6-route.txt",
      "ip6-rule.txt",
      "ip-addr.txt",
      "sysctl.txt",
    ]) {
      assert.equal(read(fleetDir, f), read(podDir, f), f);
    }
    // every routing table and the policy rules, as the node's own ip prints them
    for (const [f, argv] of [
      ["ip-route.txt", ["ip", "route", "show", "table", "all"]],
      ["ip-rule.txt", ["ip", "rule"]],
    ] as const) {
      assert.equal(read(fleetDir, f), (await node!.ns.exec(argv)).stdout, f);
    }
    assert.match(
      read(fleetDir, "ip-addr.txt"),
      new RegExp(`inet ${NODE_IP.replace(/\./g, "\\.")}/24`),
    );
    // both runs cleaned up after themselves (a DaemonSet's pods go with it, by the collector)
    await waitUntil(
      "the collectors to be removed",
      async () =>
        (await pods(NS, `${COLLECTOR_LABELS.managedBy}=podpath`)).length === 0 ? true : undefined,
      120_000,
      context,
    );
  });

  it("podpath killed mid-run: its DaemonSet's collectors end by themselves at the deadline, and the next collect removes the DaemonSet", async () => {
    const c = cluster!;
    const runId = "kill1";
    const dsPath = `/apis/apps/v1/namespaces/${NS}/daemonsets/podpath-collector-${runId}`;
    // short timeouts, so that the run's deadline (start + pod start + 8 execs + capture) is near
    const f = startFleet({
      kubeconfig: admin,
      out: join(work, "killed"),
      options: {
        nodeState: true,
        nodes: NODE,
        collectorImage: COLLECTOR,
        runId,
        podStartTimeoutMs: 30_000,
        execTimeoutMs: 1_000,
        capture: { host: UPLINK_IP, seconds: 10 },
      },
    });
    const exited = new Promise<void>((r) => f.child.once("exit", () => r()));
    const running = await waitUntil(
      "the collector DaemonSet's pod to run",
      async () => {
        assert.equal(f.child.exitCode, null, `the run ended before its pods ran:\n${f.output()}`);
        const [p] = await pods(NS, `${COLLECTOR_LABELS.run}=${runId}`);
        return p?.status?.containerStatuses?.[0]?.ready ? p : undefined;
      },
      60_000,
      context,
    );
    f.child.kill("SIGKILL");
    await exited;
    assert.equal(f.child.signalCode, "SIGKILL");
    assert.doesNotMatch(f.output(), /"collectorsCreated"/, "killed mid-run, before its report");
    assert.equal((await c.api("GET", dsPath, c.adminToken)).status, 200, "the DaemonSet is left");
    const deadline = Date.parse(running.metadata.annotations?.[EXPIRES_ANNOTATION] ?? "");
    assert.ok(deadline > Date.now(), "the collector is within its lifetime when podpath dies");
    const first = running.status?.containerStatuses?.[0];

    // the collector's own command ends it at the deadline: nothing else is left to stop it
    const ended = await waitUntil(
      "the collector container to end",
      async () => {
        const [p] = await pods(NS, `${COLLECTOR_LABELS.run}=${runId}`);
        const s = p?.status?.containerStatuses?.[0];
        // the first container's end: the one that started before the deadline
        for (const t of [s?.state?.terminated, s?.lastState?.terminated]) {
          if (p && t?.finishedAt && Date.parse(t.startedAt ?? "") < deadline) return { t, pod: p };
        }
        return undefined;
      },
      deadline - Date.now() + 90_000,
      context,
    );
    assert.equal(ended.pod.metadata.name, running.metadata.name, "the same pod, not a new one");
    const finished = Date.parse(ended.t.finishedAt ?? "");
    // finishedAt has whole seconds; `timeout` ends the wait at the deadline rounded up
    assert.ok(
      finished >= deadline - 1_000,
      `ended ${new Date(finished).toISOString()} before ${new Date(deadline).toISOString()}`,
    );
    assert.ok(
      finished <= deadline + 10_000,
      `ended ${new Date(finished).toISOString()}, long after ${new Date(deadline).toISOString()}`,
    );
    assert.ok([0, 124].includes(ended.t.exitCode), `exit ${ended.t.exitCode}`);
    assert.ok(first?.containerID, "the first container had started");

    // restarted (restartPolicy Always), a collector past its deadline ends at once
    const idle = await waitUntil(
      "a restarted collector container to end",
      async () => {
        const [p] = await pods(NS, `${COLLECTOR_LABELS.run}=${runId}`);
        const s = p?.status?.containerStatuses?.[0];
        for (const t of [s?.state?.terminated, s?.lastState?.terminated]) {
          if (
            t?.startedAt &&
            t.startedAt !== ended.t.startedAt &&
            Date.parse(t.startedAt) >= finished
          )
            return t;
        }
        return undefined;
      },
      120_000,
      context,
    );
    assert.ok([0, 124].includes(idle.exitCode), `exit ${idle.exitCode}`);
    assert.ok(Date.parse(idle.finishedAt ?? "") - Date.parse(idle.startedAt ?? "") <= 2_000);

    // the next collect removes the expired DaemonSet (and the garbage collector its pods)
    const next = await podpath(
      ["collect", "--out", join(work, "next"), "--node-state", "--collector-image", COLLECTOR],
      admin,
    );
    assert.equal(next.code, 0, `${next.stderr}\n${context()}`);
    assert.match(
      next.stderr,
      new RegExp(
        `removed expired collectors of an earlier run: daemonset/${NS}/podpath-collector-${runId}`,
      ),
    );
    assert.equal((await c.api("GET", dsPath, c.adminToken)).status, 404);
    const removedBy = audit(
      (e) =>
        e["verb"] === "delete" &&
        ref(e).resource === "daemonsets" &&
        ref(e).name === `podpath-collector-${runId}`,
    );
    assert.deepEqual(removedBy.map(by), ["admin"]);
    await waitUntil(
      "the left collector pod to be removed",
      async () =>
        (await pods(NS, `${COLLECTOR_LABELS.run}=${runId}`)).length === 0 ? true : undefined,
      120_000,
      context,
    );
    assert.ok(existsSync(join(work, "next", "nodes", NODE, "iptables-save.txt")));
  });
});
