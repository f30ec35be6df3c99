/**
 * Component test: the SNAT case end to end on a real node. The real kubelet and containerd (with
 * runc and the bridge CNI plugin from Debian) run in a lab namespace against the real API server;
 * a Pod created through the API gets its sandbox and address from the real plugin, with the node's
 * conflist leaving `ipMasq` off, behind a router to an on-prem host that routes back only the
 * node range. Then, as a user would: `podpath collect` as the podpath-reader user, the node's rules
 * and routes read with the real tools, captures on both sides, `diagnose` (the bridge plugin's
 * conflist is the cause), `plan` (the plugin's own knob), the plan applied on the node (ipMasq on,
 * the pod set up again), and `verify` on the wire. The chain the real plugin writes is held
 * against podpath's replica of it (agents/bridge-cni/rules.ts).
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse } from "yaml";
import { podMasqRules } from "../../src/agents/bridge-cni/rules.ts";
import { planMasquerade } from "../../src/cases/masquerade/plan.ts";
import { verifyChange } from "../../src/cases/masquerade/proof.ts";
import {
  collectKernelState,
  renderTranscript,
  startCapture,
  writeSnapshotFile,
} from "../../src/lab/artifacts.ts";
import { createLab, type Lab, type Namespace } from "../../src/lab/netns.ts";
import {
  BridgeCniOptions,
  CONF_FILE,
  conflist,
  NETWORK,
  POD_SUBNET,
  planBridgeReplica,
} from "../../src/lab/scenarios/bridge-cni.ts";
import { ONPREM_IP, SITE_NAME } from "../../src/lab/scenarios/masquerade.ts";
import { onpremSite } from "../../src/lab/scenarios/snat-replica.ts";
import { contains, parseCidr, parseIp } from "../../src/net/cidr.ts";
import { diagnose } from "../../src/questions/diagnose.ts";
import { loadSnapshot } from "../../src/snapshot/load.ts";
import { openSnapshot } from "../../src/snapshot/source.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { componentSkip } from "./component-guard.ts";
import { bindClusterRole, type Obj, waitForAccess, writeKubeconfig } from "./live-objects.ts";
import { runPodpath } from "./podpath-cli.ts";
import {
  collectorImage,
  PAUSE_IMAGE,
  type RealNode,
  realNodeSkip,
  startRealNode,
} from "./real-node.ts";

const NODE = "real-node-0";
const NODE_IP = "192.168.50.10";
const ROUTER_IP = "192.168.50.1";
const NODE_RANGE = "192.168.0.0/16";
const ROOT = join(import.meta.dirname, "../..");
const ROLE = parse(readFileSync(join(ROOT, "deploy/rbac/podpath-reader.yaml"), "utf8")) as Obj;
const IMAGE = "podpath.local/tools:1";
const COLLECTOR = "podpath.local/collector:1";
const PING = ["ping", "-c", "3", "-i", "0.2", "-W", "1"] as const;

const skip =
  componentSkip("kubelet") ||
  componentSkip("kube-apiserver", { kernel: false }) ||
  componentSkip("etcd", { kernel: false }) ||
  realNodeSkip();

function podpath(args: readonly string[], kubeconfig: string) {
  return runPodpath(args, kubeconfig, 180_000);
}

describe("a real node: kubelet, containerd and the bridge plugin, the SNAT case end to end", {
  skip,
  concurrency: false,
}, () => {
  let cluster: Cluster | undefined;
  let lab: Lab | undefined;
  let node: RealNode | undefined;
  let router: Namespace | undefined;
  let onprem: Namespace | undefined;
  let work = "";
  let kubeconfig = "";

  before(async () => {
    work = mkdtempSync(join(tmpdir(), "podpath-real-node-test-"));
    cluster = await startCluster({ nodeEgressSocket: join(work, "egress.sock") });
    lab = await createLab({ prefix: "ppk" });
    router = await lab.addNamespace("router");
    onprem = await lab.addNamespace("onprem");
    await lab.link(router, "onprem0", onprem, "eth0");
    node = await startRealNode(
      cluster,
      lab,
      { ns: router, ifname: "node0" },
      {
        name: NODE,
        nodeIp: NODE_IP,
        egressSocket: join(work, "egress.sock"),
        cni: { [CONF_FILE]: conflist(planBridgeReplica(BridgeCniOptions.parse({}))) },
        images: [
          PAUSE_IMAGE,
          {
            ref: IMAGE,
            binaries: ["/bin/busybox", "/usr/bin/ping", "/sbin/ip"],
            applets: ["sh", "sleep", "cat", "sysctl"],
            cmd: ["/bin/sleep", "2147483647"],
          },
          collectorImage(COLLECTOR),
        ],
      },
    );
    const run = async (ns: Namespace, argv: string[]) => {
      const r = await ns.exec(argv);
      assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
    };
    await run(router, ["ip", "addr", "add", `${ROUTER_IP}/24`, "dev", "node0"]);
    await run(router, ["ip", "addr", "add", "10.20.0.1/16", "dev", "onprem0"]);
    for (const i of ["node0", "onprem0", "lo"]) await run(router, ["ip", "link", "set", i, "up"]);
    await run(router, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    await run(onprem, ["ip", "addr", "add", `${ONPREM_IP}/16`, "dev", "eth0"]);
    for (const i of ["eth0", "lo"]) await run(onprem, ["ip", "link", "set", i, "up"]);
    // on-prem routes back the node range only, as the seed's far side does
    await run(onprem, ["ip", "route", "add", NODE_RANGE, "via", "10.20.0.1"]);
    await run(node.ns, ["ip", "route", "add", "default", "via", ROUTER_IP]);

    await cluster.api("POST", "/api/v1/namespaces/default/serviceaccounts", cluster.adminToken, {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "default", namespace: "default" },
    });
    await bindClusterRole(cluster, ROLE, { kind: "User", name: "podpath-reader" });
    await waitForAccess(cluster, cluster.readerToken, "/api/v1/pods");
    kubeconfig = writeKubeconfig(cluster, cluster.readerToken, join(work, "kubeconfig"));
  });
  after(async () => {
    await node?.stop();
    await lab?.destroy();
    await cluster?.stop();
    // PODPATH_KEEP_SNAPSHOTS=1 keeps the snapshots the test took, for a look after a failure
    if (work && !process.env["PODPATH_KEEP_SNAPSHOTS"])
      rmSync(work, { recursive: true, force: true });
    else if (work) console.log(`# snapshots kept in ${work}`);
  });

  /** Creates the app pod on the node and waits until it runs; returns its address and container. */
  async function runApp(): Promise<{ ip: string; container: string }> {
    const c = cluster!;
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "app", namespace: "default", labels: { app: "app" } },
      spec: {
        nodeName: NODE,
        automountServiceAccountToken: false,
        terminationGracePeriodSeconds: 0,
        containers: [{ name: "app", image: IMAGE, imagePullPolicy: "Never" }],
      },
    };
    const made = await c.api("POST", "/api/v1/namespaces/default/pods", c.adminToken, pod);
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const deadline = Date.now() + 180_000;
    for (;;) {
      const a = await c.api("GET", "/api/v1/namespaces/default/pods/app", c.adminToken);
      const st = (a.body as { status?: Record<string, unknown> }).status ?? {};
      const cs = (st["containerStatuses"] as { containerID?: string; ready?: boolean }[]) ?? [];
      if (st["phase"] === "Running" && typeof st["podIP"] === "string" && cs[0]?.containerID) {
        return { ip: st["podIP"], container: cs[0].containerID.replace(/^containerd:\/\//, "") };
      }
      assert.ok(
        Date.now() < deadline,
        `the pod did not run: ${JSON.stringify(st)}\n${node!.logs()}`,
      );
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  async function deleteApp(): Promise<void> {
    const c = cluster!;
    await c.api("DELETE", "/api/v1/namespaces/default/pods/app?gracePeriodSeconds=0", c.adminToken);
    const deadline = Date.now() + 120_000;
    while (
      (await c.api("GET", "/api/v1/namespaces/default/pods/app", c.adminToken)).status !== 404
    ) {
      assert.ok(Date.now() < deadline, `the pod was not removed\n${node!.logs()}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** A snapshot as a user takes it: collect, then the node's state, captures and probes. */
  async function snapshot(
    name: string,
    app: { ip: string; container: string },
    phase: "before" | "after",
  ): Promise<{ dir: string; podPing: number; nodePing: number }> {
    const dir = join(work, name);
    const c = await podpath(["collect", "--out", dir, "--pod", "default/app"], kubeconfig);
    // the app's image has no iptables-save (apps rarely do): collect says so and exits 3
    assert.equal(c.code, 3, c.stderr);
    assert.match(
      c.stderr,
      /not collected \(1\):\n\s+pod\/default\/app: iptables-save: iptables-save is not in the image/,
    );
    const captures = [
      await startCapture(node!.ns, dir, "node", {
        iface: "any",
        filter: `host ${ONPREM_IP}`,
        point: `node/${NODE}`,
        phase,
      }),
      await startCapture(onprem!, dir, `remote-${SITE_NAME}`, {
        iface: "eth0",
        filter: `host ${ONPREM_IP}`,
        point: `remote/${SITE_NAME}`,
        phase,
      }),
    ];
    const shown = `${PING.join(" ")} ${ONPREM_IP}`;
    const nodeRun = await node!.ns.exec([...PING, ONPREM_IP]);
    const podRun = node!.execIn(app.container, [...PING, ONPREM_IP]);
    await new Promise((r) => setTimeout(r, 200)); // the last replies reach tcpdump
    for (const cap of captures) await cap.stop();
    writeSnapshotFile(
      dir,
      "probes/node.txt",
      `# client: node/${NODE}\n${renderTranscript([{ shown, code: nodeRun.code, output: nodeRun.stdout + nodeRun.stderr }])}`,
    );
    writeSnapshotFile(
      dir,
      "probes/pod-app.txt",
      `# client: pod/default/app\n${renderTranscript([{ shown, code: podRun.code, output: podRun.output }])}`,
    );
    await collectKernelState(node!.ns, dir, `nodes/${NODE}`, [
      "iptables-save",
      "ip-route",
      "ip-addr",
      "sysctl",
    ]);
    cpSync(join(node!.cniDir, CONF_FILE), join(dir, "nodes", NODE, "cni", CONF_FILE));
    writeSnapshotFile(dir, `remote/${SITE_NAME}.yaml`, onpremSite([NODE_RANGE]));
    return { dir, podPing: podRun.code, nodePing: nodeRun.code };
  }

  let beforeDir = "";
  let app: { ip: string; container: string } | undefined;

  it("a Pod created through the API runs on the node with an address from the real bridge plugin", async () => {
    app = await runApp();
    assert.ok(contains(parseCidr(POD_SUBNET), parseIp(app.ip)), app.ip);
    const saved = (await node!.ns.exec(["iptables-save", "-t", "nat"])).stdout;
    assert.doesNotMatch(saved, /CNI-/, "ipMasq is off: the plugin writes no chain");
  });

  it("ipMasq off: the pod's ping leaves with its own address and is not answered; diagnose blames the conflist; the plan is the plugin's knob", async () => {
    const running = app;
    assert.ok(running, "the pod of the first test runs");
    const s = await snapshot("before", running, "before");
    beforeDir = s.dir;
    assert.equal(s.nodePing, 0, "the node reaches on-prem");
    assert.notEqual(s.podPing, 0, "the pod does not");
    const snap = loadSnapshot(openSnapshot(s.dir));
    const a = await diagnose(snap, {});
    const f = a.findings.find((x) => x.id === "masq/exempt-destination");
    assert.ok(f, JSON.stringify(a.findings.map((x) => [x.id, x.title])));
    assert.equal(f.evidence[0]?.file, `nodes/${NODE}/cni/${CONF_FILE}`);
    assert.match(f.title, new RegExp(running.ip.replace(/\./g, "\\.")));
    const p = planMasquerade(snap, { strategy: "narrow" });
    assert.equal(p.owner?.owner, "bridge-cni", JSON.stringify(p.owner));
  });

  it("the plan applied (ipMasq on, the pod set up again): the real plugin writes podpath's chain; on-prem answers; verify says FIXED", async () => {
    const fixed = planBridgeReplica(BridgeCniOptions.parse({ "ip-masq": "true" }));
    writeFileSync(join(node!.cniDir, CONF_FILE), conflist(fixed));
    await deleteApp();
    app = await runApp();
    const saved = (await node!.ns.exec(["iptables-save", "-t", "nat"])).stdout.split("\n");
    const sandboxLine = saved.find((l) => l.startsWith("-A POSTROUTING") && l.includes("CNI-"));
    const id = /id: \\"([0-9a-f]{64})\\"/.exec(sandboxLine ?? "")?.[1];
    assert.ok(id, saved.join("\n"));
    const expected = podMasqRules({
      network: NETWORK,
      containerId: id,
      ip: parseIp(app.ip),
      subnet: parseCidr(POD_SUBNET),
    });
    assert.deepEqual(
      saved.filter((l) => l.includes(`id: \\"${id}\\"`)),
      [expected.rules[2]?.saved, expected.rules[0]?.saved, expected.rules[1]?.saved],
    );
    const s = await snapshot("after", app, "after");
    assert.equal(s.podPing, 0, "the pod reaches on-prem now");
    const v = await verifyChange(
      loadSnapshot(openSnapshot(beforeDir)),
      loadSnapshot(openSnapshot(s.dir)),
      {},
    );
    assert.equal(v.verdict, "fixed", v.verdictText);
  });

  it("collect --node-state: podpath's collector pod on the real node reads its rules and captures the pod's traffic", async () => {
    assert.ok(app, "the pod runs");
    // the collector pod's namespace, as a cluster has it
    await cluster!.api(
      "POST",
      "/api/v1/namespaces/kube-system/serviceaccounts",
      cluster!.adminToken,
      {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "default", namespace: "kube-system" },
      },
    );
    const admin = writeKubeconfig(cluster!, cluster!.adminToken, join(work, "admin-kubeconfig"));
    const dir = join(work, "node-state");
    // the pod pings on-prem until collect (and its capture) has ended
    let collecting = true;
    const answered: number[] = [];
    const pinging = (async () => {
      while (collecting) {
        const r = node!.execIn(app!.container, ["ping", "-c", "1", "-W", "1", ONPREM_IP]);
        assert.ok(r.code <= 1, r.output); // 1: not answered; more: the exec itself failed
        answered.push(r.code);
        await new Promise((r) => setImmediate(r));
      }
    })();
    const c = await podpath(
      [
        "collect",
        "--out",
        dir,
        "--node-state",
        "--collector-image",
        COLLECTOR,
        "--capture",
        ONPREM_IP,
        "--seconds",
        "3",
      ],
      admin,
    );
    collecting = false;
    await pinging;
    assert.ok(answered.includes(0), "the pod's pings are answered");
    assert.equal(c.code, 0, `${c.stderr}\n${node!.logs()}`);
    const collected = readFileSync(join(dir, "nodes", NODE, "iptables-save.txt"), "utf8");
    const direct = (await node!.ns.exec(["iptables-save"])).stdout;
    const rules = (t: string) => t.split("\n").filter((l) => l.startsWith("-A "));
    assert.deepEqual(rules(collected), rules(direct));
    assert.ok(
      rules(collected).some((l) => l.includes("CNI-")),
      "the plugin's chain, as applied",
    );
    // the routing the whole path reads: every table and the policy rules, in both families, as
    // the node's own ip prints them
    for (const [file, argv] of [
      ["ip-route.txt", ["ip", "route", "show", "table", "all"]],
      ["ip-rule.txt", ["ip", "rule"]],
      ["ip6-route.txt", ["ip", "-6", "route", "show", "table", "all"]],
      ["ip6-rule.txt", ["ip", "-6", "rule"]],
    ] as const) {
      const direct = await node!.ns.exec(argv);
      assert.equal(direct.code, 0, direct.stderr);
      assert.equal(readFileSync(join(dir, "nodes", NODE, file), "utf8"), direct.stdout, file);
    }
    assert.match(
      readFileSync(join(dir, "nodes", NODE, "ip-route.txt"), "utf8"),
      / table local /,
      "the local table is in it",
    );
    const pcap = readdirSync(join(dir, "captures")).find((f) => f.endsWith(".pcap"));
    assert.ok(pcap, readdirSync(join(dir, "captures")).join(", "));
    const read = await node!.ns.exec([
      "tcpdump",
      "-Z",
      "root",
      "-nn",
      "-r",
      join(dir, "captures", pcap),
    ]);
    // the reply, translated back, on its way to the pod
    const reply = `IP ${ONPREM_IP} > ${app!.ip}: ICMP echo reply`;
    assert.ok(read.stdout.includes(reply), `no "${reply}": ${read.stdout.slice(0, 400)}`);
    // nothing of podpath's is left on the cluster
    const left = await cluster!.api(
      "GET",
      "/api/v1/namespaces/kube-system/pods",
      cluster!.adminToken,
    );
    assert.deepEqual((left.body as { items: unknown[] }).items, []);
  });
});
