/**
 * @module lab/scenarios/kubenet — the SNAT case on a kubenet node (Kubernetes ≤ 1.23 with
 * `--network-plugin=kubenet`): kubenet's one masquerade rule for the kubelet's
 * `--non-masquerade-cidr` (agents/kubenet/rules.ts, added as kubenet's EnsureRule does: `-C`,
 * then `-A POSTROUTING`) behind kube-proxy's scaffolding, the pod on the `cbr0` bridge, and an
 * on-prem site that routes back only the node range. With the kubelet's default 10.0.0.0/8 the
 * on-prem host 10.20.30.40 is "inside the cluster" for kubenet, so the pod keeps its address and
 * the replies have no way back. `--non-masquerade-cidr` sets the flag; `--previous CIDR` adds the
 * rule of the kubelet's previous value first (kubenet never deletes it: what a kubelet restart
 * without a reboot leaves); `--fixed` is the plan applied (the flag set to the cluster's pod range,
 * only its rule). Probes ping and open TCP from node and pod, with tcpdump on the node and on-prem.
 *
 * Topology (IPv4):
 *   pod (10.244.1.5/24, eth0 → 10.244.1.1) ─ node (cbr0 10.244.1.1/24 · eth0 172.16.1.10/24)
 *     ─ router (br0 172.16.1.1/24 · onprem0 10.20.0.1/16) ─ on-prem host (10.20.30.40/16)
 */
import { stringify } from "yaml";
import { z } from "zod";
import { FLAG_NON_MASQUERADE_CIDR } from "../../agents/kubenet/flags.ts";
import { type KubenetRule, kubenetMasqRule } from "../../agents/kubenet/rules.ts";
import { tryParseCidr } from "../../net/cidr.ts";
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

export const NODE_NAME = "kubenet-pool-1-node-0";
export const NODE_IP = "172.16.1.10";
export const NODE_RANGE = "172.16.0.0/16";
export const CLUSTER_CIDR = "10.244.0.0/16";
export const NODE_POD_CIDR = "10.244.1.0/24";
export const BRIDGE_IP = "10.244.1.1";
export const POD_IP = "10.244.1.5";
export const POD_NAME = "billing-6f9c7d5b8-q4m2x";
const HOST_VETH = "veth3a9f01c2";
const ROUTER_NODE_IP = "172.16.1.1";
const ROUTER_ONPREM_IP = "10.20.0.1";
const CREATED_AT = "2026-01-01T00:00:00Z";
const KUBELET_VERSION = "v1.23.17";

const cidrText = (flag: string) =>
  z.string().refine((s) => "cidr" in tryParseCidr(s, { allowBareAddress: false }), {
    message: `--${flag} takes a CIDR`,
  });

export const KubenetOptions = z
  .object({
    /** The kubelet's --non-masquerade-cidr as written on its command line. */
    "non-masquerade-cidr": cidrText("non-masquerade-cidr").default("10.0.0.0/8"),
    /** The flag's value before the last kubelet restart: its rule stays, first. */
    previous: cidrText("previous").optional(),
    /** The plan applied: the flag set to the cluster's pod range, only its rule. */
    fixed: z.union([z.literal(true), z.enum(["true", "false"])]).optional(),
    "routes-back": z.string().default(NODE_RANGE),
  })
  .strict();
export type KubenetOptions = z.output<typeof KubenetOptions>;

/** What the replica's node runs, from the options (pure). */
export interface KubenetReplicaPlan {
  readonly flag: string;
  /** kubenet's rules in the order they are added (the previous value's first). */
  readonly rules: readonly KubenetRule[];
  readonly routesBack: readonly string[];
  readonly phase: "before" | "after";
}

function ruleFor(text: string): KubenetRule | undefined {
  const r = tryParseCidr(text, { allowBareAddress: false });
  return "cidr" in r ? kubenetMasqRule(text, r.cidr) : undefined;
}

export function planKubenetReplica(o: KubenetOptions): KubenetReplicaPlan {
  const fixed = o.fixed === true || o.fixed === "true";
  const flag = fixed ? CLUSTER_CIDR : o["non-masquerade-cidr"];
  const texts = [...(o.previous && !fixed ? [o.previous] : []), flag];
  const rules = [...new Set(texts)].flatMap((t) => {
    const r = ruleFor(t);
    return r ? [r] : [];
  });
  return {
    flag,
    rules,
    routesBack: o["routes-back"]
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
    phase: fixed || o.previous !== undefined ? "after" : "before",
  };
}

/** The kubelet's command line as `ps -o args= -C kubelet` prints it on the node. */
export function kubeletArgs(plan: KubenetReplicaPlan): string {
  return `${[
    "/usr/bin/kubelet",
    "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
    "--kubeconfig=/etc/kubernetes/kubelet.conf",
    "--config=/var/lib/kubelet/config.yaml",
    "--container-runtime=docker",
    "--network-plugin=kubenet",
    `--pod-cidr=${NODE_POD_CIDR}`,
    `--${FLAG_NON_MASQUERADE_CIDR}=${plan.flag}`,
    "--hairpin-mode=promiscuous-bridge",
    "--v=2",
  ].join(" ")}\n`;
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

/** kubenet's EnsureRule(Append, nat, POSTROUTING, …): `-C`, then `-A` when missing. */
export async function installKubenetRule(ns: Namespace, rule: KubenetRule): Promise<void> {
  const ipt = rule.family === 4 ? "iptables" : "ip6tables";
  const check = await ns.exec([ipt, "-w", "-t", "nat", "-C", rule.chain, ...rule.spec]);
  if (check.code === 0) return;
  await must(ns, [ipt, "-w", "-t", "nat", "-A", rule.chain, ...rule.spec]);
}

interface Built {
  readonly router: Namespace;
  readonly node: Namespace;
  readonly pod: Namespace;
  readonly onprem: Namespace;
}

async function build(ctx: ScenarioContext, plan: KubenetReplicaPlan): Promise<Built> {
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
    // the cloud's route for the node's pod CIDR (kubenet relies on the cloud's routes)
    `route add ${NODE_POD_CIDR} via ${NODE_IP}`,
  ]);
  await must(router, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await ipBatch(onprem, [
    `addr add ${ONPREM_IP}/16 dev eth0`,
    "link set eth0 up",
    ...plan.routesBack.map((c) => `route add ${c} via ${ROUTER_ONPREM_IP}`),
  ]);
  // kubenet's node: the cbr0 bridge holds the pod CIDR's first address, pods hang on it by veth
  await ipBatch(node, [
    `addr add ${NODE_IP}/24 dev eth0`,
    "link set eth0 up",
    "link add cbr0 type bridge",
    `addr add ${BRIDGE_IP}/24 dev cbr0`,
    "link set cbr0 up",
    `link set ${HOST_VETH} master cbr0`,
    `link set ${HOST_VETH} up`,
    `route add default via ${ROUTER_NODE_IP}`,
  ]);
  await must(node, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await ipBatch(pod, [
    `addr add ${POD_IP}/24 dev eth0`,
    "link set eth0 up",
    `route add default via ${BRIDGE_IP}`,
  ]);
  await must(node, ["iptables-restore", "--noflush"], KUBE_PROXY_RESTORE);
  for (const r of plan.rules) await installKubenetRule(node, r);
  return { router, node, pod, onprem };
}

/** The far side in podpath's RemoteSite schema. */
export function remoteSite(plan: KubenetReplicaPlan): string {
  return stringify({
    kind: "RemoteSite",
    name: SITE_NAME,
    prefixes: [ONPREM_PREFIX],
    routesBack: [...plan.routesBack],
    allowlists: [
      {
        name: "db-firewall",
        sources: [...plan.routesBack],
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

/** The cluster's objects: the Node (its podCIDR), kube-proxy's ConfigMap, the app pod. */
export function clusterObjects(): { nodes: string; kubeProxy: string; pods: string } {
  const node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: meta(NODE_NAME, {
      labels: { "kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux" },
    }),
    spec: { podCIDR: NODE_POD_CIDR, podCIDRs: [NODE_POD_CIDR] },
    status: {
      addresses: [
        { address: NODE_IP, type: "InternalIP" },
        { address: NODE_NAME, type: "Hostname" },
      ],
      conditions: [{ status: "True", type: "Ready", reason: "KubeletReady" }],
      nodeInfo: { kubeletVersion: KUBELET_VERSION, containerRuntimeVersion: "docker://20.10.24" },
    },
  };
  const kubeProxy = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: meta("kube-proxy", { namespace: "kube-system" }),
    data: {
      "config.conf": `apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: ${CLUSTER_CIDR}\nmode: iptables\n`,
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
    kubeProxy: kubectlList([kubeProxy]),
    pods: kubectlList([app]),
  };
}

const PING = ["ping", "-c", "3", "-i", "0.2", "-W", "1"] as const;
const NC = ["nc", "-v", "-N", "-w", "2", ONPREM_IP, String(DB_PORT)];

async function probeAndSnapshot(
  out: string,
  plan: KubenetReplicaPlan,
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
        "probes/node.txt",
        `# client: node/${NODE_NAME}\n${nodeProbe.transcript}`,
      ),
    );
    const podProbe = await runProbes(b.pod, [
      { shown: `${PING.join(" ")} ${ONPREM_IP}`, argv: [...PING, ONPREM_IP] },
      { shown: `${NC.join(" ")} </dev/null`, argv: NC, input: "", stderrFirst: true },
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
    ...(await collectKernelState(b.pod, out, `pods/default/${POD_NAME}`, [
      "ip-route",
      "ip-addr",
      "sysctl",
    ])),
  );
  const objs = clusterObjects();
  files.push(
    writeSnapshotFile(out, `nodes/${NODE_NAME}/kubelet-flags.txt`, kubeletArgs(plan)),
    writeSnapshotFile(out, "cluster/nodes.yaml", objs.nodes),
    writeSnapshotFile(out, "cluster/kube-proxy.yaml", objs.kubeProxy),
    writeSnapshotFile(out, "cluster/pods.yaml", objs.pods),
    writeSnapshotFile(out, `remote/${SITE_NAME}.yaml`, remoteSite(plan)),
  );
  return { files, summary };
}

async function run(ctx: ScenarioContext, opts: KubenetOptions): Promise<ScenarioOutcome> {
  const plan = planKubenetReplica(opts);
  ctx.log(`building kubenet replica ${ctx.lab.id}`);
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

export const scenario: Scenario<KubenetOptions> = {
  name: "kubenet",
  description:
    "kubenet SNAT: the kubelet's --non-masquerade-cidr (default 10.0.0.0/8) holds an on-prem site without a route back",
  options: KubenetOptions,
  run,
};
