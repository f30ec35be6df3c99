/**
 * @module test/components/cluster — a throwaway control plane on loopback for the component
 * tests: the real etcd and kube-apiserver from .components/, with TLS (a CA made by openssl for
 * this run), the RBAC authorizer, static bearer tokens for an admin (system:masters) and for the
 * user `podpath-reader`, and an audit policy that logs every request's metadata. Ports are free
 * loopback ports; everything lives in one temporary folder, removed by `stop()` (and the
 * processes are killed at exit if a test dies first). On request also the real
 * kube-controller-manager (the controllers a test names) and kube-scheduler, each with its own
 * client certificate (CN system:kube-controller-manager, system:kube-scheduler: the users the API
 * server's bootstrap RBAC policy binds) and kubeconfig; the controller manager gives each
 * controller its own service account's credentials, as kubeadm runs it.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { componentPath } from "./component-guard.ts";

export interface ApiAnswer {
  readonly status: number;
  readonly body: unknown;
}

export interface Cluster {
  /** https://127.0.0.1:PORT */
  readonly url: string;
  readonly caFile: string;
  readonly adminToken: string;
  /** The token of the user `podpath-reader` (bound to nothing until a test binds it). */
  readonly readerToken: string;
  readonly auditLog: string;
  api(method: string, path: string, token: string, body?: unknown): Promise<ApiAnswer>;
  /** The audit log's events (one JSON object a line), as far as written. */
  auditEvents(): Record<string, unknown>[];
  /** The last lines of each control-plane component's log, for failure messages. */
  logs(): string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      const port = typeof a === "object" && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

function openssl(dir: string, args: readonly string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * A client certificate for `cn` signed by the test CA (the API server's --client-ca-file), and a
 * kubeconfig that presents it to `url`; returns the kubeconfig's path.
 */
function clientKubeconfig(dir: string, file: string, cn: string, url: string): string {
  writeFileSync(join(dir, `${file}.ext`), "extendedKeyUsage=clientAuth\n");
  openssl(dir, [
    ...["req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${file}.key`, "-out", `${file}.csr`],
    ...["-subj", `/CN=${cn}`],
  ]);
  openssl(dir, [
    ...["x509", "-req", "-in", `${file}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key"],
    ...["-CAcreateserial", "-out", `${file}.crt`, "-extfile", `${file}.ext`, "-days", "2"],
  ]);
  const path = join(dir, `${file}.kubeconfig`);
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "c", cluster: { server: url, "certificate-authority": join(dir, "ca.crt") } },
      ],
      users: [
        {
          name: cn,
          user: {
            "client-certificate": join(dir, `${file}.crt`),
            "client-key": join(dir, `${file}.key`),
          },
        },
      ],
      contexts: [{ name: "x", context: { cluster: "c", user: cn } }],
      "current-context": "x",
    }),
  );
  return path;
}

/** A CA, a serving certificate for 127.0.0.1 and localhost, and a service-account key pair. */
function makeKeys(dir: string): void {
  const days = ["-days", "2"];
  openssl(dir, [
    ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt"],
    ...days,
    ...["-subj", "/CN=podpath-test-ca"],
  ]);
  writeFileSync(join(dir, "san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  openssl(dir, [
    ...["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr"],
    ...["-subj", "/CN=kube-apiserver"],
  ]);
  openssl(dir, [
    ...["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key"],
    ...["-CAcreateserial", "-out", "server.crt", "-extfile", "san.ext"],
    ...days,
  ]);
  openssl(dir, ["genrsa", "-out", "sa.key", "2048"]);
  openssl(dir, ["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"]);
}

const live = new Set<ChildProcess>();
let hooked = false;
function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once("exit", () => live.delete(child));
  if (!hooked) {
    hooked = true;
    process.on("exit", () => {
      for (const c of live) c.kill("SIGKILL");
    });
  }
  return child;
}

async function waitFor(what: string, ms: number, ok: () => Promise<boolean>, log: () => string) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await ok().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready in ${ms} ms; its log:\n${log()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function capture(child: ChildProcess): () => string {
  let text = "";
  const add = (d: Buffer) => {
    text = (text + d.toString()).slice(-20_000);
  };
  child.stdout?.on("data", add);
  child.stderr?.on("data", add);
  return () => text;
}

export interface ClusterOptions {
  /**
   * A Unix socket the API server reaches nodes (kubelets) through, by HTTP CONNECT (its egress
   * selector for the "cluster" traffic): the real-node tests' nodes live in lab namespaces that
   * the root namespace has no route to. The socket need not exist until a node is used.
   */
  readonly nodeEgressSocket?: string;
  /**
   * Starts kube-controller-manager with these controllers (its --controllers, canonical names such
   * as `daemonset-controller`; see {@link DAEMONSET_CONTROLLERS}).
   */
  readonly controllers?: readonly string[];
  /** Starts kube-scheduler (DaemonSet pods are bound to their node by the scheduler). */
  readonly scheduler?: boolean;
  /** More kube-apiserver flags, e.g. `--endpoint-reconciler-type=none`. */
  readonly apiServerArgs?: readonly string[];
}

/**
 * What a DaemonSet's pods need of the controller manager: the DaemonSet controller (one pod per
 * node), the node lifecycle controller (the API server taints every new Node
 * `node.kubernetes.io/not-ready:NoSchedule`; this controller lifts the taint once the kubelet
 * reports Ready, and a DaemonSet without a toleration for it gets no pod until then), the service
 * account controllers (a namespace's `default` account, which admission requires, and legacy
 * token secrets), the root CA publisher (`kube-root-ca.crt`, which a pod's projected service
 * account volume reads) and the garbage collector (a deleted DaemonSet's pods).
 */
export const DAEMONSET_CONTROLLERS = [
  "daemonset-controller",
  "node-lifecycle-controller",
  "serviceaccount-controller",
  "serviceaccount-token-controller",
  "root-ca-certificate-publisher-controller",
  "garbage-collector-controller",
] as const;

/** Waits until a component's own /healthz (self-signed, on loopback) answers ok. */
function healthy(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(
      `https://127.0.0.1:${port}/healthz`,
      { rejectUnauthorized: false, timeout: 5_000 },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode === 200));
      },
    );
    req.on("error", () => resolve(false));
    req.on("timeout", () => req.destroy());
    req.end();
  });
}

/** Starts etcd and kube-apiserver; resolves when the API server's /readyz answers ok. */
export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), "podpath-cluster-"));
  makeKeys(dir);
  const egress: string[] = [];
  if (opts.nodeEgressSocket !== undefined) {
    writeFileSync(
      join(dir, "egress.yaml"),
      [
        "apiVersion: apiserver.k8s.io/v1beta1",
        "kind: EgressSelectorConfiguration",
        "egressSelections:",
        "- name: cluster",
        "  connection:",
        "    proxyProtocol: HTTPConnect",
        "    transport:",
        "      uds:",
        `        udsName: ${opts.nodeEgressSocket}`,
        "",
      ].join("\n"),
    );
    egress.push(`--egress-selector-config-file=${join(dir, "egress.yaml")}`);
  }
  const adminToken = randomBytes(16).toString("hex");
  const readerToken = randomBytes(16).toString("hex");
  writeFileSync(
    join(dir, "tokens.csv"),
    `${adminToken},admin,uid-admin,"system:masters"\n${readerToken},podpath-reader,uid-reader\n`,
  );
  writeFileSync(
    join(dir, "audit.yaml"),
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
  );
  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const etcd = track(
    spawn(
      componentPath("etcd"),
      [
        "--name=podpath",
        `--data-dir=${join(dir, "etcd")}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=podpath=${peerUrl}`,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    ),
  );
  const etcdLog = capture(etcd);
  const processes = [etcd];
  const logs: Record<string, () => string> = { etcd: etcdLog };
  const stop = async () => {
    for (const p of processes.reverse()) {
      if (p.exitCode === null && p.signalCode === null) {
        const gone = new Promise((r) => p.once("exit", r));
        p.kill("SIGTERM");
        await gone;
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      "etcd",
      60_000,
      async () => {
        const r = await fetch(`${etcdUrl}/health`);
        return r.ok && ((await r.json()) as { health?: string }).health === "true";
      },
      etcdLog,
    );
    const auditLog = join(dir, "audit.log");
    const apiserver = track(
      spawn(
        componentPath("kube-apiserver"),
        [
          `--etcd-servers=${etcdUrl}`,
          "--bind-address=127.0.0.1",
          "--advertise-address=127.0.0.1",
          `--secure-port=${apiPort}`,
          `--cert-dir=${dir}`,
          `--tls-cert-file=${join(dir, "server.crt")}`,
          `--tls-private-key-file=${join(dir, "server.key")}`,
          `--client-ca-file=${join(dir, "ca.crt")}`,
          `--service-account-key-file=${join(dir, "sa.pub")}`,
          `--service-account-signing-key-file=${join(dir, "sa.key")}`,
          "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
          `--token-auth-file=${join(dir, "tokens.csv")}`,
          "--authorization-mode=RBAC",
          `--audit-policy-file=${join(dir, "audit.yaml")}`,
          `--audit-log-path=${auditLog}`,
          "--service-cluster-ip-range=10.96.0.0/16",
          // as kubeadm and GKE run it: privileged containers are for Pod Security to judge
          "--allow-privileged=true",
          ...egress,
          ...(opts.apiServerArgs ?? []),
        ],
        { stdio: ["ignore", "pipe", "pipe"] },
      ),
    );
    processes.push(apiserver);
    const apiLog = capture(apiserver);
    logs["kube-apiserver"] = apiLog;
    const url = `https://127.0.0.1:${apiPort}`;
    const ca = readFileSync(join(dir, "ca.crt"));
    const api = (method: string, path: string, token: string, body?: unknown) =>
      new Promise<ApiAnswer>((resolve, reject) => {
        const data = body === undefined ? undefined : JSON.stringify(body);
        const req = request(
          `${url}${path}`,
          {
            method,
            ca,
            headers: {
              authorization: `Bearer ${token}`,
              accept: "application/json",
              ...(data ? { "content-type": "application/json" } : {}),
            },
          },
          (res) => {
            let text = "";
            res.on("data", (d: Buffer) => {
              text += d.toString();
            });
            res.on("end", () => {
              let parsed: unknown = text;
              try {
                parsed = JSON.parse(text);
              } catch {}
              resolve({ status: res.statusCode ?? 0, body: parsed });
            });
          },
        );
        req.on("error", reject);
        if (data) req.write(data);
        req.end();
      });
    await waitFor(
      "kube-apiserver",
      180_000,
      async () => {
        if (apiserver.exitCode !== null) throw new Error("kube-apiserver exited");
        return (await api("GET", "/readyz", adminToken)).status === 200;
      },
      apiLog,
    );
    if (opts.controllers !== undefined) {
      const port = await freePort();
      const kubeconfig = clientKubeconfig(dir, "kcm", "system:kube-controller-manager", url);
      const kcm = track(
        spawn(
          componentPath("kube-controller-manager"),
          [
            `--kubeconfig=${kubeconfig}`,
            `--authentication-kubeconfig=${kubeconfig}`,
            `--authorization-kubeconfig=${kubeconfig}`,
            // clients of its own port are checked against the test CA, not a lookup
            `--client-ca-file=${join(dir, "ca.crt")}`,
            "--authentication-skip-lookup=true",
            `--controllers=${opts.controllers.join(",")}`,
            "--use-service-account-credentials=true",
            `--service-account-private-key-file=${join(dir, "sa.key")}`,
            `--root-ca-file=${join(dir, "ca.crt")}`,
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            `--secure-port=${port}`,
            `--cert-dir=${join(dir, "kcm-serving")}`,
          ],
          { stdio: ["ignore", "pipe", "pipe"] },
        ),
      );
      processes.push(kcm);
      const log = capture(kcm);
      logs["kube-controller-manager"] = log;
      await waitFor(
        "kube-controller-manager",
        180_000,
        async () => {
          if (kcm.exitCode !== null) throw new Error("kube-controller-manager exited");
          return healthy(port);
        },
        log,
      );
    }
    if (opts.scheduler === true) {
      const port = await freePort();
      const kubeconfig = clientKubeconfig(dir, "scheduler", "system:kube-scheduler", url);
      writeFileSync(
        join(dir, "scheduler.yaml"),
        JSON.stringify({
          apiVersion: "kubescheduler.config.k8s.io/v1",
          kind: "KubeSchedulerConfiguration",
          clientConnection: { kubeconfig },
          leaderElection: { leaderElect: false },
        }),
      );
      const scheduler = track(
        spawn(
          componentPath("kube-scheduler"),
          [
            `--config=${join(dir, "scheduler.yaml")}`,
            `--authentication-kubeconfig=${kubeconfig}`,
            `--authorization-kubeconfig=${kubeconfig}`,
            `--client-ca-file=${join(dir, "ca.crt")}`,
            "--authentication-skip-lookup=true",
            "--bind-address=127.0.0.1",
            `--secure-port=${port}`,
            `--cert-dir=${join(dir, "scheduler-serving")}`,
          ],
          { stdio: ["ignore", "pipe", "pipe"] },
        ),
      );
      processes.push(scheduler);
      const log = capture(scheduler);
      logs["kube-scheduler"] = log;
      await waitFor(
        "kube-scheduler",
        180_000,
        async () => {
          if (scheduler.exitCode !== null) throw new Error("kube-scheduler exited");
          return healthy(port);
        },
        log,
      );
    }
    const auditEvents = () => {
      let text = "";
      try {
        text = readFileSync(auditLog, "utf8");
      } catch {}
      return text
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    };
    return {
      url,
      caFile: join(dir, "ca.crt"),
      adminToken,
      readerToken,
      auditLog,
      api,
      auditEvents,
      logs: () =>
        Object.entries(logs)
          .map(([k, v]) => `--- ${k} ---\n${v().slice(-3_000)}`)
          .join("\n"),
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
