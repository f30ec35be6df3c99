/**
 * @module lab/scenarios/cilium — the SNAT case on a Cilium node that masquerades with iptables
 * (`enable-bpf-masquerade: "false"`, the chart's default; native routing): Cilium's nat chains,
 * feeder rules, node ipset and CILIUM_POST_nat rules added with the agent's own argv and order
 * (agents/cilium/rules.ts, from pkg/datapath/iptables/iptables.go), a pod behind an lxc veth, and
 * an on-prem site that routes back only the nodes' range. `--native-routing-cidr` is
 * cilium-config's ipv4-native-routing-cidr: the default 10.0.0.0/8 is wider than the pods' range
 * and holds the on-prem prefix, so Cilium's `! -d 10.0.0.0/8` MASQUERADE does not match and the
 * pod keeps its address; `--phase after` writes the fix (10.0.0.0/16). No Cilium agent runs here:
 * BPF masquerade is not reproduced (docs/owners/cilium.md), `cilium_host`/`cilium_net` are a
 * plain veth pair without Cilium's programs, and no `cilium-dbg status` is written (the mode comes
 * from cilium-config).
 *
 * Topology (IPv4):
 *   pod (10.0.1.23/32, eth0 → 10.0.1.1) ─ node (lxc9a1c2e7f3b40 · cilium_host 10.0.1.1/32 ·
 *   eth0 192.168.1.10/24) ─ router (br0 192.168.1.1/24 · onprem0 10.20.0.1/16) ─ on-prem
 *   host (10.20.30.40/16)
 */
import { stringify } from "yaml";
import { z } from "zod";
import {
  CILIUM_NAT_CHAINS,
  type CiliumIptablesInput,
  type CiliumRule,
  ciliumMasqueradeRules,
  feederRule,
  HOST_DEVICE,
  nodeIpsetCommands,
} from "../../agents/cilium/rules.ts";
import {
  type Capture,
  collectKernelState,
  runProbes,
  startCapture,
  stopProcess,
  writeSnapshotFile,
} from "../artifacts.ts";
import type { Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { DB_PORT, ONPREM_IP, ONPREM_PREFIX, SITE_NAME, startListener } from "./masquerade.ts";
import { kubectlList } from "./masquerade-cluster.ts";

export const NODE_NAME = "worker-1";
export const NODE_IP = "192.168.1.10";
export const POD_CIDR = "10.0.1.0/24";
export const POD_IP = "10.0.1.23";
export const POD_NAME = "billing-5f7c9d8b6-q2w4e";
export const CILIUM_HOST_IP = "10.0.1.1";
export const CLUSTER_POD_CIDR = "10.0.0.0/16";
const LXC = "lxc9a1c2e7f3b40";
const ROUTER_NODE_IP = "192.168.1.1";
const ROUTER_ONPREM_IP = "10.20.0.1";
const NODES_RANGE = "192.168.0.0/16";
const CREATED_AT = "2026-01-01T00:00:00Z";
const IMAGE = "quay.io/cilium/cilium:v1.16.5";

export const CiliumOptions = z
  .object({
    /** cilium-config ipv4-native-routing-cidr (the iptables rule's `! -d`). */
    "native-routing-cidr": z.string().default("10.0.0.0/8"),
    /** cilium-config masquerade-interfaces (comma separated). */
    "masquerade-interfaces": z.string().default(""),
    phase: z.enum(["before", "after"]).default("before"),
  })
  .strict();
export type CiliumOptions = z.output<typeof CiliumOptions>;

/** What the replica's node runs, from the options (pure). */
export interface CiliumReplicaPlan {
  readonly nativeRoutingCidr: string;
  readonly input: CiliumIptablesInput;
  readonly rules: readonly CiliumRule[];
  readonly phase: "before" | "after";
}

export function planCiliumReplica(o: CiliumOptions): CiliumReplicaPlan {
  const nativeRoutingCidr = o.phase === "after" ? CLUSTER_POD_CIDR : o["native-routing-cidr"];
  const input: CiliumIptablesInput = {
    family: 4,
    allocRange: POD_CIDR,
    snatDstExclusionCidr: nativeRoutingCidr,
    masqueradeInterfaces: o["masquerade-interfaces"]
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
    randomFully: false,
    nodeIpsetNeeded: true,
    tunneling: false,
    hostMasqueradeIp: CILIUM_HOST_IP,
    localDeliveryInterface: HOST_DEVICE,
    endpointRoutes: false,
  };
  return { nativeRoutingCidr, input, rules: ciliumMasqueradeRules(input), phase: o.phase };
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

/**
 * Adds Cilium's masquerade state to `ns` as the agent does on a fresh node: the node ipset, its
 * nat chains (`-N`), CILIUM_POST_nat's rules (`-A`, in order), then the feeder rules
 * (`-I <hook>`, prepend-iptables-chains).
 */
export async function installCiliumRules(
  ns: Namespace,
  input: CiliumIptablesInput,
  nodeIps: readonly string[],
): Promise<void> {
  if (input.nodeIpsetNeeded) {
    for (const argv of nodeIpsetCommands(input.family, nodeIps)) await must(ns, argv);
  }
  for (const c of CILIUM_NAT_CHAINS) await must(ns, ["iptables", "-w", "-t", "nat", "-N", c.name]);
  for (const r of ciliumMasqueradeRules(input)) {
    await must(ns, ["iptables", "-w", "-t", "nat", "-A", r.chain, ...r.spec]);
  }
  for (const c of CILIUM_NAT_CHAINS) {
    const f = feederRule(c.name, c.hook);
    await must(ns, ["iptables", "-w", "-t", "nat", "-I", f.chain, ...f.spec]);
  }
}

interface Built {
  readonly router: Namespace;
  readonly node: Namespace;
  readonly pod: Namespace;
  readonly onprem: Namespace;
}

async function build(ctx: ScenarioContext, plan: CiliumReplicaPlan): Promise<Built> {
  const { lab } = ctx;
  const router = await lab.addNamespace("router");
  const onprem = await lab.addNamespace("onprem");
  const node = await lab.addNamespace("node");
  const pod = await lab.addNamespace("pod");
  await lab.link(router, "onprem0", onprem, "eth0");
  await lab.link(node, "eth0", router, "br0");
  await lab.link(pod, "eth0", node, LXC);
  await ipBatch(router, [
    `addr add ${ROUTER_NODE_IP}/24 dev br0`,
    `addr add ${ROUTER_ONPREM_IP}/16 dev onprem0`,
    "link set br0 up",
    "link set onprem0 up",
    // native routing: the network routes the node's pod CIDR to the node
    `route add ${POD_CIDR} via ${NODE_IP}`,
  ]);
  await must(router, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  // the on-prem host routes back only the nodes' range (its VPN selectors)
  await ipBatch(onprem, [
    `addr add ${ONPREM_IP}/16 dev eth0`,
    "link set eth0 up",
    `route add ${NODES_RANGE} via ${ROUTER_ONPREM_IP}`,
  ]);
  await ipBatch(node, [
    `addr add ${NODE_IP}/24 dev eth0`,
    "link set eth0 up",
    // Cilium's own pair: cilium_host (the router IP) and cilium_net
    `link add ${HOST_DEVICE} type veth peer name cilium_net`,
    `addr add ${CILIUM_HOST_IP}/32 dev ${HOST_DEVICE}`,
    `link set ${HOST_DEVICE} up`,
    "link set cilium_net up",
    `link set ${LXC} address 02:00:00:00:01:01`,
    `link set ${LXC} up`,
    `route add ${POD_IP}/32 dev ${LXC} scope link`,
    `route add default via ${ROUTER_NODE_IP}`,
  ]);
  await must(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  // Cilium's pod side: a /32 and the router IP (cilium_host) as gateway, its MAC the host veth's
  await ipBatch(pod, [
    `addr add ${POD_IP}/32 dev eth0`,
    "link set eth0 up",
    `route add ${CILIUM_HOST_IP} dev eth0 scope link`,
    `route add default via ${CILIUM_HOST_IP} dev eth0`,
    `neigh add ${CILIUM_HOST_IP} lladdr 02:00:00:00:01:01 dev eth0 nud permanent`,
  ]);
  await installCiliumRules(node, plan.input, [NODE_IP]);
  return { router, node, pod, onprem };
}

/** The far side in podpath's RemoteSite schema. */
export function remoteSite(): string {
  return stringify({
    kind: "RemoteSite",
    name: SITE_NAME,
    prefixes: [ONPREM_PREFIX],
    routesBack: [NODES_RANGE],
    vpn: {
      kind: "ipsec",
      localTrafficSelectors: [NODES_RANGE],
      remoteTrafficSelectors: [ONPREM_PREFIX],
    },
    allowlists: [
      {
        name: "db-firewall",
        sources: [NODES_RANGE],
        destinations: [`${ONPREM_IP}/32`],
        ports: [`tcp/${DB_PORT}`],
      },
    ],
  });
}

const meta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  creationTimestamp: CREATED_AT,
  resourceVersion: "1000",
  ...extra,
});

/** The cluster's objects: the Node, the app pod, cilium-config, the cilium DaemonSet and pod. */
export function clusterObjects(plan: CiliumReplicaPlan): {
  nodes: string;
  cilium: string;
  pods: string;
} {
  const labels = { "k8s-app": "cilium", "app.kubernetes.io/name": "cilium-agent" };
  const podSpec = {
    hostNetwork: true,
    priorityClassName: "system-node-critical",
    serviceAccountName: "cilium",
    containers: [
      {
        name: "cilium-agent",
        image: IMAGE,
        command: ["cilium-agent"],
        args: ["--config-dir=/tmp/cilium/config-map"],
      },
    ],
  };
  const config = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: meta("cilium-config", { namespace: "kube-system" }),
    data: {
      "auto-direct-node-routes": "true",
      "cluster-name": "default",
      "enable-bpf-masquerade": "false",
      "enable-ipv4": "true",
      "enable-ipv4-masquerade": "true",
      "enable-ipv6": "false",
      "enable-ipv6-masquerade": "false",
      ipam: "kubernetes",
      "ipv4-native-routing-cidr": plan.nativeRoutingCidr,
      "kube-proxy-replacement": "false",
      ...(plan.input.masqueradeInterfaces.length > 0
        ? { "masquerade-interfaces": plan.input.masqueradeInterfaces.join(",") }
        : {}),
      "routing-mode": "native",
    },
  };
  const ds = {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: meta("cilium", { namespace: "kube-system", labels }),
    spec: {
      selector: { matchLabels: { "k8s-app": "cilium" } },
      template: { metadata: { labels }, spec: podSpec },
    },
    status: { desiredNumberScheduled: 1, numberReady: 1 },
  };
  const agentPod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta("cilium-x7k2p", {
      namespace: "kube-system",
      labels,
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "DaemonSet", name: "cilium", controller: true },
      ],
    }),
    spec: { ...podSpec, nodeName: NODE_NAME },
    status: { phase: "Running", hostIP: NODE_IP, podIP: NODE_IP },
  };
  const node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: meta(NODE_NAME, {
      labels: { "kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux" },
    }),
    spec: { podCIDR: POD_CIDR, podCIDRs: [POD_CIDR] },
    status: {
      addresses: [
        { address: NODE_IP, type: "InternalIP" },
        { address: NODE_NAME, type: "Hostname" },
      ],
      conditions: [{ status: "True", type: "Ready", reason: "KubeletReady" }],
      nodeInfo: { kubeletVersion: "v1.31.4" },
    },
  };
  const app = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta(POD_NAME, { namespace: "default", labels: { app: "billing" } }),
    spec: {
      nodeName: NODE_NAME,
      containers: [{ name: "app", image: "registry.example/billing:1.4" }],
    },
    status: { phase: "Running", hostIP: NODE_IP, podIP: POD_IP, podIPs: [{ ip: POD_IP }] },
  };
  return {
    nodes: kubectlList([node]),
    cilium: kubectlList([config, ds, agentPod]),
    pods: kubectlList([app]),
  };
}

const PING = ["ping", "-c", "3", "-i", "0.2", "-W", "1"] as const;
const nc = (ip: string) => ["nc", "-v", "-N", "-w", "2", ip, String(DB_PORT)];

async function probeAndSnapshot(
  out: string,
  plan: CiliumReplicaPlan,
  b: Built,
): Promise<ScenarioOutcome> {
  const files: string[] = [];
  const captures: Capture[] = [
    await startCapture(b.node, out, "node", {
      iface: "any",
      filter: `host ${ONPREM_IP}`,
      point: `node/${NODE_NAME}`,
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
        `probes/node-${NODE_NAME}.txt`,
        `# client: node/${NODE_NAME}\n${nodeProbe.transcript}`,
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
        `probes/pod-${POD_NAME}.txt`,
        `# client: pod/default/${POD_NAME}\n${podProbe.transcript}`,
      ),
    );
    const ok = (code: number | undefined) => (code === 0 ? "answers" : "silent");
    summary.push(
      `node ping ${ONPREM_IP} ${ok(nodeProbe.results[0]?.code)}, pod ping ${ok(podProbe.results[0]?.code)}, pod tcp/${DB_PORT} ${ok(podProbe.results[1]?.code)}`,
    );
  } finally {
    await new Promise((r) => setTimeout(r, 200));
    for (const c of captures) await c.stop();
  }
  for (const c of captures) files.push(c.rel, c.rel.replace(/\.pcap$/, ".yaml"));
  files.push(
    ...(await collectKernelState(b.node, out, `nodes/${NODE_NAME}`, [
      "iptables-save",
      "ip-route",
      "ip-addr",
      "sysctl",
      "conntrack",
    ])),
    writeSnapshotFile(out, `nodes/${NODE_NAME}/ipset.txt`, await must(b.node, ["ipset", "save"])),
    ...(await collectKernelState(b.pod, out, `pods/default/${POD_NAME}`, [
      "ip-route",
      "ip-addr",
      "sysctl",
    ])),
  );
  const objs = clusterObjects(plan);
  files.push(
    writeSnapshotFile(out, "cluster/nodes.yaml", objs.nodes),
    writeSnapshotFile(out, "cluster/cilium.yaml", objs.cilium),
    writeSnapshotFile(out, "cluster/pods.yaml", objs.pods),
    writeSnapshotFile(out, `remote/${SITE_NAME}.yaml`, remoteSite()),
  );
  return { files, summary };
}

async function run(ctx: ScenarioContext, opts: CiliumOptions): Promise<ScenarioOutcome> {
  const plan = planCiliumReplica(opts);
  ctx.log(`building cilium (iptables masquerade) replica ${ctx.lab.id}`);
  const b = await build(ctx, plan);
  const listener = await startListener(b.onprem, false);
  try {
    if (ctx.outDir === undefined) {
      return {
        files: [],
        summary: [
          `on-prem ${ONPREM_IP} listens on tcp/${DB_PORT}`,
          `node ${NODE_NAME}: ip netns exec ${b.node.name} …   pod ${POD_IP}: ip netns exec ${b.pod.name} …`,
        ],
      };
    }
    return await probeAndSnapshot(ctx.outDir, plan, b);
  } finally {
    if (ctx.outDir !== undefined) await stopProcess(listener);
  }
}

export const scenario: Scenario<CiliumOptions> = {
  name: "cilium",
  description:
    "Cilium iptables masquerade: CILIUM_POST_nat's ! -d ipv4-native-routing-cidr (10.0.0.0/8) keeps the pod address toward on-prem",
  options: CiliumOptions,
  run,
};
