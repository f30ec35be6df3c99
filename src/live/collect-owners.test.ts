/**
 * Collection for the owners of a pod's source address other than ip-masq-agent, against the fake
 * API server holding the Calico and Cilium snapshots of the masquerade case (their node files are
 * what the tools print there): what is gathered, what is "not installed", that only reads and the
 * fixed read commands run, and that `diagnose` on the collected snapshot reaches the owner's module
 * as it does on the original snapshot.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parse } from "yaml";
import {
  CALICO_SNAPSHOT,
  CILIUM_SNAPSHOT,
  type FixtureExecOptions,
  fixtureExec,
  snapshotObjects,
} from "../../test/k8s-api/owner-clusters.ts";
import {
  type FakeApiOptions,
  kubeconfigFor,
  type Obj,
  type RecordedRequest,
  startFakeApi,
} from "../../test/k8s-api/server.ts";
import { smallCluster, smallClusterExec } from "../../test/k8s-api/small-cluster.ts";
import { memoryIo } from "../cli/io.ts";
import { type ClusterSource, openCluster } from "../k8s/cluster.ts";
import { collectSnapshot } from "./collect.ts";
import { isCiliumAgentPod, usesBpfIpMasqAgent } from "./collect-cilium.ts";
import { isReadCommand } from "./collect-commands.ts";
import type { CollectOptions, CollectReport } from "./collect-types.ts";
import { folderWriter, memoryWriter } from "./collect-writer.ts";

const scratch = mkdtempSync(join(tmpdir(), "podpath-collect-owners-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let seq = 0;

async function source(url: string): Promise<ClusterSource> {
  const kc = join(scratch, `kc-${++seq}`);
  writeFileSync(kc, kubeconfigFor(url, { token: "t" }));
  return openCluster({ kubeconfig: kc, env: {}, allowPlaintextCredentials: true });
}

/** Collects the cluster into a folder; returns the folder, the report and the requests made. */
async function collectInto(
  objects: Obj[],
  api: FakeApiOptions,
  options: CollectOptions,
): Promise<{ dir: string; report: CollectReport; requests: RecordedRequest[] }> {
  const server = await startFakeApi(objects, api);
  try {
    const dir = join(scratch, `snap-${++seq}`);
    const report = await collectSnapshot(await source(server.url), folderWriter(dir), {
      pollMs: 5,
      ...options,
    });
    return { dir, report, requests: server.requests };
  } finally {
    await server.close();
  }
}

const read = (dir: string, rel: string) => readFileSync(join(dir, rel), "utf8");
const items = (dir: string, rel: string) => (parse(read(dir, rel)) as { items: Obj[] }).items;

/** `podpath diagnose DIR --output json`, in process. */
async function diagnose(dir: string): Promise<{
  verdict: { state: string; summary?: string };
  findings: { id: string; title: string; evidence: { file: string; text?: string }[] }[];
}> {
  const { run } = await import("../cli/commands/diagnose.ts");
  const io = memoryIo({});
  await run([dir], { output: "json" }, io);
  return JSON.parse(io.stdout());
}

const onlyReads = (requests: { verb: string; resource: string; command?: readonly string[] }[]) => {
  for (const q of requests) {
    if (q.verb === "create" && q.resource === "pods/exec")
      assert.ok(isReadCommand(q.command ?? []), `not a read command: ${q.command?.join(" ")}`);
  }
};

const CALICO_POD = { namespace: "billing", name: "billing-6c9f7d8b5-q8zkt" };

describe("collect for Calico", () => {
  it("gathers the IPPool CRD and the node's IP sets; diagnose then names Calico's pool as on the original", async () => {
    const { dir, report, requests } = await collectInto(
      snapshotObjects(CALICO_SNAPSHOT),
      { apis: ["calico-crd"], exec: fixtureExec(CALICO_SNAPSHOT) },
      { nodeState: true, pods: [CALICO_POD] },
    );
    onlyReads(requests);
    // the v3 API is not served (no Calico API server): the CRD was read, as stored
    const pools = items(dir, "cluster/ippools.yaml");
    assert.deepEqual(pools.map((p) => `${p.apiVersion} ${p.kind} ${p.metadata.name}`).sort(), [
      "crd.projectcalico.org/v1 IPPool billing-ippool",
      "crd.projectcalico.org/v1 IPPool default-ipv4-ippool",
    ]);
    assert.ok(
      requests.some((q) => q.path === "/apis/projectcalico.org/v3" && q.status === 404),
      "v3 was asked for first",
    );
    assert.equal(
      read(dir, "nodes/worker-1/ipset.txt"),
      read(CALICO_SNAPSHOT, "nodes/worker-1/ipset.txt"),
    );
    assert.deepEqual(
      items(dir, "cluster/daemonsets.yaml").map((d) => d.metadata.name),
      ["calico-node"],
    );
    // nft is not on this node: not available, not a failure; the app image has no iptables-save
    assert.deepEqual(report.notAvailable, [
      // debug
      ...["ip -6 route show table all", "ip -6 rule"].map((what) => ({
        subject: "node/worker-1",
        what,
        why: "the node's kernel has no IPv6 (or no IPv6 policy routing): RTNETLINK answers: Address family not supported by protocol",
      })),
      { subject: "node/worker-1", what: "nft list ruleset", why: "nft is not installed" },
    ]);
    assert.deepEqual(
      report.failures.map((f) => `${f.subject}: ${f.what}`),
      // (the lab replica has no IPv6 rules and its app image no iptables-save)
      [`pod/billing/${CALICO_POD.name}: iptables-save`, "node/worker-1: ip6tables-save"],
    );
    assert.match(
      read(dir, "README.md"),
      /## Not available[^\n]*\n\n(- node\/worker-1: ip -6 .*\n){2}- node\/worker-1: nft list ruleset: nft is not installed/,
    );
    // what collect cannot gather: the far side (remote/) is the user's evidence
    cpSync(join(CALICO_SNAPSHOT, "remote"), join(dir, "remote"), { recursive: true });
    const collected = await diagnose(dir);
    const original = await diagnose(CALICO_SNAPSHOT);
    const exempt = (d: typeof collected) =>
      d.findings.find((f) => f.id === "masq/exempt-destination");
    assert.match(
      exempt(collected)?.title ?? "",
      /\(Calico: IPPool billing-ippool natOutgoing false\)$/,
    );
    assert.equal(exempt(collected)?.title, exempt(original)?.title);
    assert.deepEqual(
      exempt(collected)?.evidence.map((e) => e.file),
      exempt(original)?.evidence.map((e) => e.file),
    );
    assert.equal(collected.verdict.summary, original.verdict.summary);
  });

  it("prefers projectcalico.org/v3 when the Calico API server serves it (pools read once); finds calico-node in calico-system", async () => {
    // as the Tigera operator installs Calico: the API server, and calico-node in calico-system
    const operator = snapshotObjects(CALICO_SNAPSHOT).map((o) => {
      if (o.kind === "IPPool") return { ...o, apiVersion: "projectcalico.org/v3" };
      if (o.metadata.namespace === "kube-system")
        return { ...o, metadata: { ...o.metadata, namespace: "calico-system" } };
      return o;
    });
    const { dir } = await collectInto(
      operator,
      { apis: ["calico-crd", "calico-v3"], exec: fixtureExec(CALICO_SNAPSHOT) },
      {},
    );
    const pools = items(dir, "cluster/ippools.yaml");
    assert.deepEqual(
      pools.map((p) => p.apiVersion),
      ["projectcalico.org/v3", "projectcalico.org/v3"],
    );
    assert.deepEqual(
      items(dir, "cluster/daemonsets.yaml").map(
        (d) => `${d.metadata.namespace}/${d.metadata.name}`,
      ),
      ["calico-system/calico-node"],
    );
    assert.ok(
      items(dir, "cluster/pods.yaml").some(
        (p) =>
          p.metadata.namespace === "calico-system" && p.metadata.name.startsWith("calico-node-"),
      ),
    );
  });
});

describe("collect for Cilium", () => {
  for (const legacy of [false, true]) {
    it(`execs ${legacy ? "cilium (images before 1.15)" : "cilium-dbg"} in the node's agent pod; diagnose reaches Cilium's eBPF module`, async () => {
      const opts: FixtureExecOptions = { legacyCilium: legacy };
      const { dir, report, requests } = await collectInto(
        snapshotObjects(CILIUM_SNAPSHOT),
        { apis: ["cilium"], exec: fixtureExec(CILIUM_SNAPSHOT, opts) },
        { nodeState: true },
      );
      onlyReads(requests);
      const agentExecs = requests.filter(
        (q) => q.resource === "pods/exec" && q.command?.[0]?.startsWith("cilium"),
      );
      assert.ok(agentExecs.length >= 2);
      for (const f of ["cilium-status", "cilium-bpf-ipmasq"]) {
        assert.equal(
          read(dir, `nodes/worker-1/${f}.txt`),
          read(CILIUM_SNAPSHOT, `nodes/worker-1/${f}.txt`),
        );
      }
      const ciliumConfig = items(dir, "cluster/configmap-cilium-config.yaml")[0];
      assert.equal(
        (ciliumConfig?.["data"] as Record<string, string> | undefined)?.["enable-ip-masq-agent"],
        "true",
      );
      // the fixture has no iptables dumps: those node commands fail; nothing of Cilium's does
      assert.ok(
        report.failures.every((f) => f.subject.startsWith("node/") && !/cilium/.test(f.what)),
        JSON.stringify(report.failures),
      );
      // worker-2 runs no agent pod in this snapshot: not available there, not a failure
      assert.ok(
        report.notAvailable.some(
          (n) => n.subject === "node/worker-2" && /no Cilium agent pod/.test(n.why),
        ),
      );
      const d = await diagnose(dir);
      const ebpf = d.findings.find((f) => f.id === "masq/ebpf-dataplane");
      assert.ok(ebpf, JSON.stringify(d.findings.map((f) => f.id)));
      assert.ok(ebpf.evidence.some((e) => e.file === "nodes/worker-1/cilium-status.txt"));
      const original = (await diagnose(CILIUM_SNAPSHOT)).findings.find(
        (f) => f.id === "masq/ebpf-dataplane",
      );
      assert.equal(ebpf.title, original?.title);
    });
  }

  it("an agent without the BPF ip-masq-agent has no map to list: not available, not asked", async () => {
    const status = read(CILIUM_SNAPSHOT, "nodes/worker-1/cilium-status.txt").replace(
      /^Masquerading:.*$/m,
      "Masquerading:            BPF   [eth0]   10.0.0.0/16 [IPv4: Enabled, IPv6: Disabled]",
    );
    const base = fixtureExec(CILIUM_SNAPSHOT);
    const { dir, report, requests } = await collectInto(
      snapshotObjects(CILIUM_SNAPSHOT),
      {
        apis: ["cilium"],
        exec: (pod, argv) =>
          argv.join(" ") === "cilium-dbg status --verbose" ? { stdout: status } : base(pod, argv),
      },
      { nodeState: true },
    );
    assert.match(read(dir, "nodes/worker-1/cilium-status.txt"), /^Masquerading: +BPF +\[eth0\]/m);
    assert.ok(!requests.some((q) => q.command?.includes("ipmasq")));
    assert.ok(
      report.notAvailable.some(
        (n) =>
          n.what === "cilium-dbg bpf ipmasq list" && /without the BPF ip-masq-agent/.test(n.why),
      ),
    );
  });

  it("tells agent pods and the status's masquerading mode apart", () => {
    const pod = (labels: Record<string, string>, owner?: string): Obj => ({
      metadata: {
        name: "p",
        labels,
        ...(owner ? { ownerReferences: [{ kind: "DaemonSet", name: owner }] } : {}),
      },
    });
    assert.ok(isCiliumAgentPod(pod({}, "anetd")));
    assert.ok(isCiliumAgentPod(pod({ "k8s-app": "cilium" })));
    assert.ok(!isCiliumAgentPod(pod({ "k8s-app": "cilium-envoy" }, "cilium-envoy")));
    assert.equal(usesBpfIpMasqAgent(undefined), undefined);
    assert.equal(usesBpfIpMasqAgent("KVStore: Disabled\n"), undefined);
    assert.equal(usesBpfIpMasqAgent("Masquerading:   IPTables [IPv4: Enabled]\n"), false);
    assert.equal(usesBpfIpMasqAgent("Masquerading:   BPF (ip-masq-agent)   [eth0]\n"), true);
  });
});

describe("collect for AKS ip-masq-agent-v2 and Flannel", () => {
  const cm = (namespace: string, name: string): Obj => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace },
    data: { "ip-masq-agent": "nonMasqueradeCIDRs:\n  - 10.20.0.0/16\n" },
  });
  it("reads the ConfigMaps by name (both Flannel namespaces) and Flannel's DaemonSet in kube-flannel", async () => {
    const flannelDs: Obj = {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "kube-flannel-ds", namespace: "kube-flannel", labels: { app: "flannel" } },
      spec: {
        selector: { matchLabels: { app: "flannel" } },
        template: {
          metadata: { labels: { app: "flannel" } },
          spec: {
            containers: [
              {
                name: "kube-flannel",
                image: "ghcr.io/flannel-io/flannel:v0.26.1",
                args: ["--ip-masq"],
              },
            ],
          },
        },
      },
    };
    const objects = [
      ...smallCluster(),
      cm("kube-system", "azure-ip-masq-agent-config"),
      cm("kube-system", "azure-ip-masq-agent-config-reconciled"),
      cm("kube-flannel", "kube-flannel-cfg"),
      cm("kube-system", "kube-flannel-cfg"),
      cm("kube-system", "unrelated-settings"),
      flannelDs,
    ];
    const server = await startFakeApi(objects, { exec: smallClusterExec });
    try {
      const w = memoryWriter();
      const report = await collectSnapshot(await source(server.url), w, {});
      assert.deepEqual(report.failures, []);
      const names = (rel: string) =>
        (parse(w.files.get(rel)?.toString("utf8") ?? "{}") as { items?: Obj[] }).items?.map(
          (o) => `${o.metadata.namespace}/${o.metadata.name}`,
        );
      assert.deepEqual(names("cluster/configmap-azure-ip-masq-agent-config.yaml"), [
        "kube-system/azure-ip-masq-agent-config",
      ]);
      assert.deepEqual(names("cluster/configmap-azure-ip-masq-agent-config-reconciled.yaml"), [
        "kube-system/azure-ip-masq-agent-config-reconciled",
      ]);
      assert.deepEqual(names("cluster/configmap-kube-flannel-cfg.yaml"), [
        "kube-flannel/kube-flannel-cfg",
        "kube-system/kube-flannel-cfg",
      ]);
      assert.ok(names("cluster/daemonsets.yaml")?.includes("kube-flannel/kube-flannel-ds"));
      // ConfigMaps are read by name only (the role's resourceNames), never listed
      const cms = server.requests.filter((q) => q.resource === "configmaps");
      assert.ok(cms.every((q) => q.verb === "get" && q.name !== undefined));
      assert.ok(!cms.some((q) => q.name === "unrelated-settings"));
      // absent CRDs (Calico, Cilium) are "not installed": no file, no failure, no list
      assert.ok(![...w.files.keys()].some((f) => /ippools|ciliumnodes|cilium-config/.test(f)));
      assert.ok(!server.requests.some((q) => q.verb === "list" && q.resource === "ippools"));
    } finally {
      await server.close();
    }
  });
});
