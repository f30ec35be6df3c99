/**
 * Component test: the lab's Service scenario (src/lab/scenarios/service-rules.ts) held to the real
 * kube-proxy. The scenario's Services are created through the real API server as the scenario
 * describes them (default/web to its endpoint pod, default/kubernetes to the node itself on 6443,
 * default/orders without endpoints), the real kube-proxy (iptables mode) writes their rules in a
 * lab namespace on the scenario's node address and cluster CIDR, and its `iptables-save` is
 * compared with the scenario's rules as the kernel holds them (loaded with iptables-restore into a
 * second namespace and read back with iptables-save): every rule of kube-proxy's chains in the nat
 * and filter tables and every jump into them, the chains' hash names mapped to the Service port
 * and endpoint their comments name, and the hash names themselves. The rules the scenario adds for
 * the distribution and the CNI (CentOS, Flannel) are left out: kube-proxy does not write them.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createLab, type Lab, type Namespace } from "../../src/lab/netns.ts";
import {
  SVC_CLUSTER_CIDR,
  SVC_ENDPOINT_IP,
  SVC_LISTEN_PORT,
  SVC_NODE,
  SVC_NODE_IP,
} from "../../src/lab/scenarios/service-lab.ts";
import { API_PORT, SERVICES, serviceRestoreText } from "../../src/lab/scenarios/service-rules.ts";
import { reachApiFrom, writeInnerKubeconfig } from "./api-bridge.ts";
import { type Cluster, startCluster } from "./cluster.ts";
import { componentSkip } from "./component-guard.ts";
import { addNodeUplink, spawnKubeProxy } from "./kube-proxy-node.ts";

const skip =
  componentSkip("kube-proxy") ||
  componentSkip("kube-apiserver", { kernel: false }) ||
  componentSkip("etcd", { kernel: false });
const INNER_PORT = 6443;

/** A chain kube-proxy's iptables mode owns (the kubelet's canaries and hint are not compared). */
const isKubeProxyChain = (c: string) =>
  /^KUBE-(SERVICES|SVC-\w+|SEP-\w+|SVL-\w+|EXT-\w+|FW-\w+|MARK-MASQ|POSTROUTING|NODEPORTS|FORWARD|EXTERNAL-SERVICES|PROXY-FIREWALL|FIREWALL)$/.test(
    c,
  );

interface KubeProxyRules {
  /** `table` → lines, hash names replaced by what they stand for, in iptables-save's order. */
  readonly tables: Record<string, string[]>;
  /** Hash chain name → what it stands for (`svc default/web:http`, `sep default/web:http -> …`). */
  readonly names: Record<string, string>;
}

/**
 * kube-proxy's part of an iptables-save text: its chains' declarations and rules, and the jumps
 * into them from the built-in chains; KUBE-SVC-/KUBE-SEP- names replaced by the Service port (or
 * endpoint) their rules' comments name. Within KUBE-SERVICES the Services' rules are sorted:
 * kube-proxy writes them in its map's order, which varies from sync to sync.
 */
function kubeProxyRules(save: string): KubeProxyRules {
  const names: Record<string, string> = {};
  for (const l of save.split("\n")) {
    const svc = /--comment "([^"]+) cluster IP" .*-j (KUBE-SVC-\w+)$/.exec(l);
    if (svc) names[svc[2]!] = `<svc ${svc[1]}>`;
    const sep = /--comment "([^"]+ -> [^"]+)" .*-j (KUBE-SEP-\w+)$/.exec(l);
    if (sep) names[sep[2]!] = `<sep ${sep[1]}>`;
  }
  // kube-proxy's nfacct counter on its conntrack-INVALID drop exists only where the kernel has
  // nfacct (the lab cannot create the counter object): the rule is compared without it
  const rename = (l: string) =>
    l
      .replace(/KUBE-(SVC|SEP)-\w{16}/g, (n) => names[n] ?? `<unnamed ${n.slice(5, 8)}>`)
      .replace(/ -m nfacct --nfacct-name +\S+/, "");
  const decls: Record<string, string[]> = {};
  const chains: Record<string, Map<string, string[]>> = {};
  let table = "";
  for (const l of save.split("\n")) {
    if (l.startsWith("*")) {
      table = l.slice(1);
      continue;
    }
    if (table !== "nat" && table !== "filter") continue;
    const decl = /^:(\S+) /.exec(l);
    if (decl && isKubeProxyChain(decl[1]!)) {
      decls[table] = [...(decls[table] ?? []), rename(`:${decl[1]}`)];
    }
    const rule = /^-A (\S+) .*?(?:-j (\S+))?$/.exec(l);
    if (rule && (isKubeProxyChain(rule[1]!) || isKubeProxyChain(rule[2] ?? ""))) {
      const chain = rename(rule[1]!);
      const byChain = chains[table] ?? new Map<string, string[]>();
      chains[table] = byChain;
      byChain.set(chain, [...(byChain.get(chain) ?? []), rename(l)]);
    }
  }
  const tables: Record<string, string[]> = {};
  for (const t of ["nat", "filter"]) {
    const rules = [...(chains[t] ?? new Map<string, string[]>())]
      .sort(([a], [b]) => a.localeCompare(b))
      .flatMap(([chain, lines]) => {
        if (chain !== "KUBE-SERVICES") return lines;
        // the Services' rules first, sorted; the NodePort jump last, as kube-proxy keeps it
        const last = lines.filter((l) => l.includes("-j KUBE-NODEPORTS"));
        return [...lines.filter((l) => !last.includes(l)).sort(), ...last];
      });
    tables[t] = [...(decls[t] ?? []).sort(), ...rules];
  }
  return { tables, names };
}

describe("the lab's Service scenario held to the real kube-proxy", { skip }, () => {
  let cluster: Cluster | undefined;
  let lab: Lab | undefined;
  let ns: Namespace | undefined;
  let replica: Namespace | undefined;
  let outer: { close(): void } | undefined;
  let proxy: ChildProcess | undefined;
  let dir = "";
  let log = "";

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "podpath-kube-proxy-svc-"));
    // default/kubernetes goes to the node itself, as in the scenario: its EndpointSlice is ours
    cluster = await startCluster({ apiServerArgs: ["--endpoint-reconciler-type=none"] });
    lab = await createLab();
    ns = await lab.addNamespace("node");
    replica = await lab.addNamespace("replica");
    await addNodeUplink(lab, ns, SVC_NODE_IP);
    outer = await reachApiFrom(
      ns,
      Number(new URL(cluster.url).port),
      join(dir, "api.sock"),
      INNER_PORT,
    );
    writeInnerKubeconfig(join(dir, "kubeconfig"), cluster, INNER_PORT);
  });
  after(async () => {
    if (proxy && proxy.exitCode === null && proxy.signalCode === null) {
      const gone = new Promise((r) => proxy!.once("exit", r));
      proxy.kill("SIGTERM");
      await gone;
    }
    await lab?.destroy();
    outer?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("kube-proxy writes for the scenario's Services the rules the scenario loads (nat and filter), chain names included", async () => {
    const c = cluster!;
    const send = async (method: string, path: string, body: unknown, ok = [200, 201]) => {
      const r = await c.api(method, path, c.adminToken, body);
      assert.ok(ok.includes(r.status), `${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body as Record<string, unknown>;
    };
    const node = await send("POST", "/api/v1/nodes", {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: SVC_NODE },
    });
    await send("PUT", `/api/v1/nodes/${SVC_NODE}/status`, {
      ...node,
      status: { addresses: [{ type: "InternalIP", address: SVC_NODE_IP }] },
    });
    const service = (name: string, ip: string, port: number, targetPort: number) =>
      send("POST", "/api/v1/namespaces/default/services", {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name },
        spec: {
          type: "ClusterIP",
          clusterIP: ip,
          ports: [{ name: "http", port, targetPort, protocol: "TCP" }],
        },
      });
    const slice = (service: string, portName: string, ip: string, port: number, node?: string) => ({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: service,
        namespace: "default",
        labels: {
          "kubernetes.io/service-name": service,
          "endpointslice.kubernetes.io/managed-by": "podpath-test",
        },
      },
      addressType: "IPv4",
      ports: [{ name: portName, port, protocol: "TCP" }],
      endpoints: [
        { addresses: [ip], conditions: { ready: true }, ...(node ? { nodeName: node } : {}) },
      ],
    });
    await service("web", SERVICES.web.ip, SERVICES.web.port, SVC_LISTEN_PORT);
    await send(
      "POST",
      "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
      slice("web", "http", SVC_ENDPOINT_IP, SVC_LISTEN_PORT, SVC_NODE),
    );
    await service("orders", SERVICES.orders.ip, SERVICES.orders.port, SVC_LISTEN_PORT);
    // default/kubernetes: made by the API server itself (the first address of the range)
    const kube = await c.api("GET", "/api/v1/namespaces/default/services/kubernetes", c.adminToken);
    assert.equal(
      (kube.body as { spec: { clusterIP: string } }).spec.clusterIP,
      SERVICES.apiserver.ip,
    );
    const apiSlice = slice("kubernetes", "https", SVC_NODE_IP, API_PORT);
    const old = await c.api(
      "GET",
      "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes",
      c.adminToken,
    );
    if (old.status === 200) {
      const meta = (old.body as { metadata: Record<string, unknown> }).metadata;
      await send("PUT", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes", {
        ...apiSlice,
        metadata: { ...apiSlice.metadata, resourceVersion: meta["resourceVersion"] },
      });
    } else {
      await send("POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", apiSlice);
    }

    proxy = spawnKubeProxy(
      ns!,
      {
        kubeconfig: join(dir, "kubeconfig"),
        mode: "iptables",
        hostname: SVC_NODE,
        nodeIp: SVC_NODE_IP,
        clusterCidr: SVC_CLUSTER_CIDR,
      },
      (tail) => (log = tail),
    );
    let real = "";
    const deadline = Date.now() + 120_000;
    for (;;) {
      real = (await ns!.exec(["iptables-save"])).stdout;
      const seps = real.split("\n").filter((l) => /^-A KUBE-SEP-\w+ .*DNAT/.test(l));
      if (seps.length === 2 && real.includes(`-d ${SERVICES.orders.ip}/32`)) break;
      assert.equal(proxy.exitCode, null, `kube-proxy exited:\n${log}`);
      assert.ok(Date.now() < deadline, `kube-proxy wrote no rules in 120 s:\n${log}\n${real}`);
      await new Promise((r) => setTimeout(r, 250));
    }

    // the scenario's rules as the kernel holds them: loaded and read back by the real tools
    const restore = serviceRestoreText({
      centosInput: false,
      centosForward: false,
      flannel: false,
    });
    const loaded = await replica!.exec(["iptables-restore", "-w"], { input: restore });
    assert.equal(loaded.code, 0, loaded.stderr);
    const lab = (await replica!.exec(["iptables-save"])).stdout;

    const want = kubeProxyRules(real);
    const got = kubeProxyRules(lab);
    for (const table of ["nat", "filter"]) {
      assert.deepEqual(got.tables[table], want.tables[table], `${table} table\nreal:\n${real}`);
    }
    // the chain names are kube-proxy's own hashes of the same Service ports and endpoints
    const byMeaning = (n: Record<string, string>) =>
      Object.fromEntries(Object.entries(n).map(([k, v]) => [v, k]));
    assert.deepEqual(byMeaning(got.names), byMeaning(want.names));
  });
});
