/**
 * @module test/components/cluster — a throwaway control plane on loopback for the component
 * tests: the real etcd and kube-apiserver from .components/, with TLS (a CA made by openssl for
 * this run), the RBAC authorizer, static bearer tokens for an admin (system:masters) and for the
 * user `podpath-reader`, and an audit policy that logs every request's metadata. Ports are free
 * loopback ports; everything lives in one temporary folder, removed by `stop()` (and the
 * processes are killed at exit if a test dies first).
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
        ],
        { stdio: ["ignore", "pipe", "pipe"] },
      ),
    );
    processes.push(apiserver);
    const apiLog = capture(apiserver);
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
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
