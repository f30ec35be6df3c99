/**
 * @module lab/scenarios/bridge-cni — the SNAT case on a node whose pods use the bridge CNI plugin
 * (containerd's default `10-containerd-net.conflist`): `"ipMasq"` in the config decides whether
 * the plugin writes the pod's `CNI-…` chain (agents/bridge-cni/rules.ts, added as SetupIPMasq
 * does: list the chains, `-N` when missing, AppendUnique = `-C` then `-A`), behind kube-proxy's
 * scaffolding, and an on-prem site that routes back only the node range. With `--ip-masq false`
 * (the default here, as in a config that leaves it out) the pod keeps its address and the replies
 * have no way back; `--fixed` is the plan applied: `"ipMasq": true` and the pod set up again (a new
 * sandbox ID, its chain written).
 *
 * Topology (IPv4):
 *   pod (10.88.0.5/24, eth0 → 10.88.0.1) ─ node (cni0 10.88.0.1/24 · eth0 192.168.50.10/24)
 *     ─ router (br0 192.168.50.1/24 · onprem0 10.20.0.1/16) ─ on-prem host (10.20.30.40/16)
 */
import { z } from "zod";
import { type BridgeRule, podMasqRules } from "../../agents/bridge-cni/rules.ts";
import { parseCidr, parseIp } from "../../net/cidr.ts";
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

export const NODE_NAME = "bridge-node-0";
export const NODE_IP = "192.168.50.10";
export const NODE_RANGE = "192.168.0.0/16";
export const NETWORK = "containerd-net";
export const CONF_FILE = "10-containerd-net.conflist";
export const POD_SUBNET = "10.88.0.0/24";
export const BRIDGE_IP = "10.88.0.1";
export const POD_IP = "10.88.0.5";
export const POD_NAME = "billing-5c8d7f9b4-h7r2t";
/** The pod sandbox's ID (containerd's), before and after the pod is set up again. */
export const SANDBOX_BEFORE = "4f1d2a9c7b3e8d60a5c2f9e1b7d4c3a2e6f8b0c1d2e3f4a5b6c7d8e9f0a1b2c3";
export const SANDBOX_AFTER = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d";
const HOST_VETH = "veth5e2b9a41";
const ROUTER_NODE_IP = "192.168.50.1";
const ROUTER_ONPREM_IP = "10.20.0.1";
const CREATED_AT = "2026-01-01T00:00:00Z";

const boolText = z.union([z.literal(true), z.enum(["true", "false"])]);

export const BridgeCniOptions = z
  .object({
    /** `"ipMasq"` as the config file writes it; "omit" leaves the key out (false). */
    "ip-masq": z.enum(["true", "false", "omit"]).default("false"),
    /** The plan applied: ipMasq true and the pod set up again. */
    fixed: boolText.optional(),
    "routes-back": z.string().default(NODE_RANGE),
  })
  .strict();
export type BridgeCniOptions = z.output<typeof BridgeCniOptions>;

export interface BridgeReplicaPlan {
  readonly ipMasq: "true" | "false" | "omit";
  readonly sandbox: string;
  /** The pod's chain and rules when the plugin writes them (ipMasq true). */
  readonly chain?: string;
  readonly rules: readonly BridgeRule[];
  readonly routesBack: readonly string[];
  readonly phase: "before" | "after";
}

export function planBridgeReplica(o: BridgeCniOptions): BridgeReplicaPlan {
  const fixed = o.fixed === true || o.fixed === "true";
  const ipMasq = fixed ? "true" : o["ip-masq"];
  const sandbox = fixed ? SANDBOX_AFTER : SANDBOX_BEFORE;
  const r =
    ipMasq === "true"
      ? podMasqRules({
          network: NETWORK,
          containerId: sandbox,
          ip: parseIp(POD_IP),
          subnet: parseCidr(POD_SUBNET),
        })
      : undefined;
  return {
    ipMasq,
    sandbox,
    ...(r ? { chain: r.chain } : {}),
    rules: r?.rules ?? [],
    routesBack: o["routes-back"]
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
    phase: fixed ? "after" : "before",
  };
}

/** The node's CNI config file, as containerd ships it (with `ipMasq` as the options say). */
export function conflist(plan: BridgeReplicaPlan): string {
  const bridge: Record<string, unknown> = {
    type: "bridge",
    bridge: "cni0",
    isGateway: true,
    ...(plan.ipMasq === "omit" ? {} : { ipMasq: plan.ipMasq === "true" }),
    promiscMode: true,
    ipam: {
      type: "host-local",
      ranges: [[{ subnet: POD_SUBNET }]],
      routes: [{ dst: "0.0.0.0/0" }],
    },
  };
  return `${JSON.stringify(
    {
      cniVersion: "1.0.0",
      name: NETWORK,
      plugins: [bridge, { type: "portmap", capabilities: { portMappings: true } }],
    },
    null,
    2,
  )}\n`;
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

/** SetupIPMasq: `-N` the chain when `-S` does not list it, then AppendUnique each rule. */
export async function installBridgeRules(
  ns: Namespace,
  chain: string,
  rules: readonly BridgeRule[],
): Promise<void> {
  const listed = await must(ns, ["iptables", "-w", "-t", "nat", "-S"]);
  if (!listed.split("\n").includes(`-N ${chain}`)) {
    await must(ns, ["iptables", "-w", "-t", "nat", "-N", chain]);
  }
  for (const r of rules) {
    const ipt = r.family === 4 ? "iptables" : "ip6tables";
    const check = await ns.exec([ipt, "-w", "-t", "nat", "-C", r.chain, ...r.spec]);
    if (check.code !== 0) await must(ns, [ipt, "-w", "-t", "nat", "-A", r.chain, ...r.spec]);
  }
}

interface Built {
  readonly node: Namespace;
  readonly pod: Namespace;
  readonly onprem: Namespace;
}

async function build(ctx: ScenarioContext, plan: BridgeReplicaPlan): Promise<Built> {
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
  ]);
  await must(router, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await ipBatch(onprem, [
    `addr add ${ONPREM_IP}/16 dev eth0`,
    "link set eth0 up",
    ...plan.routesBack.map((c) => `route add ${c} via ${ROUTER_ONPREM_IP}`),
  ]);
  // the bridge plugin's node side: cni0 with the gateway address (isGateway), the pod's veth on it
  await ipBatch(node, [
    `addr add ${NODE_IP}/24 dev eth0`,
    "link set eth0 up",
    "link add cni0 type bridge",
    `addr add ${BRIDGE_IP}/24 dev cni0`,
    "link set cni0 up",
    `link set ${HOST_VETH} master cni0`,
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
  if (plan.chain) await installBridgeRules(node, plan.chain, plan.rules);
  return { node, pod, onprem };
}

export function remoteSite(plan: BridgeReplicaPlan): string {
  return `${JSON.stringify({
    kind: "RemoteSite",
    name: SITE_NAME,
    prefixes: [ONPREM_PREFIX],
    routesBack: plan.routesBack,
    allowlists: [
      {
        name: "db-firewall",
        sources: plan.routesBack,
        destinations: [`${ONPREM_IP}/32`],
        ports: [`tcp/${DB_PORT}`],
      },
    ],
  })}\n`;
}

const meta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  creationTimestamp: CREATED_AT,
  resourceVersion: "1000",
  ...extra,
});

/** The Node (its podCIDR, the conflist's subnet) and the app pod. */
export function clusterObjects(): { nodes: string; pods: string } {
  const node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: meta(NODE_NAME, {
      labels: { "kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux" },
    }),
    spec: { podCIDR: POD_SUBNET, podCIDRs: [POD_SUBNET] },
    status: {
      addresses: [
        { address: NODE_IP, type: "InternalIP" },
        { address: NODE_NAME, type: "Hostname" },
      ],
      conditions: [{ status: "True", type: "Ready", reason: "KubeletReady" }],
      nodeInfo: { kubeletVersion: "v1.31.4", containerRuntimeVersion: "containerd://1.7.24" },
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
  return { nodes: kubectlList([node]), pods: kubectlList([app]) };
}

const PING = ["ping", "-c", "3", "-i", "0.2", "-W", "1"] as const;
const NC = ["nc", "-v", "-N", "-w", "2", ONPREM_IP, String(DB_PORT)];

async function probeAndSnapshot(
  out: string,
  plan: BridgeReplicaPlan,
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
    writeSnapshotFile(out, `nodes/${NODE_NAME}/cni/${CONF_FILE}`, conflist(plan)),
    writeSnapshotFile(out, "cluster/nodes.yaml", objs.nodes),
    writeSnapshotFile(out, "cluster/pods.yaml", objs.pods),
    writeSnapshotFile(out, `remote/${SITE_NAME}.yaml`, remoteSite(plan)),
  );
  return { files, summary };
}

async function run(ctx: ScenarioContext, opts: BridgeCniOptions): Promise<ScenarioOutcome> {
  const plan = planBridgeReplica(opts);
  ctx.log(`building bridge-cni replica ${ctx.lab.id}`);
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

export const scenario: Scenario<BridgeCniOptions> = {
  name: "bridge-cni",
  description:
    'bridge CNI SNAT: "ipMasq": false in the node\'s conflist, an on-prem site without a route back',
  options: BridgeCniOptions,
  run,
};
