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
 * `--ipv6` builds the node dual stack (`enable-ipv6`, `enable-ipv6-masquerade: "true"`): the agent
 * runs the same installMasqueradeRules with ip6tables (its nat chains and feeders in both families,
 * `cilium_node_set_v6`, `! -d` ipv6-native-routing-cidr, `-s ::1`), and the pod gets a second,
 * IPv6 address. `--ipv6-native-routing-cidr` defaults to fd00::/8 (the ULA block, as 10.0.0.0/8 is
 * the private one), which holds the on-prem host's fd00:20::/64: the pod keeps its IPv6 address;
 * `--phase after` narrows it to the cluster's IPv6 pod range (fd00:10::/48).
 *
 * Topology (IPv4):
 *   pod (10.0.1.23/32, eth0 → 10.0.1.1) ─ node (lxc9a1c2e7f3b40 · cilium_host 10.0.1.1/32 ·
 *   eth0 192.168.1.10/24) ─ router (br0 192.168.1.1/24 · onprem0 10.20.0.1/16) ─ on-prem
 *   host (10.20.30.40/16)
 */
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
import type { Family } from "../../net/cidr.ts";
import type { Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { SITE_NAME } from "./masquerade.ts";
import { kubectlList } from "./masquerade-cluster.ts";
import {
  appPod,
  boolText,
  daemonSetAndPod,
  isTrue,
  meta,
  must,
  nodeObject,
  onpremSite,
  runSnatReplica,
} from "./snat-replica.ts";

export const CILIUM_NODE_NAME = "worker-1";
const NODE_IP = "192.168.1.10";
export const POD_CIDR = "10.0.1.0/24";
const POD_IP = "10.0.1.23";
const POD_NAME = "billing-5f7c9d8b6-q2w4e";
export const CILIUM_HOST_IP = "10.0.1.1";
export const CLUSTER_POD_CIDR = "10.0.0.0/16";
const LXC = "lxc9a1c2e7f3b40";
const ROUTER_NODE_IP = "192.168.1.1";
const NODES_RANGE = "192.168.0.0/16";
const IMAGE = "quay.io/cilium/cilium:v1.16.5";
/** The IPv6 side (`--ipv6`): the node's and router's /64, the node's and the cluster's pod ranges. */
const NODE_IP6 = "fd00:192:168:1::10";
const ROUTER_NODE_IP6 = "fd00:192:168:1::1";
const NODES_RANGE6 = "fd00:192:168::/48";
export const POD_CIDR6 = "fd00:10:0:1::/64";
const POD_IP6 = "fd00:10:0:1::23";
/** cilium_host's IPv6 router address (hostMasqueradeIP of the ip6tables rules). */
export const CILIUM_HOST_IP6 = "fd00:10:0:1::1";
export const CLUSTER_POD_CIDR6 = "fd00:10::/48";

export const CiliumOptions = z
  .object({
    /** cilium-config ipv4-native-routing-cidr (the iptables rule's `! -d`). */
    "native-routing-cidr": z.string().default("10.0.0.0/8"),
    /** cilium-config masquerade-interfaces (comma separated). */
    "masquerade-interfaces": z.string().default(""),
    phase: z.enum(["before", "after"]).default("before"),
    /** Dual stack: enable-ipv6-masquerade, Cilium's rules in ip6tables, the pod's IPv6 address. */
    ipv6: boolText.optional(),
    /** cilium-config ipv6-native-routing-cidr (the ip6tables rule's `! -d`). */
    "ipv6-native-routing-cidr": z.string().default("fd00::/8"),
  })
  .strict();
export type CiliumOptions = z.output<typeof CiliumOptions>;

/** What the replica's node runs, from the options (pure). */
export interface CiliumReplicaPlan {
  readonly nativeRoutingCidr: string;
  readonly input: CiliumIptablesInput;
  readonly rules: readonly CiliumRule[];
  readonly phase: "before" | "after";
  /** Dual stack: the IPv6 native-routing CIDR and the ip6tables rules. */
  readonly ipv6?: {
    readonly nativeRoutingCidr: string;
    readonly input: CiliumIptablesInput;
    readonly rules: readonly CiliumRule[];
  };
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
  const native6 = o.phase === "after" ? CLUSTER_POD_CIDR6 : o["ipv6-native-routing-cidr"];
  // installRules: the same installMasqueradeRules with ip6tables, the family's alloc and exclusion
  // CIDRs and cilium_host's IPv6 address
  const input6: CiliumIptablesInput = {
    ...input,
    family: 6,
    allocRange: POD_CIDR6,
    snatDstExclusionCidr: native6,
    hostMasqueradeIp: CILIUM_HOST_IP6,
  };
  return {
    nativeRoutingCidr,
    input,
    rules: ciliumMasqueradeRules(input),
    phase: o.phase,
    ...(isTrue(o.ipv6)
      ? {
          ipv6: {
            nativeRoutingCidr: native6,
            input: input6,
            rules: ciliumMasqueradeRules(input6),
          },
        }
      : {}),
  };
}

const ipt = (family: Family) => (family === 4 ? "iptables" : "ip6tables");

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
  const prog = ipt(input.family);
  for (const c of CILIUM_NAT_CHAINS) await must(ns, [prog, "-w", "-t", "nat", "-N", c.name]);
  for (const r of ciliumMasqueradeRules(input)) {
    await must(ns, [prog, "-w", "-t", "nat", "-A", r.chain, ...r.spec]);
  }
  for (const c of CILIUM_NAT_CHAINS) {
    const f = feederRule(c.name, c.hook);
    await must(ns, [prog, "-w", "-t", "nat", "-I", f.chain, ...f.spec]);
  }
}

/** The far side in podpath's RemoteSite schema: it routes back only the nodes' range. */
function remoteSite(ipv6: boolean): string {
  return onpremSite([NODES_RANGE, ...(ipv6 ? [NODES_RANGE6] : [])], {
    vpn: true,
    allowlist: true,
    ipv6,
  });
}

/** The cluster's objects: the Node, the app pod, cilium-config, the cilium DaemonSet and pod. */
export function ciliumClusterObjects(plan: CiliumReplicaPlan): {
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
      "enable-ipv6": plan.ipv6 ? "true" : "false",
      "enable-ipv6-masquerade": plan.ipv6 ? "true" : "false",
      ipam: "kubernetes",
      "ipv4-native-routing-cidr": plan.nativeRoutingCidr,
      ...(plan.ipv6 ? { "ipv6-native-routing-cidr": plan.ipv6.nativeRoutingCidr } : {}),
      "kube-proxy-replacement": "false",
      ...(plan.input.masqueradeInterfaces.length > 0
        ? { "masquerade-interfaces": plan.input.masqueradeInterfaces.join(",") }
        : {}),
      "routing-mode": "native",
    },
  };
  const [ds, agentPod] = daemonSetAndPod({
    name: "cilium",
    namespace: "kube-system",
    labels,
    selector: { "k8s-app": "cilium" },
    podName: "cilium-x7k2p",
    podSpec,
    nodeName: CILIUM_NODE_NAME,
    nodeIp: NODE_IP,
  });
  const node = nodeObject({
    name: CILIUM_NODE_NAME,
    ip: NODE_IP,
    ...(plan.ipv6 ? { ip6: NODE_IP6 } : {}),
    spec: { podCIDR: POD_CIDR, podCIDRs: [POD_CIDR, ...(plan.ipv6 ? [POD_CIDR6] : [])] },
    nodeInfo: { kubeletVersion: "v1.31.4" },
  });
  const app = appPod({
    name: POD_NAME,
    namespace: "default",
    nodeName: CILIUM_NODE_NAME,
    nodeIp: NODE_IP,
    podIp: POD_IP,
    ...(plan.ipv6 ? { podIp6: POD_IP6 } : {}),
  });
  return {
    nodes: kubectlList([node]),
    cilium: kubectlList([config, ds, agentPod]),
    pods: kubectlList([app]),
  };
}

async function run(ctx: ScenarioContext, opts: CiliumOptions): Promise<ScenarioOutcome> {
  const plan = planCiliumReplica(opts);
  return runSnatReplica(ctx, {
    title: "cilium (iptables masquerade)",
    phase: plan.phase,
    node: {
      name: CILIUM_NODE_NAME,
      ip: NODE_IP,
      routerIp: ROUTER_NODE_IP,
      hostVeth: LXC,
      // Cilium's own pair: cilium_host (the router IP) and cilium_net
      lines: [
        `link add ${HOST_DEVICE} type veth peer name cilium_net`,
        `addr add ${CILIUM_HOST_IP}/32 dev ${HOST_DEVICE}`,
        `link set ${HOST_DEVICE} up`,
        "link set cilium_net up",
      ],
    },
    // Cilium's pod side: a /32 and the router IP (cilium_host) as gateway, its MAC the host veth's
    pod: {
      name: POD_NAME,
      namespace: "default",
      ip: POD_IP,
      attach: {
        kind: "routed",
        gateway: CILIUM_HOST_IP,
        hostMac: "02:00:00:00:01:01",
        staticNeigh: true,
      },
    },
    // native routing: the network routes the node's pod CIDR to the node
    routerLines: [`route add ${POD_CIDR} via ${NODE_IP}`],
    // the on-prem host routes back only the nodes' range (its VPN selectors)
    routesBack: [NODES_RANGE],
    ...(plan.ipv6
      ? {
          ipv6: {
            nodeIp: NODE_IP6,
            routerIp: ROUTER_NODE_IP6,
            podIp: POD_IP6,
            gateway: CILIUM_HOST_IP6,
            routerLines: [`route add ${POD_CIDR6} via ${NODE_IP6}`],
            routesBack: [NODES_RANGE6],
          },
        }
      : {}),
    kubeProxy: false,
    install: async (node) => {
      await installCiliumRules(node, plan.input, [NODE_IP]);
      if (plan.ipv6) await installCiliumRules(node, plan.ipv6.input, [NODE_IP6]);
    },
    nodeProbeFile: `probes/node-${CILIUM_NODE_NAME}.txt`,
    files: async (r) => {
      const objs = ciliumClusterObjects(plan);
      return [
        [`nodes/${CILIUM_NODE_NAME}/ipset.txt`, await must(r.node, ["ipset", "save"])],
        ["cluster/nodes.yaml", objs.nodes],
        ["cluster/cilium.yaml", objs.cilium],
        ["cluster/pods.yaml", objs.pods],
        [`remote/${SITE_NAME}.yaml`, remoteSite(plan.ipv6 !== undefined)],
      ];
    },
  });
}

export const scenario: Scenario<CiliumOptions> = {
  name: "cilium",
  description:
    "Cilium iptables masquerade: CILIUM_POST_nat's ! -d ipv4-native-routing-cidr (10.0.0.0/8) keeps the pod address toward on-prem",
  options: CiliumOptions,
  run,
};
