/**
 * Component test: `podpath collect` and `podpath diagnose --live` (the BUILT CLI, dist/) against
 * the real kube-apiserver and etcd of test/components/cluster.ts, as the user podpath-reader bound
 * only to the shipped ClusterRole deploy/rbac/podpath-reader.yaml. The objects of the examples
 * snat-exception-list and vpn-forwarding-off are created through the API (status through the
 * status subresource: there is no kubelet), and:
 * - collect reads them with nothing Forbidden, and the diagnosis of what it collected equals the
 *   diagnosis of the offline snapshot of the same objects (with the examples' node and pod files
 *   copied beside both, the full diagnosis too);
 * - the API server's audit log shows only get, list and watch from podpath, and no Secrets; the
 *   same checker flags a write made on purpose;
 * - with a narrower role, collect keeps what it could read, names each resource it could not with
 *   the API server's RBAC message, and exits 3 (DESIGN.md: a live operation failed);
 * - podpath's list paging follows the real server's `continue` tokens: 1,100 pods come back once
 *   each, in pages of 500.
 * One cluster for the whole file. Needs `npx tsc -p tsconfig.build.json` first (npm test does it).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse, stringify } from "yaml";
import { openCluster, RESOURCES } from "../../src/k8s/cluster.ts";
import { listAll } from "../../src/live/collect-objects.ts";
import { nonReadRequests, requestsOf } from "./audit-check.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { componentSkip } from "./component-guard.ts";
import {
  bindClusterRole,
  createObjects,
  type Obj,
  readObjects,
  serviceAccountToken,
  waitForAccess,
  writeKubeconfig,
} from "./live-objects.ts";

const skip =
  componentSkip("kube-apiserver", { kernel: false }) || componentSkip("etcd", { kernel: false });
const ROOT = join(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli/main.js");
const EXAMPLES = ["snat-exception-list", "vpn-forwarding-off"].map((e) =>
  join(ROOT, "examples", e),
);
const ROLE = parse(readFileSync(join(ROOT, "deploy/rbac/podpath-reader.yaml"), "utf8")) as Obj;
const USER = "podpath-reader";
const VPN_POD = "vpn/vpn-openvpn-6d9c7b5f4-x2x7k";
/** The snapshot parts that are not Kubernetes objects (a cluster without kubelets has none). */
const NODE_PARTS = ["nodes", "pods", "captures", "probes", "remote"];

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the built CLI without blocking the event loop: the API server's output pipes into this
 * process keep being drained while podpath runs.
 */
function podpath(args: readonly string[], kubeconfig?: string): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" };
  delete env["KUBECONFIG"];
  if (kubeconfig !== undefined) env["KUBECONFIG"] = kubeconfig;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env,
      timeout: 120_000,
      killSignal: "SIGKILL",
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** A diagnosis's findings as `id severity subject`, sorted: what must agree. */
function findingsOf(r: Run): string[] {
  assert.ok(r.code === 0 || r.code === 1 || r.code === 3, `exit ${r.code}: ${r.stderr}`);
  const out = JSON.parse(r.stdout) as {
    findings: { id: string; severity: string; subject: string }[];
  };
  return out.findings.map((f) => `${f.id} ${f.severity} ${f.subject}`).sort();
}

/**
 * Whether `collect` (without --pod) reads this object, as docs/live.md says: Nodes, Namespaces,
 * the ip-masq-agent ConfigMap, kube-system's DaemonSets and their pods, kube-proxy's static pods,
 * Services and NetworkPolicies; application pods only with --pod, Deployments never.
 */
function collectReads(o: Obj, pod?: string): boolean {
  if (o.kind === "Deployment") return false;
  if (o.kind !== "Pod") return true;
  if (`${o.metadata.namespace}/${o.metadata.name}` === pod) return true;
  const owners = (o.metadata["ownerReferences"] ?? []) as { kind?: string }[];
  const labels = (o.metadata["labels"] ?? {}) as Record<string, string>;
  return (
    o.metadata.namespace === "kube-system" &&
    (owners.some((r) => r.kind === "DaemonSet") || labels["component"] === "kube-proxy")
  );
}

/** The objects the test creates, as the examples hold them. */
const OBJECTS = EXAMPLES.flatMap((ex) => readObjects(join(ex, "cluster")));

/**
 * The offline snapshot of the same objects: the examples' objects that collect reads, written
 * as one List, and (`withNodeState`) the examples' node, pod, capture, probe and remote files.
 */
function offlineSnapshot(dest: string, withNodeState: boolean, pod?: string): string {
  mkdirSync(join(dest, "cluster"), { recursive: true });
  const items = OBJECTS.filter((o) => collectReads(o, pod));
  writeFileSync(
    join(dest, "cluster", "objects.yaml"),
    stringify({ apiVersion: "v1", kind: "List", items }),
  );
  if (withNodeState) copyNodeState(dest);
  return dest;
}

/** Copies the examples' node state (what a cluster without kubelets cannot give) into `dest`. */
function copyNodeState(dest: string): void {
  for (const ex of EXAMPLES) {
    for (const part of NODE_PARTS) {
      const from = join(ex, part);
      if (existsSync(from)) cpSync(from, join(dest, part), { recursive: true });
    }
  }
}

/** Objects as `Kind namespace/name`, sorted. */
const keys = (objs: readonly Obj[]) =>
  objs.map((o) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`).sort();

/** Waits until the audit log holds a request made after everything before it was answered. */
async function auditFlushed(c: Cluster): Promise<void> {
  const marker = `/api/v1/namespaces/default/configmaps/audit-marker-${Date.now()}`;
  await c.api("GET", marker, c.adminToken);
  const deadline = Date.now() + 30_000;
  while (
    !c.auditEvents().some((e) => e["requestURI"] === marker && e["stage"] === "ResponseComplete")
  ) {
    assert.ok(Date.now() < deadline, "the audit log did not record the marker request");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** What the test polls, as podpath's user, until the role binding takes: collect never asks it. */
const WAIT_PATH = "/apis/apps/v1/daemonsets";

describe("podpath collect and diagnose --live on the real kube-apiserver", { skip }, () => {
  let cluster: Cluster | undefined;
  let tmp = "";
  let kubeconfig = "";
  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), "podpath-collect-live-"));
    cluster = await startCluster();
    const c = cluster;
    await createObjects(c, OBJECTS);
    await bindClusterRole(c, ROLE, { kind: "User", name: USER });
    await waitForAccess(c, c.readerToken, WAIT_PATH);
    kubeconfig = writeKubeconfig(c, c.readerToken, join(tmp, "kubeconfig"));
  });
  after(async () => {
    await cluster?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("collect reads every object with the shipped role: exit 0, nothing Forbidden", async () => {
    const out = join(tmp, "collected");
    const r = await podpath(["collect", "--out", out, "-o", "json"], kubeconfig);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /Forbidden|forbidden/);
    const report = JSON.parse(r.stdout) as { question: string; failures: unknown[] };
    assert.equal(report.question, "collect");
    assert.deepEqual(report.failures, []);
    const nodes = readObjects(join(out, "cluster")).filter((o) => o.kind === "Node");
    assert.deepEqual(nodes.map((n) => n.metadata.name).sort(), ["gke-lab-default-0", "lab-node-1"]);
  });

  it("collected exactly the objects collect reads, and the server's own", () => {
    const got = keys(readObjects(join(tmp, "collected", "cluster")));
    const serverMade = [
      "Namespace /default",
      "Namespace /kube-node-lease",
      "Namespace /kube-public",
      "Namespace /kube-system",
      "Service default/kubernetes",
    ];
    assert.deepEqual(
      got,
      keys(OBJECTS.filter((o) => collectReads(o)))
        .concat(serverMade)
        .sort(),
    );
  });

  it("diagnose --live, the collected snapshot and the offline snapshot of the same objects agree", async () => {
    const want = findingsOf(
      await podpath(["diagnose", offlineSnapshot(join(tmp, "offline"), false), "-o", "json"]),
    );
    assert.ok(want.length > 0, "the offline diagnosis finds something to compare");
    const live = await podpath(["diagnose", "--live", "-o", "json"], kubeconfig);
    assert.equal(live.code, want.some((f) => / error /.test(f)) ? 1 : 0, live.stderr);
    assert.doesNotMatch(live.stderr, /Forbidden|forbidden|not collected/);
    assert.deepEqual(findingsOf(live), want);
    assert.deepEqual(
      findingsOf(await podpath(["diagnose", join(tmp, "collected"), "-o", "json"])),
      want,
    );
  });

  it("with the examples' node state beside both, the full diagnoses agree", async () => {
    const collected = join(tmp, "collected-full");
    cpSync(join(tmp, "collected"), collected, { recursive: true });
    copyNodeState(collected);
    const want = findingsOf(
      await podpath(["diagnose", offlineSnapshot(join(tmp, "offline-full"), true), "-o", "json"]),
    );
    assert.ok(
      want.some((f) => f.startsWith("vpn/forwarding-disabled ")),
      want.join("\n"),
    );
    assert.deepEqual(findingsOf(await podpath(["diagnose", collected, "-o", "json"])), want);
  });

  it("the audit log shows only get, list and watch from podpath's user, and no Secrets", async () => {
    const c = cluster!;
    await auditFlushed(c);
    const events = c.auditEvents();
    const reqs = requestsOf(events, USER);
    // podpath's reads were logged: the pods lists of collect and of diagnose --live
    assert.ok(reqs.filter((r) => r.verb === "list" && r.resource === "pods").length >= 2);
    assert.deepEqual(nonReadRequests(events, USER), []);
    assert.deepEqual(
      // the test's own wait for the role binding asks before RBAC has caught up, as this user
      reqs.filter((r) => (r.code === 401 || r.code === 403) && r.uri !== WAIT_PATH),
      [],
      "nothing podpath asked was refused",
    );
    // the only other answers: the owners' API groups, asked whether they are served, are not
    // (404), and the owners' ConfigMaps, read by name, do not exist here (404)
    assert.deepEqual(
      [
        ...new Set(
          reqs
            .filter((r) => r.code !== 200 && r.uri !== WAIT_PATH)
            .map((r) => `${r.code} ${r.uri}`),
        ),
      ],
      [
        "404 /apis/networking.gke.io/v1",
        "404 /apis/projectcalico.org/v3",
        "404 /apis/crd.projectcalico.org/v1",
        "404 /apis/cilium.io/v2",
        "404 /api/v1/namespaces/kube-system/configmaps/cilium-config",
        "404 /api/v1/namespaces/kube-system/configmaps/azure-ip-masq-agent-config",
        "404 /api/v1/namespaces/kube-system/configmaps/azure-ip-masq-agent-config-reconciled",
        "404 /api/v1/namespaces/kube-flannel/configmaps/kube-flannel-cfg",
        "404 /api/v1/namespaces/kube-system/configmaps/kube-flannel-cfg",
      ],
    );
  });

  it("the same checker flags a write and a Secrets read that user makes on purpose", async () => {
    const c = cluster!;
    const write = await c.api("POST", "/api/v1/namespaces/default/configmaps", c.readerToken, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "podpath-must-not-write" },
    });
    assert.equal(write.status, 403, "RBAC forbids it; the audit log records it all the same");
    assert.equal((await c.api("GET", "/api/v1/secrets", c.readerToken)).status, 403);
    await auditFlushed(c);
    const flagged = nonReadRequests(c.auditEvents(), USER).map(
      (v) => `${v.verb} ${v.resource} ${v.code}: ${v.why}`,
    );
    assert.deepEqual(flagged, [
      "create configmaps 403: verb create",
      "list secrets 403: reads Secrets",
    ]);
  });

  it("with a role without DaemonSets and ConfigMaps: partial snapshot, each refusal named, exit 3", async () => {
    const c = cluster!;
    const narrow = structuredClone(ROLE);
    narrow.metadata = { name: "podpath-narrow" };
    const rules = narrow["rules"] as { resources: string[] }[];
    narrow["rules"] = rules.filter(
      (r) => !r.resources.includes("daemonsets") && !r.resources.includes("configmaps"),
    );
    assert.equal((narrow["rules"] as unknown[]).length, rules.length - 2);
    const token = await serviceAccountToken(c, "default", "podpath-narrow");
    await bindClusterRole(c, narrow, {
      kind: "ServiceAccount",
      name: "podpath-narrow",
      namespace: "default",
    });
    await waitForAccess(c, token, "/api/v1/nodes");
    const out = join(tmp, "narrow");
    const r = await podpath(
      ["collect", "--out", out, "-o", "json"],
      writeKubeconfig(c, token, join(tmp, "kubeconfig-narrow")),
    );
    assert.equal(r.code, 3, r.stderr);
    const report = JSON.parse(r.stdout) as {
      failures: { subject: string; what: string; why: string }[];
      files: string[];
    };
    const user = "system:serviceaccount:default:podpath-narrow";
    assert.deepEqual(
      report.failures.map((f) => `${f.subject}: ${f.what}`),
      [
        "cluster/configmaps: get ConfigMap kube-system/ip-masq-agent",
        "cluster/daemonsets: list DaemonSets in kube-system",
        "cluster/daemonsets: list DaemonSets in kube-flannel",
        "cluster/daemonsets: list DaemonSets in calico-system",
        // the other owners' ConfigMaps, each read by name
        "cluster/configmaps: get ConfigMap kube-system/cilium-config",
        "cluster/configmaps: get ConfigMap kube-system/azure-ip-masq-agent-config",
        "cluster/configmaps: get ConfigMap kube-system/azure-ip-masq-agent-config-reconciled",
        "cluster/configmaps: get ConfigMap kube-flannel/kube-flannel-cfg",
        "cluster/configmaps: get ConfigMap kube-system/kube-flannel-cfg",
      ],
    );
    const [cm, ds] = report.failures;
    // the API server's own RBAC sentence, quoted
    assert.ok(
      cm!.why.includes(
        `configmaps "ip-masq-agent" is forbidden: User "${user}" cannot get resource "configmaps" in API group "" in the namespace "kube-system"`,
      ),
      cm!.why,
    );
    assert.match(cm!.why, /needs "get" on "configmaps"/);
    assert.ok(
      ds!.why.includes(
        `daemonsets.apps is forbidden: User "${user}" cannot list resource "daemonsets" in API group "apps" in the namespace "kube-system"`,
      ),
      ds!.why,
    );
    assert.match(ds!.why, /needs "list" on "daemonsets" in API group "apps"/);
    for (const f of report.failures)
      assert.ok(r.stderr.includes(`${f.subject}: ${f.what}: ${f.why}`));
    // what could be read was kept
    const got = keys(readObjects(join(out, "cluster")));
    for (const k of ["Node /gke-lab-default-0", "Node /lab-node-1", "Service demo/web"])
      assert.ok(got.includes(k), k);
    assert.ok(!got.some((k) => k.startsWith("DaemonSet ") || k.startsWith("ConfigMap ")));
    assert.ok(report.files.includes("cluster/services.yaml"));
    assert.match(readFileSync(join(out, "README.md"), "utf8"), /daemonsets/);
  });

  it("--pod on a node without a kubelet: the pod collected, the server's exec refusal named", async () => {
    const c = cluster!;
    const out = join(tmp, "with-pod");
    const r = await podpath(["collect", "--out", out, "--pod", VPN_POD, "-o", "json"], kubeconfig);
    assert.equal(r.code, 3, r.stderr);
    const report = JSON.parse(r.stdout) as {
      failures: { subject: string; what: string; why: string }[];
    };
    assert.deepEqual(
      report.failures.map((f) => `${f.subject}: ${f.what}`),
      [`pod/${VPN_POD}: exec the read commands`],
    );
    // the API server's own reason: lab-node-1 has no address to reach a kubelet at
    assert.match(
      report.failures[0]!.why,
      /HTTP 500\): no preferred addresses found; known addresses: \[\]/,
    );
    const pods = readObjects(join(out, "cluster")).filter((o) => o.kind === "Pod");
    assert.ok(pods.some((p) => `${p.metadata.namespace}/${p.metadata.name}` === VPN_POD));
    // with the pod's own files beside it, as --pod would have read them: the offline diagnosis
    copyNodeState(out);
    const want = findingsOf(
      await podpath([
        "diagnose",
        offlineSnapshot(join(tmp, "offline-pod"), true, VPN_POD),
        "-o",
        "json",
      ]),
    );
    assert.ok(
      want.some((f) => f.startsWith("vpn/forwarding-disabled ")),
      want.join("\n"),
    );
    assert.deepEqual(findingsOf(await podpath(["diagnose", out, "-o", "json"])), want);
    // the audit log: the exec attempts on that pod are the only requests that are not reads
    await auditFlushed(c);
    const flagged = nonReadRequests(c.auditEvents(), USER).filter(
      (v) => v.resource !== "configmaps" && v.resource !== "secrets",
    );
    assert.ok(flagged.length >= 1);
    for (const v of flagged) {
      assert.equal(`${v.resource}/${v.subresource}`, "pods/exec", JSON.stringify(v));
      assert.ok(
        v.uri.startsWith(`/api/v1/namespaces/vpn/pods/${VPN_POD.split("/")[1]}/exec?`),
        v.uri,
      );
    }
  });

  it("list paging follows the real server's continue tokens: 1,100 pods, each once", async () => {
    const c = cluster!;
    const names: string[] = [];
    for (let i = 0; i < 1100; i++) names.push(`paged-${String(i).padStart(4, "0")}`);
    for (let i = 0; i < names.length; i += 20) {
      await Promise.all(
        names.slice(i, i + 20).map(async (name) => {
          const r = await c.api("POST", "/api/v1/namespaces/kube-system/pods", c.adminToken, {
            apiVersion: "v1",
            kind: "Pod",
            metadata: { name, labels: { component: "kube-proxy", paged: "yes" } },
            spec: { nodeName: "lab-node-1", containers: [{ name: "c", image: "busybox" }] },
          });
          assert.equal(r.status, 201, JSON.stringify(r.body));
        }),
      );
    }
    const source = await openCluster({ env: {}, kubeconfig });
    const got = await listAll(source, RESOURCES.pods, {
      namespace: "kube-system",
      labelSelector: "paged=yes",
    });
    const gotNames = got.map((p) => p.metadata?.name ?? "");
    assert.equal(gotNames.length, names.length);
    assert.deepEqual([...new Set(gotNames)].sort(), names);
    // the real server cut it into pages: 500, 500, 100, each after the first with `continue`
    await auditFlushed(c);
    const pages = requestsOf(c.auditEvents(), USER).filter(
      (r) => r.verb === "list" && r.uri.includes("paged%3Dyes"),
    );
    assert.equal(pages.length, 3, pages.map((p) => p.uri).join("\n"));
    assert.ok(pages.every((p) => /[?&]limit=500(&|$)/.test(p.uri)));
    assert.deepEqual(
      pages.map((p) => /[?&]continue=/.test(p.uri)),
      [false, true, true],
    );
    // and collect writes every one of them (kube-proxy's static pods are read by label)
    const out = join(tmp, "paged");
    const r = await podpath(["collect", "--out", out], kubeconfig);
    assert.equal(r.code, 0, r.stderr);
    const collected = readObjects(join(out, "cluster")).filter((o) =>
      o.metadata.name.startsWith("paged-"),
    );
    assert.deepEqual(collected.map((o) => o.metadata.name).sort(), names);
  });
});
