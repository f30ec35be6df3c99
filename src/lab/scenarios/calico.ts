/**
 * @module lab/scenarios/calico — the SNAT case on a Calico node (iptables dataplane): Felix's nat
 * rules exactly as it writes them (agents/calico/rules.ts: the POSTROUTING hook, cali-POSTROUTING,
 * cali-nat-outgoing with their `cali:<hash>` comments, loaded with iptables-restore as Felix does)
 * and its IP sets (`ipset restore`), behind kube-proxy's scaffolding. Two IPPools: the default
 * pool with natOutgoing, and the billing namespace's pool without it, so the billing pod keeps its
 * address toward an on-prem site that routes back only the node subnet. `--phase after` (or
 * `--fixed`) gives the billing pool natOutgoing: true, as `kubectl patch ippool` would.
 * The pod side is Calico's: a /32 on eth0, default via 169.254.1.1, proxy ARP on the host's
 * cali* interface. Probes ping and open TCP from node and pod, with tcpdump on node and on-prem.
 *
 * Topology (IPv4):
 *   pod (10.245.12.4/32) ─ node (cali7a3e9c1f0b2 · eth0 192.168.1.10/24)
 *     ─ router (br0 192.168.1.1/24 · onprem0 10.20.0.1/16) ─ on-prem host (10.20.30.40/16)
 */
import { z } from "zod";
import { type CalicoIpPool, readIpPools } from "../../agents/calico/ippool.ts";
import { SET_ID_ALL_POOLS, SET_ID_ALL_POOLS_LEGACY } from "../../agents/calico/ipsets.ts";
import { calicoNatRestoreText, ipsetRestoreText } from "../../agents/calico/rules.ts";
import { readKubeObjects } from "../../evidence/kube-objects.ts";
import {
  type Capture,
  collectKernelState,
  runProbes,
  startCapture,
  stopProcess,
  writeSnapshotFile,
} from "../artifacts.ts";
import { KUBE_PROXY_RESTORE } from "../masq-rules.ts";
import type { Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { DB_PORT, ONPREM_IP, ONPREM_PREFIX, SITE_NAME, startListener } from "./masquerade.ts";
import { kubectlList } from "./masquerade-cluster.ts";

export const CALICO_NODE = "worker-1";
export const CALICO_NODE_IP = "192.168.1.10";
export const CALICO_NODE_SUBNET = "192.168.1.0/24";
export const CALICO_POD_IP = "10.245.12.4";
export const CALICO_POD_NAME = "billing-6c9f7d8b5-q8zkt";
export const CALICO_POD_NAMESPACE = "billing";
export const DEFAULT_POOL = { name: "default-ipv4-ippool", cidr: "10.244.0.0/16" } as const;
export const BILLING_POOL = { name: "billing-ippool", cidr: "10.245.0.0/16" } as const;
const POD_BLOCK = "10.245.12.0/26";
/** Felix names the host side cali + 11 hex characters of the workload endpoint's hash. */
const HOST_VETH = "cali7a3e9c1f0b2";
const ROUTER_NODE_IP = "192.168.1.1";
const ROUTER_ONPREM_IP = "10.20.0.1";
const CREATED_AT = "2026-01-01T00:00:00Z";
export const CALICO_VERSION = "v3.32.1";

const boolText = z.union([z.boolean(), z.enum(["true", "false"])]);

export const CalicoOptions = z
  .object({
    phase: z.enum(["before", "after"]).default("before"),
    /** Shorthand for `--phase after`. */
    fixed: boolText.optional(),
    /** The all-pools set's id: v3.32's network-ip-pools, or all-ipam-pools (<= v3.31). */
    "all-pools-set": z.enum([SET_ID_ALL_POOLS, SET_ID_ALL_POOLS_LEGACY]).default(SET_ID_ALL_POOLS),
    /** How the node's IP sets are written to nodes/<node>/ipset.txt. */
    "ipset-form": z.enum(["save", "list"]).default("save"),
    "routes-back": z.string().default(CALICO_NODE_SUBNET),
  })
  .strict();
export type CalicoOptions = z.output<typeof CalicoOptions>;

export interface CalicoReplicaPlan {
  readonly phase: "before" | "after";
  readonly allPoolsSetId: typeof SET_ID_ALL_POOLS | typeof SET_ID_ALL_POOLS_LEGACY;
  readonly ipsetForm: "save" | "list";
  readonly routesBack: readonly string[];
  /** cluster/ippools.yaml as `kubectl get ippools.crd.projectcalico.org -o yaml` prints it. */
  readonly ippoolsYaml: string;
  readonly pools: readonly CalicoIpPool[];
  readonly natRestore: string;
  readonly ipsetRestore: string;
}

const meta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  creationTimestamp: CREATED_AT,
  resourceVersion: "1000",
  ...extra,
});

/** The IPPools as stored (crd.projectcalico.org/v1), the billing pool's natOutgoing per phase. */
export function ippoolObjects(billingNatOutgoing: boolean): unknown[] {
  const pool = (name: string, cidr: string, natOutgoing: boolean) => ({
    apiVersion: "crd.projectcalico.org/v1",
    kind: "IPPool",
    metadata: meta(name, { generation: 1 }),
    spec: {
      allowedUses: ["Workload", "Tunnel"],
      blockSize: 26,
      cidr,
      ipipMode: "Never",
      natOutgoing,
      nodeSelector: "all()",
      vxlanMode: "Never",
    },
  });
  return [
    pool(BILLING_POOL.name, BILLING_POOL.cidr, billingNatOutgoing),
    pool(DEFAULT_POOL.name, DEFAULT_POOL.cidr, true),
  ];
}

export function planCalicoReplica(o: CalicoOptions): CalicoReplicaPlan {
  const phase = o.fixed === true || o.fixed === "true" ? "after" : o.phase;
  const ippoolsYaml = kubectlList(ippoolObjects(phase === "after"));
  const pools = readIpPools(readKubeObjects(ippoolsYaml, "cluster/ippools.yaml").value).pools;
  const allPoolsSetId = o["all-pools-set"];
  const active = pools.some((p) => p.natOutgoing);
  return {
    phase,
    allPoolsSetId,
    ipsetForm: o["ipset-form"],
    routesBack: o["routes-back"]
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
    ippoolsYaml,
    pools,
    natRestore: calicoNatRestoreText({ family: 4, allPoolsSetId }, active),
    ipsetRestore: ipsetRestoreText(pools, 4, allPoolsSetId),
  };
}

async function must(ns: Namespace, argv: readonly string[], input?: string): Promise<string> {
  const r = await ns.exec(argv, input === undefined ? {} : { input });
  if (r.code !== 0) {
    throw new Error(`${argv.join(" ")} in ${ns.name} exited ${r.code}: ${r.stderr.trim()}`);
  }
  return r.stdout;
}

const ipBatch = (ns: Namespace, lines: readonly string[]) =>
  must(ns, ["ip", "-batch", "-"], `${lines.join("\n")}\n`);

/** Felix's dataplane: its IP sets first (rules naming a missing set are refused), then its rules. */
export async function installCalicoNat(ns: Namespace, plan: CalicoReplicaPlan): Promise<void> {
  await must(ns, ["ipset", "restore"], plan.ipsetRestore);
  await must(ns, ["iptables-restore", "--noflush", "-w"], plan.natRestore);
}

interface Built {
  readonly router: Namespace;
  readonly node: Namespace;
  readonly pod: Namespace;
  readonly onprem: Namespace;
}

async function build(ctx: ScenarioContext, plan: CalicoReplicaPlan): Promise<Built> {
  const { lab } = ctx;
  const router = await lab.addNamespace("router");
  const onprem = await lab.addNamespace("onprem");
  const node = await lab.addNamespace("node");
  const pod = await lab.addNamespace("pod");
  await lab.link(router, "onprem0", onprem, "eth0");
  await lab.link(node, "eth0", router, "br0");
  await lab.link(pod, "eth0", node, HOST_VETH);
  await ipBatch(router, [
    `addr add ${ROUTER_NODE_IP}/24 dev br0`,
    `addr add ${ROUTER_ONPREM_IP}/16 dev onprem0`,
    "link set br0 up",
    "link set onprem0 up",
    // the fabric routes the node's IPAM blocks to it (BGP in a real cluster)
    `route add ${POD_BLOCK} via ${CALICO_NODE_IP}`,
  ]);
  await must(router, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await ipBatch(onprem, [
    `addr add ${ONPREM_IP}/16 dev eth0`,
    "link set eth0 up",
    ...plan.routesBack.map((c) => `route add ${c} via ${ROUTER_ONPREM_IP}`),
  ]);
  await ipBatch(node, [
    `addr add ${CALICO_NODE_IP}/24 dev eth0`,
    "link set eth0 up",
    // Calico's host side of a workload: fixed MAC, proxy ARP answers for 169.254.1.1
    `link set ${HOST_VETH} address ee:ee:ee:ee:ee:ee`,
    `link set ${HOST_VETH} up`,
    `route add ${CALICO_POD_IP}/32 dev ${HOST_VETH} scope link`,
    // the node's IPAM block, as BIRD installs it
    `route add blackhole ${POD_BLOCK} proto 80`,
    `route add default via ${ROUTER_NODE_IP}`,
  ]);
  await must(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await must(node, ["sysctl", "-q", "-w", `net.ipv4.conf.${HOST_VETH}.proxy_arp=1`]);
  await must(node, ["sysctl", "-q", "-w", `net.ipv4.neigh.${HOST_VETH}.proxy_delay=0`]);
  await ipBatch(pod, [
    `addr add ${CALICO_POD_IP}/32 dev eth0`,
    "link set eth0 up",
    "route add 169.254.1.1 dev eth0 scope link",
    "route add default via 169.254.1.1 dev eth0",
  ]);
  await must(node, ["iptables-restore", "--noflush", "-w"], KUBE_PROXY_RESTORE);
  await installCalicoNat(node, plan);
  return { router, node, pod, onprem };
}

/** The far side in podpath's RemoteSite schema. */
export function calicoRemoteSite(plan: CalicoReplicaPlan): string {
  return [
    "kind: RemoteSite",
    `name: ${SITE_NAME}`,
    "prefixes:",
    `  - ${ONPREM_PREFIX}`,
    "routesBack:",
    ...plan.routesBack.map((c) => `  - ${c}`),
    "allowlists:",
    "  - name: db-firewall",
    "    sources:",
    ...plan.routesBack.map((c) => `      - ${c}`),
    "    destinations:",
    `      - ${ONPREM_IP}/32`,
    "    ports:",
    `      - tcp/${DB_PORT}`,
    "",
  ].join("\n");
}

/** The Node, the app pod, and the calico-node DaemonSet with its pod. */
export function calicoClusterObjects(): { nodes: string; calicoNode: string; pods: string } {
  const labels = { "k8s-app": "calico-node" };
  const podSpec = {
    hostNetwork: true,
    priorityClassName: "system-node-critical",
    serviceAccountName: "calico-node",
    containers: [
      {
        name: "calico-node",
        image: `docker.io/calico/node:${CALICO_VERSION}`,
        env: [
          { name: "DATASTORE_TYPE", value: "kubernetes" },
          { name: "CALICO_NETWORKING_BACKEND", value: "bird" },
          { name: "CALICO_IPV4POOL_CIDR", value: DEFAULT_POOL.cidr },
          { name: "FELIX_IPTABLESBACKEND", value: "Auto" },
          { name: "FELIX_IPV6SUPPORT", value: "false" },
        ],
      },
    ],
  };
  const node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: meta(CALICO_NODE, {
      labels: { "kubernetes.io/hostname": CALICO_NODE, "kubernetes.io/os": "linux" },
      annotations: {
        "projectcalico.org/IPv4Address": `${CALICO_NODE_IP}/24`,
      },
    }),
    // Calico's IPAM ignores the Node's podCIDR: none is set
    spec: {},
    status: {
      addresses: [
        { address: CALICO_NODE_IP, type: "InternalIP" },
        { address: CALICO_NODE, type: "Hostname" },
      ],
      conditions: [{ status: "True", type: "Ready", reason: "KubeletReady" }],
      nodeInfo: { kubeletVersion: "v1.33.2", kernelVersion: "6.8.0-60-generic" },
    },
  };
  const ds = {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: meta("calico-node", { namespace: "kube-system", labels }),
    spec: {
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: podSpec },
    },
    status: { desiredNumberScheduled: 1, numberReady: 1 },
  };
  const cniPod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta("calico-node-5m2xq", {
      namespace: "kube-system",
      labels,
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "DaemonSet", name: "calico-node", controller: true },
      ],
    }),
    spec: { ...podSpec, nodeName: CALICO_NODE },
    status: { phase: "Running", hostIP: CALICO_NODE_IP, podIP: CALICO_NODE_IP },
  };
  const app = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta(CALICO_POD_NAME, {
      namespace: CALICO_POD_NAMESPACE,
      labels: { app: "billing" },
      annotations: {
        "cni.projectcalico.org/ipv4pools": `["${BILLING_POOL.name}"]`,
        "cni.projectcalico.org/podIP": `${CALICO_POD_IP}/32`,
        "cni.projectcalico.org/containerID": "4f1c0d2e9a7b",
      },
    }),
    spec: {
      nodeName: CALICO_NODE,
      containers: [{ name: "app", image: "registry.example/billing:1.4" }],
    },
    status: {
      phase: "Running",
      hostIP: CALICO_NODE_IP,
      podIP: CALICO_POD_IP,
      podIPs: [{ ip: CALICO_POD_IP }],
    },
  };
  return {
    nodes: kubectlList([node]),
    calicoNode: kubectlList([ds, cniPod]),
    pods: kubectlList([app]),
  };
}

const PING = ["ping", "-c", "3", "-i", "0.2", "-W", "1"] as const;
const nc = (ip: string) => ["nc", "-v", "-N", "-w", "2", ip, String(DB_PORT)];

async function probeAndSnapshot(
  out: string,
  plan: CalicoReplicaPlan,
  b: Built,
): Promise<ScenarioOutcome> {
  const files: string[] = [];
  const captures: Capture[] = [
    await startCapture(b.node, out, "node", {
      iface: "any",
      filter: `host ${ONPREM_IP}`,
      point: `node/${CALICO_NODE}`,
      phase: plan.phase,
    }),
    await startCapture(b.onprem, out, `remote-${SITE_NAME}`, {
      iface: "eth0",
      filter: `host ${ONPREM_IP}`,
      point: `remote/${SITE_NAME}`,
      phase: plan.phase,
    }),
  ];
  const summary: string[] = [];
  try {
    const nodeProbe = await runProbes(b.node, [
      { shown: `${PING.join(" ")} ${ONPREM_IP}`, argv: [...PING, ONPREM_IP] },
    ]);
    files.push(
      writeSnapshotFile(
        out,
        "probes/node.txt",
        `# client: node/${CALICO_NODE}\n${nodeProbe.transcript}`,
      ),
    );
    const podProbe = await runProbes(b.pod, [
      { shown: `${PING.join(" ")} ${ONPREM_IP}`, argv: [...PING, ONPREM_IP] },
      {
        shown: `${nc(ONPREM_IP).join(" ")} </dev/null`,
        argv: nc(ONPREM_IP),
        input: "",
        stderrFirst: true,
      },
    ]);
    files.push(
      writeSnapshotFile(
        out,
        `probes/pod-${CALICO_POD_NAME}.txt`,
        `# client: pod/${CALICO_POD_NAMESPACE}/${CALICO_POD_NAME}\n${podProbe.transcript}`,
      ),
    );
    const ok = (code: number | undefined) => (code === 0 ? "answers" : "silent");
    summary.push(
      `node ping ${ONPREM_IP} ${ok(nodeProbe.results[0]?.code)}, pod ping ${ok(podProbe.results[0]?.code)}, ` +
        `pod tcp/${DB_PORT} on-prem ${ok(podProbe.results[1]?.code)}`,
    );
  } finally {
    await new Promise((r) => setTimeout(r, 200));
    for (const c of captures) await c.stop();
  }
  for (const c of captures) files.push(c.rel, c.rel.replace(/\.pcap$/, ".yaml"));
  const ipsets = await must(
    b.node,
    plan.ipsetForm === "save" ? ["ipset", "save"] : ["ipset", "list"],
  );
  files.push(
    writeSnapshotFile(out, `nodes/${CALICO_NODE}/ipset.txt`, ipsets),
    ...(await collectKernelState(b.node, out, `nodes/${CALICO_NODE}`, [
      "iptables-save",
      "ip-route",
      "ip-addr",
      "sysctl",
      "conntrack",
    ])),
    ...(await collectKernelState(b.pod, out, `pods/${CALICO_POD_NAMESPACE}/${CALICO_POD_NAME}`, [
      "ip-route",
      "ip-addr",
      "sysctl",
    ])),
  );
  const objs = calicoClusterObjects();
  files.push(
    writeSnapshotFile(out, "cluster/nodes.yaml", objs.nodes),
    writeSnapshotFile(out, "cluster/calico-node.yaml", objs.calicoNode),
    writeSnapshotFile(out, "cluster/ippools.yaml", plan.ippoolsYaml),
    writeSnapshotFile(out, "cluster/pods.yaml", objs.pods),
    writeSnapshotFile(out, `remote/${SITE_NAME}.yaml`, calicoRemoteSite(plan)),
  );
  return { files, summary };
}

async function run(ctx: ScenarioContext, opts: CalicoOptions): Promise<ScenarioOutcome> {
  const plan = planCalicoReplica(opts);
  ctx.log(`building calico replica ${ctx.lab.id} (${plan.phase})`);
  const b = await build(ctx, plan);
  const listener = await startListener(b.onprem, false);
  try {
    if (ctx.outDir === undefined) {
      return {
        files: [],
        summary: [
          `on-prem ${ONPREM_IP} listens on tcp/${DB_PORT}`,
          `node ${CALICO_NODE}: ip netns exec ${b.node.name} …   pod ${CALICO_POD_IP}: ip netns exec ${b.pod.name} …`,
        ],
      };
    }
    return await probeAndSnapshot(ctx.outDir, plan, b);
  } finally {
    if (ctx.outDir !== undefined) await stopProcess(listener);
  }
}

export const scenario: Scenario<CalicoOptions> = {
  name: "calico",
  description:
    "Calico SNAT: cali-nat-outgoing and its IP sets, the billing IPPool without natOutgoing, an on-prem site that routes back only the node subnet",
  options: CalicoOptions,
  run,
};
