/**
 * @module lab/scenarios/flannel — the SNAT case on a Flannel node: flanneld without `--ip-masq`
 * and the CNI config's delegate with `"ipMasq": false` (the combination that turns both
 * masquerades off), so the pod keeps its address toward an on-prem site that routes back only the
 * node subnet; `--fixed` (or `--phase after`) runs flanneld with `--ip-masq`, whose FLANNEL-POSTRTG
 * rules (agents/flannel/rules.ts, as flannel v0.28.9 masqRules writes them) are added with
 * iptables-restore as flanneld does. The pod hangs off the `cni0` bridge with its lease's gateway.
 *
 * Topology (IPv4):
 *   pod (10.244.1.7/24, gw 10.244.1.1) ─ node (cni0 10.244.1.1/24 · eth0 192.168.50.10/24)
 *     ─ router (br0 192.168.50.1/24 · onprem0 10.20.0.1/16) ─ on-prem host (10.20.30.40/16)
 */
import { z } from "zod";
import { flannelRestoreText } from "../../agents/flannel/rules.ts";
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

export const FLANNEL_NODE = "flannel-worker-1";
export const FLANNEL_NODE_IP = "192.168.50.10";
export const FLANNEL_NODE_SUBNET = "192.168.50.0/24";
export const FLANNEL_NETWORK = "10.244.0.0/16";
export const FLANNEL_POD_SUBNET = "10.244.1.0/24";
export const FLANNEL_POD_IP = "10.244.1.7";
export const FLANNEL_POD_NAME = "billing-5d8f9c7b6-h2xkq";
const GATEWAY = "10.244.1.1";
const HOST_VETH = "veth3a9c1e2f";
const ROUTER_NODE_IP = "192.168.50.1";
const ROUTER_ONPREM_IP = "10.20.0.1";
const CREATED_AT = "2026-01-01T00:00:00Z";
const IMAGE = "ghcr.io/flannel-io/flannel:v0.28.9";

const boolText = z.union([z.boolean(), z.enum(["true", "false"])]);

export const FlannelOptions = z
  .object({
    phase: z.enum(["before", "after"]).default("before"),
    /** Shorthand for `--phase after`. */
    fixed: boolText.optional(),
    "routes-back": z.string().default(FLANNEL_NODE_SUBNET),
  })
  .strict();
export type FlannelOptions = z.output<typeof FlannelOptions>;

export interface FlannelReplicaPlan {
  readonly phase: "before" | "after";
  readonly ipMasq: boolean;
  readonly routesBack: readonly string[];
}

export function planFlannelReplica(o: FlannelOptions): FlannelReplicaPlan {
  const phase = o.fixed === true || o.fixed === "true" ? "after" : o.phase;
  return {
    phase,
    ipMasq: phase === "after",
    routesBack: o["routes-back"]
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
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

interface Built {
  readonly node: Namespace;
  readonly pod: Namespace;
  readonly onprem: Namespace;
}

async function build(ctx: ScenarioContext, plan: FlannelReplicaPlan): Promise<Built> {
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
    `route add ${FLANNEL_POD_SUBNET} via ${FLANNEL_NODE_IP}`,
  ]);
  await must(router, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await ipBatch(onprem, [
    `addr add ${ONPREM_IP}/16 dev eth0`,
    "link set eth0 up",
    ...plan.routesBack.map((c) => `route add ${c} via ${ROUTER_ONPREM_IP}`),
  ]);
  // the bridge plugin's side: cni0 with the lease's first address, the pod's veth on it
  await ipBatch(node, [
    `addr add ${FLANNEL_NODE_IP}/24 dev eth0`,
    "link set eth0 up",
    "link add cni0 type bridge",
    `addr add ${GATEWAY}/24 dev cni0`,
    "link set cni0 up",
    `link set ${HOST_VETH} master cni0`,
    `link set ${HOST_VETH} up`,
    `route add default via ${ROUTER_NODE_IP}`,
  ]);
  await must(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await ipBatch(pod, [
    `addr add ${FLANNEL_POD_IP}/24 dev eth0`,
    "link set eth0 up",
    `route add default via ${GATEWAY}`,
  ]);
  await must(node, ["iptables-restore", "--noflush", "-w"], KUBE_PROXY_RESTORE);
  if (plan.ipMasq) {
    await must(
      node,
      ["iptables-restore", "--noflush", "-w"],
      flannelRestoreText({ family: 4, network: FLANNEL_NETWORK, podSubnet: FLANNEL_POD_SUBNET }),
    );
  }
  return { node, pod, onprem };
}

export function flannelRemoteSite(plan: FlannelReplicaPlan): string {
  return [
    "kind: RemoteSite",
    `name: ${SITE_NAME}`,
    "prefixes:",
    `  - ${ONPREM_PREFIX}`,
    "routesBack:",
    ...plan.routesBack.map((c) => `  - ${c}`),
    "",
  ].join("\n");
}

const meta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  creationTimestamp: CREATED_AT,
  resourceVersion: "1000",
  ...extra,
});

/** The Node (podCIDR = the lease), the app pod, kube-flannel's ConfigMap, DaemonSet and pod. */
export function flannelClusterObjects(plan: FlannelReplicaPlan): {
  nodes: string;
  flannel: string;
  pods: string;
} {
  const labels = { app: "flannel", "k8s-app": "flannel", tier: "node" };
  const cniConf = JSON.stringify(
    {
      name: "cbr0",
      cniVersion: "0.3.1",
      plugins: [
        // the delegate's ipMasq is set: the flannel CNI plugin does not masquerade in flanneld's place
        { type: "flannel", delegate: { hairpinMode: true, isDefaultGateway: true, ipMasq: false } },
        { type: "portmap", capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
  const netConf = JSON.stringify(
    { Network: FLANNEL_NETWORK, EnableNFTables: false, Backend: { Type: "vxlan" } },
    null,
    2,
  );
  const cm = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: meta("kube-flannel-cfg", { namespace: "kube-flannel", labels }),
    data: { "cni-conf.json": `${cniConf}\n`, "net-conf.json": `${netConf}\n` },
  };
  const podSpec = {
    hostNetwork: true,
    priorityClassName: "system-node-critical",
    serviceAccountName: "flannel",
    containers: [
      {
        name: "kube-flannel",
        image: IMAGE,
        command: ["/opt/bin/flanneld"],
        args: [...(plan.ipMasq ? ["--ip-masq"] : []), "--kube-subnet-mgr", "--healthz-port=8081"],
      },
    ],
  };
  const ds = {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: meta("kube-flannel-ds", { namespace: "kube-flannel", labels }),
    spec: {
      selector: { matchLabels: { app: "flannel" } },
      template: { metadata: { labels }, spec: podSpec },
    },
    status: { desiredNumberScheduled: 1, numberReady: 1 },
  };
  const flannelPod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta("kube-flannel-ds-7xq2m", {
      namespace: "kube-flannel",
      labels,
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "DaemonSet", name: "kube-flannel-ds", controller: true },
      ],
    }),
    spec: { ...podSpec, nodeName: FLANNEL_NODE },
    status: { phase: "Running", hostIP: FLANNEL_NODE_IP, podIP: FLANNEL_NODE_IP },
  };
  const node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: meta(FLANNEL_NODE, {
      labels: { "kubernetes.io/hostname": FLANNEL_NODE, "kubernetes.io/os": "linux" },
      annotations: {
        "flannel.alpha.coreos.com/backend-type": "vxlan",
        "flannel.alpha.coreos.com/public-ip": FLANNEL_NODE_IP,
      },
    }),
    spec: { podCIDR: FLANNEL_POD_SUBNET, podCIDRs: [FLANNEL_POD_SUBNET] },
    status: {
      addresses: [
        { address: FLANNEL_NODE_IP, type: "InternalIP" },
        { address: FLANNEL_NODE, type: "Hostname" },
      ],
      conditions: [{ status: "True", type: "Ready", reason: "KubeletReady" }],
      nodeInfo: { kubeletVersion: "v1.33.2", kernelVersion: "6.8.0-60-generic" },
    },
  };
  const app = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta(FLANNEL_POD_NAME, { namespace: "default", labels: { app: "billing" } }),
    spec: {
      nodeName: FLANNEL_NODE,
      containers: [{ name: "app", image: "registry.example/billing:1.4" }],
    },
    status: {
      phase: "Running",
      hostIP: FLANNEL_NODE_IP,
      podIP: FLANNEL_POD_IP,
      podIPs: [{ ip: FLANNEL_POD_IP }],
    },
  };
  return {
    nodes: kubectlList([node]),
    flannel: kubectlList([cm, ds, flannelPod]),
    pods: kubectlList([app]),
  };
}

const PING = ["ping", "-c", "3", "-i", "0.2", "-W", "1"] as const;
const nc = (ip: string) => ["nc", "-v", "-N", "-w", "2", ip, String(DB_PORT)];

async function probeAndSnapshot(
  out: string,
  plan: FlannelReplicaPlan,
  b: Built,
): Promise<ScenarioOutcome> {
  const files: string[] = [];
  const captures: Capture[] = [
    await startCapture(b.node, out, "node", {
      iface: "any",
      filter: `host ${ONPREM_IP}`,
      point: `node/${FLANNEL_NODE}`,
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
        `# client: node/${FLANNEL_NODE}\n${nodeProbe.transcript}`,
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
        `probes/pod-${FLANNEL_POD_NAME}.txt`,
        `# client: pod/default/${FLANNEL_POD_NAME}\n${podProbe.transcript}`,
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
  files.push(
    ...(await collectKernelState(b.node, out, `nodes/${FLANNEL_NODE}`, [
      "iptables-save",
      "ip-route",
      "ip-addr",
      "sysctl",
      "conntrack",
    ])),
    ...(await collectKernelState(b.pod, out, `pods/default/${FLANNEL_POD_NAME}`, [
      "ip-route",
      "ip-addr",
      "sysctl",
    ])),
  );
  const objs = flannelClusterObjects(plan);
  files.push(
    writeSnapshotFile(out, "cluster/nodes.yaml", objs.nodes),
    writeSnapshotFile(out, "cluster/kube-flannel.yaml", objs.flannel),
    writeSnapshotFile(out, "cluster/pods.yaml", objs.pods),
    writeSnapshotFile(out, `remote/${SITE_NAME}.yaml`, flannelRemoteSite(plan)),
  );
  return { files, summary };
}

async function run(ctx: ScenarioContext, opts: FlannelOptions): Promise<ScenarioOutcome> {
  const plan = planFlannelReplica(opts);
  ctx.log(`building flannel replica ${ctx.lab.id} (${plan.phase})`);
  const b = await build(ctx, plan);
  const listener = await startListener(b.onprem, false);
  try {
    if (ctx.outDir === undefined) {
      return {
        files: [],
        summary: [
          `on-prem ${ONPREM_IP} listens on tcp/${DB_PORT}`,
          `node ${FLANNEL_NODE}: ip netns exec ${b.node.name} …   pod ${FLANNEL_POD_IP}: ip netns exec ${b.pod.name} …`,
        ],
      };
    }
    return await probeAndSnapshot(ctx.outDir, plan, b);
  } finally {
    if (ctx.outDir !== undefined) await stopProcess(listener);
  }
}

export const scenario: Scenario<FlannelOptions> = {
  name: "flannel",
  description:
    "Flannel SNAT: flanneld without --ip-masq (CNI delegate ipMasq false), an on-prem site that routes back only the node subnet",
  options: FlannelOptions,
  run,
};
