/**
 * @module lab/scenarios/aws-vpc-cni — the SNAT case on an EKS node: the AWS VPC CNI's rules
 * (agents/aws-vpc-cni/rules.ts, added with the argv and in the order the plugin uses) behind
 * kube-proxy's scaffolding, a pod whose address is in a secondary VPC CIDR (custom networking,
 * 100.64.0.0/16), a host inside the VPC, and an on-prem site over the VPN that routes back only
 * the primary VPC CIDR. `--exclude-snat-cidrs` (the aws-node env) lists the on-prem prefix, so
 * the pod keeps its address toward on-prem and the replies have no way back; the VPC host
 * answers the pod (the plugin's design). Probes ping and open TCP from node and pod, with tcpdump
 * on the node (`-i any`), on-prem and at the VPC host.
 *
 * Topology (IPv4):
 *   pod (100.64.1.50/32, eth0 → 169.254.1.1) ─ node (eni3f1c2a9b7d0 · eth0 192.168.1.10/24)
 *     ─ router (br0 192.168.1.1/24 · vpc0 192.168.2.1/24 · onprem0 10.20.0.1/16)
 *     ─ VPC host (192.168.2.20/24) · on-prem host (10.20.30.40/16)
 */
import { stringify } from "yaml";
import { z } from "zod";
import type { AwsNodeSettings } from "../../agents/aws-vpc-cni/daemonset.ts";
import { cidrListEnv } from "../../agents/aws-vpc-cni/env.ts";
import {
  type AwsRule,
  awsNodeChains,
  awsNodeRules,
  type NodeSnatInput,
} from "../../agents/aws-vpc-cni/rules.ts";
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

export const VPC_CIDRS = ["192.168.0.0/16", "100.64.0.0/16"] as const;
export const NODE_NAME = "ip-192-168-1-10.eu-west-1.compute.internal";
export const NODE_IP = "192.168.1.10";
export const POD_IP = "100.64.1.50";
export const POD_NAME = "billing-7d4b9c6f5-x2kqp";
export const VPC_HOST_IP = "192.168.2.20";
export const VPC_SITE_NAME = "vpc-services";
const HOST_VETH = "eni3f1c2a9b7d0";
const ROUTER_NODE_IP = "192.168.1.1";
const ROUTER_VPC_IP = "192.168.2.1";
const ROUTER_ONPREM_IP = "10.20.0.1";
const CREATED_AT = "2026-01-01T00:00:00Z";
const CNI_IMAGE = "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.23.1";

const boolText = z.union([z.literal(true), z.enum(["true", "false"])]);

export const AwsVpcCniOptions = z
  .object({
    /** AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS as written on the DaemonSet. */
    "exclude-snat-cidrs": z.string().default(ONPREM_PREFIX),
    "external-snat": boolText.optional(),
    "routes-back": z.string().default("192.168.0.0/16"),
    phase: z.enum(["before", "after"]).default("before"),
  })
  .strict();
export type AwsVpcCniOptions = z.output<typeof AwsVpcCniOptions>;

/** What the replica's node runs, from the options (pure). */
export interface AwsReplicaPlan {
  readonly excludeText: string;
  readonly externalSnat: boolean;
  readonly settings: AwsNodeSettings;
  readonly input: NodeSnatInput;
  readonly rules: readonly AwsRule[];
  readonly routesBack: readonly string[];
  readonly phase: "before" | "after";
}

export function planAwsReplica(o: AwsVpcCniOptions): AwsReplicaPlan {
  const externalSnat = o["external-snat"] === true || o["external-snat"] === "true";
  const exclude = cidrListEnv("AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS", o["exclude-snat-cidrs"]);
  const settings: AwsNodeSettings = {
    externalSnat,
    excludeSnatCidrs: exclude.cidrs,
    snatType: "prng",
    nodePortSupport: true,
    connmark: 0x80,
    vethPrefix: "eni",
  };
  const input: NodeSnatInput = {
    vpcCidrs: [...VPC_CIDRS],
    settings,
    primaryIp: NODE_IP,
    primaryInterface: "eth0",
    connmarkBackend: "iptables",
  };
  return {
    excludeText: o["exclude-snat-cidrs"],
    externalSnat,
    settings,
    input,
    rules: awsNodeRules(input),
    routesBack: o["routes-back"]
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
    phase: o.phase,
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

/**
 * Adds the plugin's rules to `ns` as the plugin does on a node that has none: `-N` its chains,
 * then per rule `iptables -C` and, when missing, `-I chain 1` (its CIDR rules) or `-A`.
 */
export async function installAwsNodeRules(ns: Namespace, input: NodeSnatInput): Promise<void> {
  for (const chain of awsNodeChains(input)) {
    await ns.exec(["iptables", "-w", "-t", "nat", "-N", chain]);
  }
  for (const r of awsNodeRules(input)) {
    const check = await ns.exec(["iptables", "-w", "-t", r.table, "-C", r.chain, ...r.spec]);
    if (check.code === 0) continue;
    const add = r.op === "insert" ? ["-I", r.chain, "1"] : ["-A", r.chain];
    await must(ns, ["iptables", "-w", "-t", r.table, ...add, ...r.spec]);
  }
}

interface Built {
  readonly router: Namespace;
  readonly node: Namespace;
  readonly pod: Namespace;
  readonly onprem: Namespace;
  readonly vpcHost: Namespace;
}

async function build(ctx: ScenarioContext, plan: AwsReplicaPlan): Promise<Built> {
  const { lab } = ctx;
  const router = await lab.addNamespace("router");
  const onprem = await lab.addNamespace("onprem");
  const vpcHost = await lab.addNamespace("vpchost");
  const node = await lab.addNamespace("node");
  const pod = await lab.addNamespace("pod");
  await lab.link(router, "onprem0", onprem, "eth0");
  await lab.link(router, "vpc0", vpcHost, "eth0");
  await lab.link(node, "eth0", router, "br0");
  await lab.link(pod, "eth0", node, HOST_VETH);
  await ipBatch(router, [
    `addr add ${ROUTER_NODE_IP}/24 dev br0`,
    `addr add ${ROUTER_VPC_IP}/24 dev vpc0`,
    `addr add ${ROUTER_ONPREM_IP}/16 dev onprem0`,
    "link set br0 up",
    "link set vpc0 up",
    "link set onprem0 up",
    // the VPC routes the pod's secondary-CIDR address to the node's ENI
    `route add ${POD_IP}/32 via ${NODE_IP}`,
  ]);
  await must(router, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await ipBatch(onprem, [
    `addr add ${ONPREM_IP}/16 dev eth0`,
    "link set eth0 up",
    ...plan.routesBack.map((c) => `route add ${c} via ${ROUTER_ONPREM_IP}`),
  ]);
  await ipBatch(vpcHost, [
    `addr add ${VPC_HOST_IP}/24 dev eth0`,
    "link set eth0 up",
    `route add default via ${ROUTER_VPC_IP}`,
  ]);
  await ipBatch(node, [
    `addr add ${NODE_IP}/24 dev eth0`,
    "link set eth0 up",
    `link set ${HOST_VETH} address 02:00:00:00:00:01`,
    `link set ${HOST_VETH} up`,
    `route add ${POD_IP}/32 dev ${HOST_VETH} scope link`,
    `route add default via ${ROUTER_NODE_IP}`,
  ]);
  await must(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  // the VPC CNI's pod side: a /32, the link-local gateway with a static ARP entry for the host veth
  await ipBatch(pod, [
    `addr add ${POD_IP}/32 dev eth0`,
    "link set eth0 up",
    "route add 169.254.1.1 dev eth0 scope link",
    "route add default via 169.254.1.1 dev eth0",
    "neigh add 169.254.1.1 lladdr 02:00:00:00:00:01 dev eth0 nud permanent",
  ]);
  // the host answers ARP for the pod's gateway only through the static entry; replies to the pod
  // leave by the /32 route
  await must(node, ["iptables-restore", "--noflush"], KUBE_PROXY_RESTORE);
  await installAwsNodeRules(node, plan.input);
  return { router, node, pod, onprem, vpcHost };
}

/** The far sides in podpath's RemoteSite schema. */
export function remoteSites(plan: AwsReplicaPlan): { name: string; text: string }[] {
  return [
    {
      name: SITE_NAME,
      text: stringify({
        kind: "RemoteSite",
        name: SITE_NAME,
        prefixes: [ONPREM_PREFIX],
        routesBack: [...plan.routesBack],
        vpn: {
          kind: "ipsec",
          localTrafficSelectors: [...plan.routesBack],
          remoteTrafficSelectors: [ONPREM_PREFIX],
        },
        allowlists: [
          {
            name: "db-firewall",
            sources: [...plan.routesBack],
            destinations: [`${ONPREM_IP}/32`],
            ports: [`tcp/${DB_PORT}`],
          },
        ],
      }),
    },
    {
      name: VPC_SITE_NAME,
      text: stringify({
        kind: "RemoteSite",
        name: VPC_SITE_NAME,
        prefixes: ["192.168.2.0/24"],
        routesBack: [...VPC_CIDRS],
        allowlists: [
          {
            name: "vpc-service",
            sources: [...VPC_CIDRS],
            destinations: [`${VPC_HOST_IP}/32`],
            ports: [`tcp/${DB_PORT}`],
          },
        ],
      }),
    },
  ];
}

const meta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  creationTimestamp: CREATED_AT,
  resourceVersion: "1000",
  ...extra,
});

/** The EKS objects: the Node (no podCIDR), the app pod, the aws-node DaemonSet and its pod. */
export function clusterObjects(plan: AwsReplicaPlan): {
  nodes: string;
  awsNode: string;
  pods: string;
} {
  const env = [
    { name: "ADDITIONAL_ENI_TAGS", value: "{}" },
    { name: "AWS_VPC_CNI_NODE_PORT_SUPPORT", value: "true" },
    { name: "AWS_VPC_ENI_MTU", value: "9001" },
    { name: "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", value: "true" },
    ...(plan.excludeText !== ""
      ? [{ name: "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS", value: plan.excludeText }]
      : []),
    { name: "AWS_VPC_K8S_CNI_EXTERNALSNAT", value: String(plan.externalSnat) },
    { name: "AWS_VPC_K8S_CNI_RANDOMIZESNAT", value: "prng" },
    { name: "AWS_VPC_K8S_CNI_VETHPREFIX", value: "eni" },
    { name: "ENABLE_IPv4", value: "true" },
    { name: "ENABLE_IPv6", value: "false" },
    { name: "VPC_CNI_VERSION", value: "v1.23.1" },
    {
      name: "MY_NODE_NAME",
      valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "spec.nodeName" } },
    },
  ];
  const labels = { "app.kubernetes.io/name": "aws-node", "k8s-app": "aws-node" };
  const podSpec = {
    hostNetwork: true,
    priorityClassName: "system-node-critical",
    serviceAccountName: "aws-node",
    containers: [{ name: "aws-node", image: CNI_IMAGE, env }],
  };
  const node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: meta(NODE_NAME, {
      labels: {
        "eks.amazonaws.com/nodegroup": "default",
        "kubernetes.io/hostname": NODE_NAME,
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": "eu-west-1a",
      },
    }),
    spec: { providerID: "aws:///eu-west-1a/i-0abc123def4567890" },
    status: {
      addresses: [
        { address: NODE_IP, type: "InternalIP" },
        { address: NODE_NAME, type: "Hostname" },
      ],
      conditions: [{ status: "True", type: "Ready", reason: "KubeletReady" }],
      nodeInfo: {
        kubeletVersion: "v1.31.4-eks-aeac579",
        kernelVersion: "6.1.119-129.201.amzn2023.x86_64",
      },
    },
  };
  const ds = {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: meta("aws-node", { namespace: "kube-system", labels }),
    spec: {
      selector: { matchLabels: { "k8s-app": "aws-node" } },
      template: { metadata: { labels }, spec: podSpec },
    },
    status: { desiredNumberScheduled: 1, numberReady: 1 },
  };
  const cniPod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta("aws-node-7xk2p", {
      namespace: "kube-system",
      labels,
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "DaemonSet", name: "aws-node", controller: true },
      ],
    }),
    spec: { ...podSpec, nodeName: NODE_NAME },
    status: { phase: "Running", hostIP: NODE_IP, podIP: NODE_IP },
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
    awsNode: kubectlList([ds, cniPod]),
    pods: kubectlList([app]),
  };
}

const PING = ["ping", "-c", "3", "-i", "0.2", "-W", "1"] as const;
const nc = (ip: string) => ["nc", "-v", "-N", "-w", "2", ip, String(DB_PORT)];

async function probeAndSnapshot(
  out: string,
  plan: AwsReplicaPlan,
  b: Built,
): Promise<ScenarioOutcome> {
  const files: string[] = [];
  const filter = `host ${ONPREM_IP} or host ${VPC_HOST_IP}`;
  const captures: Capture[] = [
    await startCapture(b.node, out, "node", {
      iface: "any",
      filter,
      point: `node/${NODE_NAME}`,
      phase: plan.phase,
    }),
    await startCapture(b.onprem, out, `remote-${SITE_NAME}`, {
      iface: "eth0",
      filter: `host ${ONPREM_IP}`,
      point: `remote/${SITE_NAME}`,
      phase: plan.phase,
    }),
    await startCapture(b.vpcHost, out, `remote-${VPC_SITE_NAME}`, {
      iface: "eth0",
      filter: `host ${VPC_HOST_IP}`,
      point: `remote/${VPC_SITE_NAME}`,
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
      {
        shown: `${nc(VPC_HOST_IP).join(" ")} </dev/null`,
        argv: nc(VPC_HOST_IP),
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
      `node ping ${ONPREM_IP} ${ok(nodeProbe.results[0]?.code)}, pod ping ${ok(podProbe.results[0]?.code)}, ` +
        `pod tcp/${DB_PORT} on-prem ${ok(podProbe.results[1]?.code)}, pod tcp/${DB_PORT} VPC host ${ok(podProbe.results[2]?.code)}`,
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
    ...(await collectKernelState(b.pod, out, `pods/default/${POD_NAME}`, [
      "ip-route",
      "ip-addr",
      "sysctl",
    ])),
  );
  const objs = clusterObjects(plan);
  files.push(
    writeSnapshotFile(out, "cluster/nodes.yaml", objs.nodes),
    writeSnapshotFile(out, "cluster/aws-node.yaml", objs.awsNode),
    writeSnapshotFile(out, "cluster/pods.yaml", objs.pods),
    ...remoteSites(plan).map((s) => writeSnapshotFile(out, `remote/${s.name}.yaml`, s.text)),
  );
  return { files, summary };
}

async function run(ctx: ScenarioContext, opts: AwsVpcCniOptions): Promise<ScenarioOutcome> {
  const plan = planAwsReplica(opts);
  ctx.log(`building aws-vpc-cni replica ${ctx.lab.id}`);
  const b = await build(ctx, plan);
  const listeners = [await startListener(b.onprem, false), await startListener(b.vpcHost, false)];
  try {
    if (ctx.outDir === undefined) {
      return {
        files: [],
        summary: [
          `on-prem ${ONPREM_IP} and VPC host ${VPC_HOST_IP} listen on tcp/${DB_PORT}`,
          `node ${NODE_NAME}: ip netns exec ${b.node.name} …   pod ${POD_IP}: ip netns exec ${b.pod.name} …`,
        ],
      };
    }
    return await probeAndSnapshot(ctx.outDir, plan, b);
  } finally {
    if (ctx.outDir !== undefined) for (const l of listeners) await stopProcess(l);
  }
}

export const scenario: Scenario<AwsVpcCniOptions> = {
  name: "aws-vpc-cni",
  description:
    "EKS SNAT: the AWS VPC CNI's AWS-SNAT-CHAIN-0 with an EXCLUDE_SNAT_CIDRS entry, an on-prem site without a route back",
  options: AwsVpcCniOptions,
  run,
};
