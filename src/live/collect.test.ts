import assert from "node:assert/strict";
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import {
  type FakeApi,
  type FakeApiOptions,
  kubeconfigFor,
  type Obj,
  startFakeApi,
} from "../../test/k8s-api/server.ts";
import { NODES, smallCluster, smallClusterExec } from "../../test/k8s-api/small-cluster.ts";
import { memoryIo } from "../cli/io.ts";
import { readCaptureMeta } from "../evidence/capture-meta.ts";
import { openCluster } from "../k8s/cluster.ts";
import { classifyPath } from "../snapshot/layout.ts";
import { loadSnapshot } from "../snapshot/load.ts";
import { openSnapshot } from "../snapshot/source.ts";
import { collectSnapshot } from "./collect.ts";
import { EXPIRES_ANNOTATION } from "./collect-collector.ts";
import { isReadCommand } from "./collect-commands.ts";
import { memoryWriter } from "./collect-writer.ts";

const TOKEN = "tok-Zq81x-bearer-secret-4471";
const CERT = Buffer.from(
  "-----BEGIN CERTIFICATE-----\nCERTDATA-podpath-test-77\n-----END CERTIFICATE-----\n",
).toString("base64");
const KEY = Buffer.from(
  "-----BEGIN EC PRIVATE KEY-----\nKEYDATA-podpath-test-99\n-----END EC PRIVATE KEY-----\n",
).toString("base64");
const VPN_POD = "vpn/openvpn-6f7d8c9b5-x2x7p";

const scratch = mkdtempSync(join(tmpdir(), "podpath-collect-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let seq = 0;

interface Setup {
  api: FakeApi;
  kubeconfig: string;
  dir: string;
}

async function setup(opts: FakeApiOptions = {}, objects: Obj[] = smallCluster()): Promise<Setup> {
  const api = await startFakeApi(objects, {
    token: TOKEN,
    gkeCrds: true,
    exec: smallClusterExec,
    ...opts,
  });
  const dir = join(scratch, `run-${++seq}`);
  const kubeconfig = join(scratch, `kubeconfig-${seq}`);
  writeFileSync(kubeconfig, kubeconfigFor(api.url, { token: TOKEN, certData: CERT, keyData: KEY }));
  return { api, kubeconfig, dir };
}

async function runCollect(
  s: Setup,
  extra: Record<string, unknown> = {},
  env: Record<string, string> = {},
) {
  const { run } = await import("../cli/commands/collect.ts");
  const io = memoryIo(env);
  const code = await run(
    [],
    {
      out: s.dir,
      kubeconfig: s.kubeconfig,
      concurrency: "4",
      allowPlaintextCredentials: true,
      ...extra,
    },
    io,
  );
  return { code, stdout: io.stdout(), stderr: io.stderr() };
}

function filesUnder(dir: string): string[] {
  return (readdirSync(dir, { recursive: true, encoding: "utf8" }) as string[])
    .filter((f) => statSync(join(dir, f)).isFile())
    .map((f) => f.split("\\").join("/"))
    .sort();
}

const collectors = (api: FakeApi) =>
  [...(api.store.get("pods") ?? []), ...(api.store.get("daemonsets") ?? [])].filter(
    (o) => o.metadata.labels?.["app.kubernetes.io/managed-by"] === "podpath",
  );

describe("podpath collect against the API server", () => {
  it("writes a snapshot of a small cluster in the layout diagnose reads, objects as kubectl prints them", async () => {
    const s = await setup();
    try {
      const r = await runCollect(s, { pod: VPN_POD });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `${s.dir}\n`);
      const files = filesUnder(s.dir);
      for (const f of [
        "cluster/nodes.yaml",
        "cluster/namespaces.yaml",
        "cluster/configmap-ip-masq-agent.yaml",
        "cluster/daemonsets.yaml",
        "cluster/pods.yaml",
        "cluster/services.yaml",
        "cluster/networkpolicies.yaml",
        "cluster/egressnatpolicies.yaml",
        `pods/${VPN_POD}/sysctl.txt`,
        `pods/${VPN_POD}/iptables-save.txt`,
        `pods/${VPN_POD}/ip-route.txt`,
        `pods/${VPN_POD}/ip-addr.txt`,
      ]) {
        assert.ok(files.includes(f), `${f} missing from ${files.join(", ")}`);
      }
      for (const f of files) {
        assert.notEqual(classifyPath(f).kind, "unknown", `${f} is not part of the snapshot layout`);
      }
      // kubectl get -o yaml: a List whose items carry apiVersion and kind, no managedFields
      const nodes = parseAllDocuments(readFileSync(join(s.dir, "cluster/nodes.yaml"), "utf8"));
      assert.equal(nodes.length, 1);
      const list = nodes[0]!.toJS() as { kind: string; apiVersion: string; items: Obj[] };
      assert.equal(list.kind, "List");
      assert.equal(list.apiVersion, "v1");
      assert.deepEqual(
        list.items.map((n) => n.metadata.name),
        NODES,
      );
      for (const n of list.items) {
        assert.equal(n.kind, "Node");
        assert.equal(n.apiVersion, "v1");
        assert.equal(n.metadata["managedFields"], undefined);
      }
      const text = readFileSync(join(s.dir, "cluster/nodes.yaml"), "utf8");
      assert.match(text, /^apiVersion: v1\nitems:\n- apiVersion: v1\n {2}kind: Node\n/);
      assert.match(text, /\nkind: List\nmetadata:\n {2}resourceVersion: ""\n$/);
      const cm = parseAllDocuments(
        readFileSync(join(s.dir, "cluster/configmap-ip-masq-agent.yaml"), "utf8"),
      )[0]!.toJS() as { kind: string; data: { config: string } };
      assert.equal(cm.kind, "ConfigMap");
      assert.match(cm.data.config, /nonMasqueradeCIDRs:\n {2}- 10\.0\.0\.0\/8/);
      // only the DaemonSet that masquerades, not the logging one
      const ds = parseAllDocuments(
        readFileSync(join(s.dir, "cluster/daemonsets.yaml"), "utf8"),
      )[0]!.toJS() as { items: Obj[] };
      assert.deepEqual(
        ds.items.map((d) => d.metadata.name),
        ["ip-masq-agent"],
      );
      const pods = parseAllDocuments(
        readFileSync(join(s.dir, "cluster/pods.yaml"), "utf8"),
      )[0]!.toJS() as { items: Obj[] };
      assert.deepEqual(
        pods.items.map((p) => `${p.metadata.namespace}/${p.metadata.name}`).sort(),
        [
          "kube-system/ip-masq-agent-7k2xq",
          "kube-system/ip-masq-agent-m9f4s",
          `kube-system/kube-proxy-${NODES[2]}`,
          VPN_POD,
        ].sort(),
      );
      // the image has no sysctl: /proc was read and rendered as sysctl prints it
      assert.equal(
        readFileSync(join(s.dir, `pods/${VPN_POD}/sysctl.txt`), "utf8"),
        "net.ipv4.ip_forward = 0\n",
      );
      assert.match(
        readFileSync(join(s.dir, `pods/${VPN_POD}/iptables-save.txt`), "utf8"),
        /-A POSTROUTING -s 10\.8\.0\.0\/24 -o eth0 -j MASQUERADE/,
      );
    } finally {
      await s.api.close();
    }
  });

  it("without --node-state only reads: GET requests and exec of the fixed read commands, never a Secret", async () => {
    const s = await setup();
    try {
      const r = await runCollect(s, {
        pod: VPN_POD,
        nodes: "cloud.google.com/gke-nodepool=pool-a",
      });
      assert.equal(r.code, 0, r.stderr);
      assert.ok(s.api.requests.length > 5);
      for (const q of s.api.requests) {
        assert.equal(q.method, "GET", `${q.method} ${q.path}`);
        assert.ok(["list", "get", "discover", "create"].includes(q.verb), q.path);
        if (q.verb === "create") {
          assert.equal(q.resource, "pods/exec");
          assert.ok(isReadCommand(q.command ?? []), `not a read command: ${q.command?.join(" ")}`);
        }
        assert.notEqual(q.resource, "secrets");
      }
      assert.ok(s.api.requests.some((q) => q.resource === "pods/exec"));
      // the selector reached the API server and filtered the nodes
      const nodes = readFileSync(join(s.dir, "cluster/nodes.yaml"), "utf8");
      assert.ok(nodes.includes(NODES[0]!) && !nodes.includes(`name: ${NODES[2]}`));
    } finally {
      await s.api.close();
    }
  });

  it("with --node-state creates only its own labelled collector pods and removes every one", async () => {
    const s = await setup();
    try {
      const r = await runCollect(s, { nodeState: true, capture: "10.20.30.40", seconds: "2" });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /--node-state creates short-lived host-network collector pods/);
      const writes = s.api.requests.filter((q) => q.method !== "GET");
      const creates = writes.filter((q) => q.verb === "create");
      const deletes = writes.filter((q) => q.verb === "delete");
      assert.equal(creates.length, NODES.length);
      assert.ok(creates.every((q) => q.resource === "pods" && q.namespace === "kube-system"));
      assert.equal(deletes.length, creates.length);
      assert.ok(deletes.every((q) => q.resource === "pods" && q.name?.startsWith("podpath-")));
      assert.deepEqual(collectors(s.api), []);
      for (const q of s.api.requests.filter((x) => x.resource === "pods/exec")) {
        assert.ok(isReadCommand(q.command ?? []), q.command?.join(" "));
      }
      // the snapshot loader diagnose uses reads every file without a complaint
      const snap = loadSnapshot(openSnapshot(s.dir));
      assert.deepEqual(snap.diagnostics, []);
      assert.deepEqual(snap.unknownFiles, []);
      assert.deepEqual([...snap.nodes.keys()].sort(), [...NODES].sort());
      assert.equal(snap.captures.length, NODES.length);
      assert.ok(snap.objects.length >= 15, `${snap.objects.length} objects`);
      const files = filesUnder(s.dir);
      for (const n of NODES) {
        for (const a of [
          "iptables-save",
          "ip6tables-save",
          "sysctl",
          "ip-route",
          "ip-rule",
          "ip-addr",
          "conntrack",
        ]) {
          assert.ok(files.includes(`nodes/${n}/${a}.txt`), `nodes/${n}/${a}.txt`);
        }
        // pool-b's kernel has no IPv6: its IPv6 routes and rules are not available there
        for (const a of ["ip6-route", "ip6-rule"]) {
          assert.equal(files.includes(`nodes/${n}/${a}.txt`), !n.includes("pool-b"), `${n} ${a}`);
        }
        assert.ok(files.includes(`captures/${n}.pcap`));
        const meta = readFileSync(join(s.dir, `captures/${n}.yaml`), "utf8");
        assert.match(meta, new RegExp(`^point: node/${n}\\nphase: before\\ntime: "`));
        // read back by the snapshot's own capture-meta reader, without a warning
        const parsed = readCaptureMeta(meta, `captures/${n}.yaml`);
        assert.deepEqual(parsed.diagnostics, []);
        assert.deepEqual(parsed.value?.point, { kind: "node", node: n });
        assert.equal(
          parsed.value?.command,
          "timeout 2 tcpdump -Z root -i any -nn -U -w - host 10.20.30.40",
        );
        assert.equal(readFileSync(join(s.dir, `captures/${n}.pcap`)).readUInt32LE(0), 0xa1b2c3d4);
      }
      assert.match(
        readFileSync(join(s.dir, `nodes/${NODES[0]}/iptables-save.txt`), "utf8"),
        /ip-masq-agent: outbound traffic/,
      );
      assert.doesNotMatch(
        readFileSync(join(s.dir, `nodes/${NODES[2]}/iptables-save.txt`), "utf8"),
        /ip-masq-agent:/,
      );
    } finally {
      await s.api.close();
    }
  });

  it("reads a node command by command when the collector image has no shell", async () => {
    const s = await setup({
      exec: (pod, argv) => (argv[0] === "sh" ? { notFound: true } : smallClusterExec(pod, argv)),
    });
    try {
      const source = await openCluster({
        kubeconfig: s.kubeconfig,
        env: {},
        allowPlaintextCredentials: true,
      });
      const w = memoryWriter();
      const rep = await collectSnapshot(source, w, {
        nodeState: true,
        nodes: NODES[0]!,
        pollMs: 5,
      });
      assert.deepEqual(rep.failures, []);
      const execs = s.api.requests
        .filter((q) => q.resource === "pods/exec")
        .map((q) => q.command?.[0]);
      assert.deepEqual(execs, [
        "sh",
        "iptables-save",
        "ip6tables-save",
        "sysctl",
        "ip",
        "ip",
        "ip",
        "ip",
        "ip",
        "conntrack",
        "ipset",
        "nft",
      ]);
      // this node has neither ipset nor nft: normal, recorded as not available
      assert.deepEqual(
        rep.notAvailable.map((n) => `${n.subject}: ${n.what}: ${n.why}`),
        [
          `node/${NODES[0]}: ipset save: ipset is not installed`,
          `node/${NODES[0]}: nft list ruleset: nft is not installed`,
        ],
      );
      assert.match(
        w.files.get(`nodes/${NODES[0]}/iptables-save.txt`)!.toString(),
        /ip-masq-agent:/,
      );
    } finally {
      await s.api.close();
    }
  });

  it("uses one DaemonSet above the threshold and deletes it (its pods go with it)", async () => {
    const s = await setup();
    try {
      const source = await openCluster({
        kubeconfig: s.kubeconfig,
        env: {},
        allowPlaintextCredentials: true,
      });
      const w = memoryWriter();
      const rep = await collectSnapshot(source, w, {
        nodeState: true,
        daemonSetThreshold: 2,
        pollMs: 5,
        concurrency: 2,
      });
      assert.deepEqual(rep.failures, []);
      assert.deepEqual(rep.nodes, { total: 3, done: 3, failed: 0 });
      const creates = s.api.requests.filter(
        (q) => q.verb === "create" && q.resource !== "pods/exec",
      );
      assert.deepEqual(
        creates.map((q) => q.resource),
        ["daemonsets"],
      );
      assert.deepEqual(rep.collectorsCreated, rep.collectorsRemoved);
      assert.deepEqual(collectors(s.api), []);
      for (const n of NODES) assert.ok(w.files.has(`nodes/${n}/iptables-save.txt`));
    } finally {
      await s.api.close();
    }
  });

  it("an interruption mid-collection leaves no collector behind and keeps what was read", async () => {
    for (const threshold of [50, 1]) {
      const ac = new AbortController();
      let execs = 0;
      const s = await setup({
        onRequest: (q) => {
          if (q.resource === "pods/exec" && q.status === 101 && ++execs === 2)
            ac.abort(new Error("SIGINT"));
        },
        podStartMs: 20,
      });
      try {
        const source = await openCluster({
          kubeconfig: s.kubeconfig,
          env: {},
          allowPlaintextCredentials: true,
        });
        const w = memoryWriter();
        const rep = await collectSnapshot(source, w, {
          nodeState: true,
          daemonSetThreshold: threshold,
          pollMs: 5,
          signal: ac.signal,
        });
        assert.equal(rep.aborted, true);
        assert.ok(rep.collectorsCreated.length > 0);
        assert.deepEqual([...rep.collectorsRemoved].sort(), [...rep.collectorsCreated].sort());
        assert.deepEqual(collectors(s.api), [], `threshold ${threshold}`);
        assert.ok(w.files.has("cluster/nodes.yaml"));
      } finally {
        await s.api.close();
      }
    }
  });

  it("removes expired collectors of a dead run at the next start, and leaves a live run's alone", async () => {
    const stale = (name: string, expires: string): Obj => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name,
        namespace: "kube-system",
        labels: {
          "app.kubernetes.io/name": "podpath-collector",
          "app.kubernetes.io/managed-by": "podpath",
          "podpath.dev/run": name.slice(8, 14),
        },
        annotations: { [EXPIRES_ANNOTATION]: expires },
      },
      spec: { nodeName: NODES[0], containers: [{ name: "collector", image: "x" }] },
      status: { phase: "Running" },
    });
    const s = await setup({}, [
      ...smallCluster(),
      stale("podpath-dead01-node", "2020-01-01T00:00:00Z"),
      stale("podpath-live01-node", "2999-01-01T00:00:00Z"),
    ]);
    try {
      const r = await runCollect(s, { nodeState: true });
      assert.equal(r.code, 0, r.stderr);
      assert.match(
        r.stderr,
        /removed expired collectors of an earlier run: pod\/kube-system\/podpath-dead01-node/,
      );
      const left = collectors(s.api).map((o) => o.metadata.name);
      assert.deepEqual(left, ["podpath-live01-node"]);
    } finally {
      await s.api.close();
    }
  });

  it("Forbidden on one resource gives a partial snapshot and one clear sentence naming the permission", async () => {
    const s = await setup({ forbid: [{ verb: "list", resource: "services" }] });
    try {
      const r = await runCollect(s, {});
      assert.equal(r.code, 3);
      const files = filesUnder(s.dir);
      assert.ok(files.includes("cluster/nodes.yaml"));
      assert.ok(files.includes("cluster/networkpolicies.yaml"));
      assert.ok(!files.includes("cluster/services.yaml"));
      const lines = r.stderr.split("\n").filter((l) => l.includes("services"));
      assert.equal(lines.length, 1, r.stderr);
      assert.match(
        lines[0]!,
        /Forbidden: the identity of context "test-ctx" may not list services cluster-wide; it needs "list" on "services"/,
      );
      assert.match(lines[0]!, /podpath-reader\.yaml/);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
      assert.match(
        readFileSync(join(s.dir, "README.md"), "utf8"),
        /cluster\/services: list services: Forbidden/,
      );
    } finally {
      await s.api.close();
    }
  });

  it("a refused pod exec and a node whose collector cannot start are listed with why; the rest is kept", async () => {
    const s = await setup({
      forbid: [{ verb: "create", resource: "pods/exec", namespace: "vpn" }],
      brokenNodes: new Set([NODES[1]!]),
      crashNodes: new Map([[NODES[2]!, "starting\nsleep: invalid number '120s'\n"]]),
    });
    try {
      const r = await runCollect(s, { pod: VPN_POD, nodeState: true });
      assert.equal(r.code, 3);
      assert.match(
        r.stderr,
        /pod\/vpn\/openvpn-6f7d8c9b5-x2x7p: .*may not create pods\/exec "openvpn-6f7d8c9b5-x2x7p" in namespace "vpn"/,
      );
      assert.match(
        r.stderr,
        new RegExp(`node/${NODES[1]}: start a collector pod: .*ImagePullBackOff`),
      );
      assert.ok(
        r.stderr.includes(`node/${NODES[2]}: start a collector pod: `) &&
          r.stderr.includes("CrashLoopBackOff: back-off 40s") &&
          r.stderr.includes("(log: starting | sleep: invalid number '120s')"),
        r.stderr,
      );
      assert.ok(s.api.requests.some((q) => q.resource === "pods/log" && q.verb === "get"));
      const files = filesUnder(s.dir);
      assert.ok(files.includes(`nodes/${NODES[0]}/iptables-save.txt`));
      assert.ok(!files.some((f) => f.startsWith(`nodes/${NODES[1]}/`)));
      assert.deepEqual(collectors(s.api), []);
    } finally {
      await s.api.close();
    }
  });

  it("draws its status line on stderr only when stderr is a terminal", async () => {
    // the line appears once a run has lasted a second: collector pods that take 1.5 s to start
    const s = await setup({ podStartMs: 1500 });
    try {
      const { run } = await import("../cli/commands/collect.ts");
      const base = memoryIo();
      const io = { ...base, stderrIsTTY: true };
      const code = await run(
        [],
        { out: s.dir, kubeconfig: s.kubeconfig, nodeState: true, allowPlaintextCredentials: true },
        io,
      );
      assert.equal(code, 0, base.stderr());
      assert.match(base.stderr(), /\r\x1b\[2Kpodpath: collecting… nodes [0-3]\/3 \(1 s\)/);
      // the line is erased before what follows: the tools a node lacks (one line), the count
      assert.match(
        base.stderr(),
        /\r\x1b\[2Kpodpath: not available, not collected: ipset save \(3 nodes\), nft list ruleset \(3 nodes\), ip -6 route show table all \(1 node\), ip -6 rule \(1 node\)\npodpath: \d+ files written; nodes 3\/3 read\n$/,
      );
      assert.equal(base.stdout(), `${s.dir}\n`);
      const plain = await runCollect(
        { ...s, dir: join(scratch, `plain-${++seq}`) },
        { nodeState: true },
      );
      assert.doesNotMatch(plain.stderr, /\r|\x1b/);
    } finally {
      await s.api.close();
    }
  });

  it("no credential reaches the snapshot, stdout or stderr", async () => {
    const s = await setup({ forbid: [{ verb: "list", resource: "networkpolicies" }] });
    try {
      const r = await runCollect(s, {
        pod: VPN_POD,
        nodeState: true,
        capture: "10.20.30.40",
        seconds: "1",
      });
      assert.ok(s.api.requests.every((q) => q.headers.authorization === `Bearer ${TOKEN}`));
      const secrets = [
        TOKEN,
        CERT,
        KEY,
        "CERTDATA-podpath-test-77",
        "KEYDATA-podpath-test-99",
        "SECRET-VPN-KEY",
      ];
      // and the reports made from the snapshot
      const { diagnoseSnapshotPath } = await import("../cli/commands/diagnose.ts");
      const reports: string[] = [];
      for (const output of ["json", "text", "md"]) {
        const dio = memoryIo();
        await diagnoseSnapshotPath(s.dir, { output }, dio);
        reports.push(dio.stdout(), dio.stderr());
      }
      const texts = [
        ...reports,
        r.stdout,
        r.stderr,
        ...filesUnder(s.dir).map((f) => readFileSync(join(s.dir, f), "latin1")),
      ];
      for (const secret of secrets) {
        for (const t of texts) assert.ok(!t.includes(secret), `found ${secret}`);
      }
    } finally {
      await s.api.close();
    }
  });
});

describe("kubectl conventions", () => {
  it("authenticates through an exec credential plugin", async () => {
    const s = await setup({ token: "from-plugin-Kx19" });
    try {
      const plugin = join(scratch, "plugin.sh");
      writeFileSync(
        plugin,
        `#!/bin/sh\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-plugin-Kx19"}}'\n`,
      );
      chmodSync(plugin, 0o755);
      writeFileSync(s.kubeconfig, kubeconfigFor(s.api.url, { exec: { command: plugin } }));
      const r = await runCollect(s, {});
      assert.equal(r.code, 0, r.stderr);
      assert.ok(s.api.requests.length > 0);
      assert.ok(s.api.requests.every((q) => q.headers.authorization === "Bearer from-plugin-Kx19"));
      for (const f of filesUnder(s.dir))
        assert.ok(!readFileSync(join(s.dir, f), "utf8").includes("from-plugin-Kx19"));
    } finally {
      await s.api.close();
    }
  });

  it("reads KUBECONFIG as a list of files and honours --context from a later file", async () => {
    const s = await setup();
    try {
      const first = join(scratch, `kc-first-${seq}`);
      writeFileSync(first, kubeconfigFor("http://127.0.0.1:1", { token: "wrong" }, "other"));
      const second = join(scratch, `kc-second-${seq}`);
      // the same cluster and user names as the first file: the first file's entries win, as in kubectl
      writeFileSync(second, kubeconfigFor(s.api.url, { token: TOKEN }, "prod"));
      const third = join(scratch, `kc-third-${seq}`);
      writeFileSync(
        third,
        kubeconfigFor(s.api.url, { token: TOKEN }, "prod3")
          .replaceAll("test-cluster", "prod-cluster")
          .replaceAll("test-user", "prod-user"),
      );
      const { run } = await import("../cli/commands/collect.ts");
      const io = memoryIo({
        KUBECONFIG: `${first}:${join(scratch, "missing")}:${second}:${third}`,
      });
      // "prod" names the first file's cluster (unreachable): first wins for names
      assert.equal(
        await run([], { out: s.dir, context: "prod", allowPlaintextCredentials: true }, io),
        3,
      );
      assert.match(
        io.stderr(),
        /Unreachable: the API server http:\/\/127\.0\.0\.1:1 of context "prod"/,
      );
      const io3 = memoryIo({
        KUBECONFIG: `${first}:${join(scratch, "missing")}:${second}:${third}`,
      });
      const code = await run(
        [],
        { out: s.dir, context: "prod3", allowPlaintextCredentials: true },
        io3,
      );
      assert.equal(code, 0, io3.stderr());
    } finally {
      await s.api.close();
    }
  });

  it("turns API failures into one sentence and exit 3, never a stack trace", async () => {
    const s = await setup();
    try {
      const cases: [Record<string, unknown>, string, RegExp][] = [
        [
          { context: "nope" },
          kubeconfigFor(s.api.url, { token: TOKEN }),
          /^podpath: Kubeconfig: context "nope" is not in the kubeconfig \(contexts: test-ctx\); pick one with --context/,
        ],
        [
          {},
          kubeconfigFor(s.api.url, { token: "expired" }),
          /^podpath: Unauthorized: the API server http:\/\/127\.0\.0\.1:\d+ rejected the credentials of context "test-ctx"/,
        ],
        [
          {},
          kubeconfigFor("http://127.0.0.1:9", { token: TOKEN }),
          /^podpath: Unreachable: the API server http:\/\/127\.0\.0\.1:9 of context "test-ctx" cannot be reached \(ECONNREFUSED/,
        ],
      ];
      const failing = join(scratch, "failing-plugin.sh");
      writeFileSync(failing, "#!/bin/sh\necho 'ERROR: gcloud auth login required' >&2\nexit 1\n");
      chmodSync(failing, 0o755);
      cases.push(
        [
          {},
          kubeconfigFor(s.api.url, { exec: { command: failing } }),
          /^podpath: Unauthorized: getting credentials for context "test-ctx" failed \(.*ERROR: gcloud auth login required.*\); log in again/,
        ],
        [
          { allowPlaintextCredentials: false },
          kubeconfigFor(s.api.url, { token: TOKEN }),
          /^podpath: Kubeconfig: the cluster of context "test-ctx" is a plain http:\/\/ server \(http:\/\/127\.0\.0\.1:\d+\) and the context carries a bearer token, which podpath does not send unencrypted \(insecure-skip-tls-verify does not change that\); use https, or pass --allow-plaintext-credentials/,
        ],
      );
      for (const [opts, kc, want] of cases) {
        writeFileSync(s.kubeconfig, kc);
        const run = await runCollect({ ...s, dir: join(scratch, `err-${++seq}`) }, opts);
        // the plaintext warning (these contexts are allowed to send over http) is not the error
        const stderr = run.stderr.replace(/^podpath: warning: .*\n/gm, "");
        const r = { ...run, stderr };
        assert.equal(r.code, 3, r.stderr);
        assert.match(r.stderr, want);
        assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
        assert.equal(r.stdout, "");
      }
      const missing = await runCollect(
        { ...s, kubeconfig: join(scratch, "absent"), dir: join(scratch, `err-${++seq}`) },
        {},
      );
      assert.equal(missing.code, 3);
      assert.match(missing.stderr, /kubeconfig .*absent does not exist/);
    } finally {
      await s.api.close();
    }
  });

  it("a --pod that does not exist is one sentence naming it; the rest is collected", async () => {
    const s = await setup();
    try {
      const r = await runCollect(s, { pod: "vpn/openvpn-gone" });
      assert.equal(r.code, 3);
      assert.match(
        r.stderr,
        /pod\/vpn\/openvpn-gone: get the pod: Not found: pods "openvpn-gone" in namespace "vpn" does not exist in the cluster of context "test-ctx"\./,
      );
      assert.ok(filesUnder(s.dir).includes("cluster/nodes.yaml"));
    } finally {
      await s.api.close();
    }
  });

  it("rejects option mistakes as usage errors", async () => {
    const { run } = await import("../cli/commands/collect.ts");
    const { UsageError } = await import("../cli/io.ts");
    for (const opts of [
      { out: join(scratch, "u1"), capture: "10.0.0.1" },
      { out: join(scratch, "u2"), capture: "not-an-ip", nodeState: true },
      { out: join(scratch, "u3"), pod: "a/b/c" },
      { out: join(scratch, "u4"), concurrency: "0" },
      { out: scratch }, // not empty: snapshots never mix
    ]) {
      await assert.rejects(run([], opts, memoryIo()), UsageError);
    }
  });
});

describe("fleet", () => {
  it("collects 2,000 nodes through one DaemonSet with bounded concurrency, and removes it", async () => {
    const { fleetCluster, fleetExec, fleetNodeName } = await import("../../test/k8s-api/fleet.ts");
    // each exec answers after 25 ms (a kubelet round trip), so execs overlap as on a real cluster
    const s = await setup(
      { exec: (pod, argv) => ({ ...fleetExec(pod, argv), delayMs: 25 }), podStartMs: 20 },
      fleetCluster(2000),
    );
    try {
      const source = await openCluster({
        kubeconfig: s.kubeconfig,
        env: {},
        allowPlaintextCredentials: true,
      });
      const w = memoryWriter();
      let last = { done: 0, total: 0 };
      const rep = await collectSnapshot(source, w, {
        nodeState: true,
        concurrency: 40,
        pollMs: 20,
        onProgress: (p) => {
          if (p.kind === "nodes") last = p;
        },
      });
      assert.deepEqual(rep.failures, []);
      assert.deepEqual(rep.nodes, { total: 2000, done: 2000, failed: 0 });
      assert.deepEqual(last, { kind: "nodes", done: 2000, failed: 0, total: 2000 });
      const creates = s.api.requests.filter(
        (q) => q.verb === "create" && q.resource !== "pods/exec",
      );
      assert.deepEqual(
        creates.map((q) => q.resource),
        ["daemonsets"],
      );
      assert.deepEqual(collectors(s.api), []);
      assert.ok(s.api.stats.peakExecs <= 40, `peak concurrency ${s.api.stats.peakExecs}`);
      assert.ok(s.api.stats.peakExecs > 10, `execs ran one by one (${s.api.stats.peakExecs})`);
      for (const i of [0, 999, 1999])
        assert.ok(w.files.has(`nodes/${fleetNodeName(i)}/iptables-save.txt`));
      assert.equal([...w.files.keys()].filter((f) => f.endsWith("/conntrack.txt")).length, 2000);
    } finally {
      await s.api.close();
    }
  });
});

describe("a misbehaving API server", () => {
  it("garbage answers become listed failures, never a crash; silence ends at the request timeout", async () => {
    const { createServer } = await import("node:http");
    const answers: Record<string, (res: import("node:http").ServerResponse) => void> = {
      garbage: (res) => {
        res.writeHead(200, { "Content-Type": "text/html" });
        res.end("<html>proxy login</html>");
      },
      "not-a-list": (res) => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end('{"kind":"NodeList","items":{"oops":1}}');
      },
      "error-html": (res) => {
        res.writeHead(502, { "Content-Type": "text/html" });
        res.end("<html>Bad Gateway</html>");
      },
      silent: () => {},
    };
    for (const [name, answer] of Object.entries(answers)) {
      const server = createServer((_req, res) => answer(res));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      const port = (server.address() as import("node:net").AddressInfo).port;
      try {
        const kc = join(scratch, `kc-bad-${name}`);
        writeFileSync(kc, kubeconfigFor(`http://127.0.0.1:${port}`, { token: TOKEN }));
        const source = await openCluster({
          kubeconfig: kc,
          env: {},
          requestTimeoutMs: 300,
          allowPlaintextCredentials: true,
        });
        const w = memoryWriter();
        const started = Date.now();
        const rep = await collectSnapshot(source, w, { pods: [{ namespace: "vpn", name: "x" }] });
        assert.ok(Date.now() - started < 20_000, `${name} took too long`);
        assert.ok(rep.failures.length >= 5, `${name}: ${JSON.stringify(rep.failures)}`);
        for (const f of rep.failures) assert.ok(!f.why.includes("\n"), f.why);
        assert.ok(w.files.has("README.md"));
      } finally {
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
      }
    }
  });
});
