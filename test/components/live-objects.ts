/**
 * @module test/components/live-objects — puts a snapshot's Kubernetes objects into the test
 * cluster of test/components/cluster.ts through the API, as an admin: each object without the
 * fields the server owns (uid, resourceVersion, creationTimestamp, status), then the status of
 * Pods and DaemonSets through their status subresource (there is no kubelet or controller to
 * write it). Also: a kubeconfig for one bearer token, role bindings, and waiting until RBAC lets a
 * user read (the authorizer's caches fill from watches).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { ApiAnswer, Cluster } from "./cluster.ts";

export type Obj = Record<string, unknown> & {
  apiVersion: string;
  kind: string;
  metadata: Record<string, unknown> & { name: string; namespace?: string };
};

/** The REST collection of each kind the examples hold. */
const PLURAL: Readonly<Record<string, string>> = {
  Namespace: "namespaces",
  Node: "nodes",
  Pod: "pods",
  Service: "services",
  ConfigMap: "configmaps",
  DaemonSet: "daemonsets",
  Deployment: "deployments",
  NetworkPolicy: "networkpolicies",
  ClusterRole: "clusterroles",
  ClusterRoleBinding: "clusterrolebindings",
  Role: "roles",
  RoleBinding: "rolebindings",
  ServiceAccount: "serviceaccounts",
};

/** The collection path of an object, e.g. `/apis/apps/v1/namespaces/kube-system/daemonsets`. */
export function collectionPath(o: Pick<Obj, "apiVersion" | "kind" | "metadata">): string {
  const plural = PLURAL[o.kind];
  assert.ok(plural, `no REST path known for kind ${o.kind}`);
  const base = o.apiVersion.includes("/") ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  const ns = o.metadata.namespace;
  const cluster = o.kind === "Namespace" || o.kind === "Node" || o.kind.startsWith("Cluster");
  return cluster ? `${base}/${plural}` : `${base}/namespaces/${ns ?? "default"}/${plural}`;
}

/** Every object of the YAML files in `dir` (Lists unpacked), in file order. */
export function readObjects(dir: string): Obj[] {
  const out: Obj[] = [];
  for (const f of readdirSync(dir).sort()) {
    if (!/\.ya?ml$/.test(f)) continue;
    for (const doc of parseAllDocuments(readFileSync(join(dir, f), "utf8"))) {
      const o = doc.toJS() as Obj | null;
      if (!o) continue;
      if (o.kind === "List") out.push(...(o["items"] as Obj[]));
      else out.push(o);
    }
  }
  return out;
}

function check(r: ApiAnswer, what: string, ok: number[] = [200, 201]): Record<string, unknown> {
  assert.ok(ok.includes(r.status), `${what}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as Record<string, unknown>;
}

/** The object as a client would send it: without the fields the API server owns. */
function forCreate(o: Obj, ownerUids: ReadonlyMap<string, string>): Obj {
  const meta = { ...o.metadata };
  for (const k of ["uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"])
    delete meta[k];
  const owners = meta["ownerReferences"] as Record<string, unknown>[] | undefined;
  if (owners) {
    // an owner reference needs a uid: the created owner's, else a fixed one (no owner object)
    meta["ownerReferences"] = owners.map((r) => ({
      ...r,
      uid: ownerUids.get(`${r["kind"]}/${r["name"]}`) ?? "00000000-0000-4000-8000-000000000001",
    }));
  }
  const body: Obj = { ...o, metadata: meta };
  // Nodes keep their status on create; Pods and DaemonSets get theirs through /status
  if (o.kind !== "Node") delete body["status"];
  return body;
}

/**
 * Creates `objects` (namespaces first, owners before what they own) and writes the status of
 * Pods and DaemonSets. Existing namespaces (default, kube-system) are left as they are.
 */
export async function createObjects(c: Cluster, objects: readonly Obj[]): Promise<void> {
  const order = ["Namespace", "Node", "ConfigMap", "DaemonSet", "Deployment"];
  const rank = (o: Obj) => (order.includes(o.kind) ? order.indexOf(o.kind) : order.length);
  const sorted = [...objects].sort((a, b) => rank(a) - rank(b));
  const ownerUids = new Map<string, string>();
  const accounts = new Set<string>();
  for (const o of sorted) {
    const ns = o.metadata.namespace ?? "default";
    if (o.kind === "Pod" && !accounts.has(ns)) {
      // no controller-manager makes the namespace's default service account, which pods need
      accounts.add(ns);
      const sa: Obj = {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "default", namespace: ns },
      };
      check(
        await c.api("POST", collectionPath(sa), c.adminToken, sa),
        `ServiceAccount ${ns}/default`,
        [201, 409],
      );
    }
    const r = await c.api("POST", collectionPath(o), c.adminToken, forCreate(o, ownerUids));
    if (o.kind === "Namespace" && r.status === 409) continue;
    const made = check(r, `create ${o.kind} ${o.metadata.name}`);
    const meta = made["metadata"] as { uid: string; resourceVersion: string };
    ownerUids.set(`${o.kind}/${o.metadata.name}`, meta.uid);
    if (o.kind === "Node") await untaint(c, o, made);
    if ((o.kind === "Pod" || o.kind === "DaemonSet") && o["status"] !== undefined) {
      const path = `${collectionPath(o)}/${o.metadata.name}/status`;
      const status = {
        ...made,
        status: { ...(made["status"] as object), ...(o["status"] as object) },
      };
      check(
        await c.api("PUT", path, c.adminToken, status),
        `status of ${o.kind} ${o.metadata.name}`,
      );
    }
  }
}

/**
 * The TaintNodesByCondition admission plugin gives every new Node the taint
 * node.kubernetes.io/not-ready:NoSchedule, which the node lifecycle controller (not running here)
 * removes once the kubelet reports Ready. The node is given back the taints it was written with.
 */
async function untaint(c: Cluster, o: Obj, made: Record<string, unknown>): Promise<void> {
  const want = ((o["spec"] as { taints?: unknown[] } | undefined)?.taints ?? []) as unknown[];
  const spec = (made["spec"] ?? {}) as { taints?: unknown[] };
  if (JSON.stringify(spec.taints ?? []) === JSON.stringify(want)) return;
  const body = { ...made, spec: { ...spec, taints: want } };
  check(
    await c.api("PUT", `${collectionPath(o)}/${o.metadata.name}`, c.adminToken, body),
    `taints of ${o.metadata.name}`,
  );
}

/** A kubeconfig that talks to the test cluster with `token` (context `podpath-test`). */
export function writeKubeconfig(c: Cluster, token: string, file: string): string {
  writeFileSync(
    file,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: podpath-test",
      "  cluster:",
      `    server: ${c.url}`,
      `    certificate-authority: ${c.caFile}`,
      "users:",
      "- name: podpath-test",
      "  user:",
      `    token: ${token}`,
      "contexts:",
      "- name: podpath-test",
      "  context: {cluster: podpath-test, user: podpath-test}",
      "current-context: podpath-test",
      "",
    ].join("\n"),
  );
  return file;
}

/** Creates a ClusterRole (as given) and binds it to a user or service account. */
export async function bindClusterRole(
  c: Cluster,
  role: Obj,
  subject:
    | { kind: "User"; name: string }
    | { kind: "ServiceAccount"; name: string; namespace: string },
): Promise<void> {
  check(
    await c.api("POST", collectionPath(role), c.adminToken, role),
    `ClusterRole ${role.metadata.name}`,
  );
  const binding: Obj = {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name: `${role.metadata.name}-${subject.name}` },
    roleRef: {
      apiGroup: "rbac.authorization.k8s.io",
      kind: "ClusterRole",
      name: role.metadata.name,
    },
    subjects: [
      subject.kind === "User" ? { apiGroup: "rbac.authorization.k8s.io", ...subject } : subject,
    ],
  };
  check(await c.api("POST", collectionPath(binding), c.adminToken, binding), "ClusterRoleBinding");
}

/** Waits (bounded) until `token` may list `path`: RBAC's caches fill from watches. */
export async function waitForAccess(c: Cluster, token: string, path: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await c.api("GET", path, token);
    if (r.status === 200) return;
    assert.ok(
      Date.now() < deadline,
      `${path} still answers ${r.status}: ${JSON.stringify(r.body)}`,
    );
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** A service account and a bearer token for it (TokenRequest API), as a second test identity. */
export async function serviceAccountToken(
  c: Cluster,
  namespace: string,
  name: string,
): Promise<string> {
  const sa: Obj = { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace } };
  check(await c.api("POST", collectionPath(sa), c.adminToken, sa), `ServiceAccount ${name}`);
  const r = await c.api(
    "POST",
    `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
    c.adminToken,
    {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 3600 },
    },
  );
  const body = check(r, `token of ${name}`);
  const token = (body["status"] as { token?: string } | undefined)?.token;
  assert.ok(token, "TokenRequest gave no token");
  return token;
}

/** An API answer with the server's `Warning` headers (their texts, unquoted). */
export interface RawAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly warnings: string[];
}

/** The text of one `Warning: 299 - "text"` header value (RFC 7234 quoted string). */
function warningText(h: string): string {
  const m = /^\d{3} \S+ "((?:[^"\\]|\\.)*)"/.exec(h.trim());
  return m ? m[1]!.replace(/\\(.)/g, "$1") : h;
}

/** A request with any body and content type (patches, server-side apply), as `token`. */
export function rawRequest(
  c: Cluster,
  method: string,
  path: string,
  token: string,
  body?: { text: string; contentType: string },
): Promise<RawAnswer> {
  const ca = readFileSync(c.caFile);
  return new Promise((resolve, reject) => {
    const req = request(
      `${c.url}${path}`,
      {
        method,
        ca,
        headers: {
          authorization: `Bearer ${token}`,
          accept: "application/json",
          ...(body ? { "content-type": body.contentType } : {}),
        },
      },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => {
          text += d.toString();
        });
        res.on("end", () => {
          const h = res.headers["warning"];
          const warnings = (h === undefined ? [] : Array.isArray(h) ? h : [h])
            .flatMap((v) => v.split(/,(?=\s*\d{3} )/))
            .map(warningText);
          let parsed: Record<string, unknown> = {};
          try {
            parsed = JSON.parse(text) as Record<string, unknown>;
          } catch {
            parsed = { text };
          }
          resolve({ status: res.statusCode ?? 0, body: parsed, warnings });
        });
      },
    );
    req.on("error", reject);
    if (body) req.write(body.text);
    req.end();
  });
}
