/**
 * Component test: the real etcd and kube-apiserver (built by scripts/build-components.sh) start on
 * loopback with TLS, RBAC and an audit policy; the shipped ClusterRole
 * deploy/rbac/podpath-reader.yaml is created through the API and bound to the user
 * podpath-reader, who can then list what podpath reads and nothing it must not (Secrets, writes),
 * and the audit log records each of that user's requests with its verb and answer. (The live
 * `collect`/`diagnose --live` comparison of issue 16 builds on this cluster.)
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { parse } from "yaml";
import { type Cluster, startCluster } from "./cluster.ts";
import { componentSkip } from "./component-guard.ts";

const skip =
  componentSkip("kube-apiserver", { kernel: false }) || componentSkip("etcd", { kernel: false });
const ROLE = new URL("../../deploy/rbac/podpath-reader.yaml", import.meta.url);

function pinnedRelease(): string {
  const sum = readFileSync(new URL("../cluster/go.sum", import.meta.url), "utf8");
  const m = /^k8s\.io\/kubernetes (v\d+\.\d+\.\d+) /m.exec(sum);
  assert.ok(m, "test/cluster/go.sum names no k8s.io/kubernetes release");
  return m[1]!;
}

describe("kube-apiserver and etcd on loopback", { skip }, () => {
  let cluster: Cluster | undefined;
  before(async () => {
    cluster = await startCluster();
  });
  after(async () => {
    await cluster?.stop();
  });

  it("serves the pinned Kubernetes release over TLS", async () => {
    const r = await cluster!.api("GET", "/version", cluster!.adminToken);
    assert.equal(r.status, 200);
    assert.equal((r.body as { gitVersion?: string }).gitVersion, pinnedRelease());
  });

  it("the shipped podpath-reader role lets its user read, and nothing more", async () => {
    const c = cluster!;
    const role = parse(readFileSync(ROLE, "utf8")) as Record<string, unknown>;
    const created = await c.api(
      "POST",
      "/apis/rbac.authorization.k8s.io/v1/clusterroles",
      c.adminToken,
      role,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const binding = await c.api(
      "POST",
      "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
      c.adminToken,
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: "podpath-reader" },
        roleRef: {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "ClusterRole",
          name: "podpath-reader",
        },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "podpath-reader" }],
      },
    );
    assert.equal(binding.status, 201, JSON.stringify(binding.body));

    // RBAC caches are filled from watches: wait for the binding to take effect
    const deadline = Date.now() + 30_000;
    let pods = await c.api("GET", "/api/v1/pods", c.readerToken);
    while (pods.status === 403 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      pods = await c.api("GET", "/api/v1/pods", c.readerToken);
    }
    assert.equal(pods.status, 200, JSON.stringify(pods.body));
    for (const path of [
      "/api/v1/nodes",
      "/api/v1/namespaces",
      "/api/v1/services",
      "/apis/apps/v1/daemonsets",
      "/apis/networking.k8s.io/v1/networkpolicies",
    ]) {
      assert.equal((await c.api("GET", path, c.readerToken)).status, 200, path);
    }
    assert.equal((await c.api("GET", "/api/v1/secrets", c.readerToken)).status, 403);
    assert.equal((await c.api("GET", "/api/v1/configmaps", c.readerToken)).status, 403);
    const write = await c.api("POST", "/api/v1/namespaces/default/configmaps", c.readerToken, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "should-not-exist" },
    });
    assert.equal(write.status, 403);

    // the audit log holds the reader's requests with their verbs and answers
    const wanted = (e: Record<string, unknown>) =>
      (e["user"] as { username?: string } | undefined)?.username === "podpath-reader" &&
      e["stage"] === "ResponseComplete";
    const auditDeadline = Date.now() + 30_000;
    let events = c.auditEvents().filter(wanted);
    while (!events.some((e) => e["verb"] === "create") && Date.now() < auditDeadline) {
      await new Promise((r) => setTimeout(r, 100));
      events = c.auditEvents().filter(wanted);
    }
    const code = (e: Record<string, unknown>) =>
      (e["responseStatus"] as { code?: number } | undefined)?.code;
    const creates = events.filter((e) => e["verb"] === "create");
    assert.equal(creates.length, 1, JSON.stringify(creates));
    assert.equal(code(creates[0]!), 403);
    const secretLists = events.filter(
      (e) =>
        e["verb"] === "list" &&
        (e["objectRef"] as { resource?: string } | undefined)?.resource === "secrets",
    );
    assert.equal(secretLists.length, 1);
    assert.equal(code(secretLists[0]!), 403);
    assert.ok(events.some((e) => e["verb"] === "list" && code(e) === 200));
  });
});
