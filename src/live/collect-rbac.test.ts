import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parse } from "yaml";
import {
  type ExecAnswer,
  kubeconfigFor,
  type Obj,
  type OptionalApi,
  type RecordedRequest,
  startFakeApi,
} from "../../test/k8s-api/server.ts";
import { NODES, smallCluster, smallClusterExec } from "../../test/k8s-api/small-cluster.ts";
import { openCluster } from "../k8s/cluster.ts";
import { collectSnapshot } from "./collect.ts";
import { memoryWriter } from "./collect-writer.ts";

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}
interface Role {
  kind: "ClusterRole" | "Role";
  metadata: { namespace?: string };
  rules: Rule[];
}

const readRole = (f: string) =>
  parse(readFileSync(new URL(`../../deploy/rbac/${f}`, import.meta.url), "utf8")) as Role;

/** RBAC's own matching: group, resource (with subresource), verb, optional names; a Role only in its namespace. */
function allows(roles: readonly Role[], q: RecordedRequest): boolean {
  if (q.verb === "discover") return true; // system:discovery grants every authenticated user
  // an exec WebSocket is authorized as create and, since 1.30, get
  const verbs = q.resource === "pods/exec" ? ["create", "get"] : [q.verb];
  return verbs.every((verb) =>
    roles.some(
      (role) =>
        (role.kind === "ClusterRole" || role.metadata.namespace === q.namespace) &&
        role.rules.some(
          (r) =>
            r.apiGroups.includes(q.group) &&
            r.resources.includes(q.resource) &&
            r.verbs.includes(verb) &&
            (r.resourceNames === undefined ||
              (q.name !== undefined && r.resourceNames.includes(q.name))),
        ),
    ),
  );
}

const scratch = mkdtempSync(join(tmpdir(), "podpath-rbac-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** The small cluster plus every owner's objects, so that every read collect makes is checked. */
function withOwners(): Obj[] {
  const cm = (namespace: string, name: string): Obj => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace },
    data: { k: "v" },
  });
  return [
    ...smallCluster(),
    cm("kube-system", "cilium-config"),
    cm("kube-system", "azure-ip-masq-agent-config"),
    cm("kube-system", "azure-ip-masq-agent-config-reconciled"),
    cm("kube-flannel", "kube-flannel-cfg"),
    cm("kube-system", "kube-flannel-cfg"),
    {
      apiVersion: "crd.projectcalico.org/v1",
      kind: "IPPool",
      metadata: { name: "default-ipv4-ippool" },
      spec: { cidr: "10.244.0.0/16", natOutgoing: true },
    },
    { apiVersion: "cilium.io/v2", kind: "CiliumNode", metadata: { name: NODES[0]! }, spec: {} },
    {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "cilium", namespace: "kube-system", labels: { "k8s-app": "cilium" } },
      spec: {
        selector: { matchLabels: { "k8s-app": "cilium" } },
        template: { spec: { containers: [{ name: "cilium-agent" }] } },
      },
    },
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "cilium-x7k2p", namespace: "kube-system", labels: { "k8s-app": "cilium" } },
      spec: { nodeName: NODES[0]!, containers: [{ name: "cilium-agent" }] },
    },
  ];
}

/** The small cluster's answers, and a Cilium agent's (status with the BPF ip-masq-agent, its map). */
function execWithCilium(pod: Obj, argv: readonly string[]): ExecAnswer {
  if (pod.metadata.labels?.["k8s-app"] !== "cilium") return smallClusterExec(pod, argv);
  if (argv.join(" ") === "cilium-dbg status --verbose")
    return { stdout: "Masquerading:            BPF (ip-masq-agent)   [eth0]   10.0.0.0/16\n" };
  if (argv.join(" ") === "cilium-dbg bpf ipmasq list")
    return { stdout: "IP PREFIX/ADDRESS   \n10.0.0.0/8          \n" };
  return { notFound: true };
}

async function requestsOf(
  nodeState: boolean,
  daemonSetThreshold = 50,
  apis: readonly OptionalApi[] = ["calico-crd", "cilium"],
): Promise<RecordedRequest[]> {
  const api = await startFakeApi(withOwners(), {
    gkeCrds: true,
    apis,
    exec: execWithCilium,
  });
  try {
    const kc = join(scratch, `kc-${nodeState}-${daemonSetThreshold}`);
    writeFileSync(kc, kubeconfigFor(api.url, { token: "t" }));
    const src = await openCluster({ kubeconfig: kc, env: {}, allowPlaintextCredentials: true });
    const rep = await collectSnapshot(src, memoryWriter(), {
      nodeState,
      daemonSetThreshold,
      pods: [{ namespace: "vpn", name: "openvpn-6f7d8c9b5-x2x7p" }],
      pollMs: 5,
    });
    assert.deepEqual(rep.failures, []);
    return api.requests;
  } finally {
    await api.close();
  }
}

describe("deploy/rbac", () => {
  it("podpath-reader allows every request of a read-only collection, and grants no write", async () => {
    const reader = readRole("podpath-reader.yaml");
    const reqs = [
      ...(await requestsOf(false)),
      ...(await requestsOf(false, 50, ["calico-crd", "calico-v3"])),
    ];
    // the owners' objects were really read (so the rules below are really checked)
    for (const [group, resource] of [
      ["crd.projectcalico.org", "ippools"],
      ["projectcalico.org", "ippools"],
      ["cilium.io", "ciliumnodes"],
    ])
      assert.ok(
        reqs.some((q) => q.verb === "list" && q.group === group && q.resource === resource),
      );
    for (const name of ["cilium-config", "kube-flannel-cfg", "azure-ip-masq-agent-config"])
      assert.ok(
        reqs.some((q) => q.verb === "get" && q.name === name && q.status === 200),
        name,
      );
    for (const q of reqs) {
      assert.ok(
        allows([reader], q),
        `podpath-reader does not allow ${q.verb} ${q.resource} ${q.namespace ?? ""}`,
      );
    }
    for (const r of reader.rules) {
      for (const v of r.verbs) {
        if (v === "create") assert.deepEqual(r.resources, ["pods/exec"]);
        else assert.ok(["get", "list"].includes(v), v);
      }
      assert.ok(!r.resources.includes("secrets"));
    }
  });

  it("podpath-reader plus podpath-node-state allow --node-state, per-node pods and DaemonSet alike", async () => {
    const roles = [readRole("podpath-reader.yaml"), readRole("podpath-node-state.yaml")];
    for (const threshold of [50, 1]) {
      const reqs = await requestsOf(true, threshold);
      assert.ok(reqs.some((q) => q.verb === "create" && q.resource !== "pods/exec"));
      // the Cilium agent's state was read by exec in its pod (and is checked below)
      assert.ok(reqs.some((q) => q.name === "cilium-x7k2p" && q.command?.[0] === "cilium-dbg"));
      for (const q of reqs) {
        assert.ok(
          allows(roles, q),
          `not allowed: ${q.verb} ${q.resource} in ${q.namespace ?? "cluster"}`,
        );
      }
      // the reader alone is not enough for node state: the rules are really needed
      assert.ok(reqs.some((q) => !allows([roles[0]!], q)));
    }
  });
});
