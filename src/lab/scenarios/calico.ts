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
 * `--ipv6` builds the node dual stack (FELIX_IPV6SUPPORT true): two IPv6 pools beside the IPv4
 * ones (the billing pool's natOutgoing as its IPv4 twin's), Felix's IPv6 sets (`cali60…`, family
 * inet6) and the same nat chains through ip6tables-restore, the pod's /128 routed by the node.
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
import type { Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { SITE_NAME } from "./masquerade.ts";
import { kubectlList } from "./masquerade-cluster.ts";
import {
  appPod,
  boolText,
  cidrList,
  daemonSetAndPod,
  isTrue,
  meta,
  must,
  nodeObject,
  onpremSite,
  runSnatReplica,
} from "./snat-replica.ts";

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
/** The IPv6 side (`--ipv6`). */
const CALICO_NODE_IP6 = "fd00:192:168:1::10";
const ROUTER_NODE_IP6 = "fd00:192:168:1::1";
const CALICO_NODE_RANGE6 = "fd00:192:168:1::/64";
export const CALICO_POD_IP6 = "fd00:10:245:12::4";
export const DEFAULT_POOL6 = { name: "default-ipv6-ippool", cidr: "fd00:10:244::/48" } as const;
export const BILLING_POOL6 = { name: "billing-ipv6-ippool", cidr: "fd00:10:245::/48" } as const;
/** The pod's IPv6 gateway: an address the node routes; the pod reaches it by the veth's MAC. */
const POD_GATEWAY6 = "fd00:10:245:12::1";
export const CALICO_VERSION = "v3.32.1";

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
    /** Dual stack: IPv6 pools, Felix's cali60 sets and its rules in ip6tables. */
    ipv6: boolText.optional(),
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
  /** With `--ipv6`: Felix's IPv6 nat rules (ip6tables-restore input). */
  readonly natRestore6?: string;
}

/** The IPPools as stored (crd.projectcalico.org/v1), the billing pool's natOutgoing per phase. */
export function ippoolObjects(billingNatOutgoing: boolean, ipv6 = false): unknown[] {
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
    ...(ipv6
      ? [
          pool(BILLING_POOL6.name, BILLING_POOL6.cidr, billingNatOutgoing),
          pool(DEFAULT_POOL6.name, DEFAULT_POOL6.cidr, true),
        ]
      : []),
  ];
}

export function planCalicoReplica(o: CalicoOptions): CalicoReplicaPlan {
  const phase = isTrue(o.fixed) ? "after" : o.phase;
  const ipv6 = isTrue(o.ipv6);
  const ippoolsYaml = kubectlList(ippoolObjects(phase === "after", ipv6));
  const pools = readIpPools(readKubeObjects(ippoolsYaml, "cluster/ippools.yaml").value).pools;
  const allPoolsSetId = o["all-pools-set"];
  const active = pools.some((p) => p.natOutgoing && p.cidr?.family === 4);
  const active6 = pools.some((p) => p.natOutgoing && p.cidr?.family === 6);
  return {
    phase,
    allPoolsSetId,
    ipsetForm: o["ipset-form"],
    routesBack: cidrList(o["routes-back"]),
    ippoolsYaml,
    pools,
    natRestore: calicoNatRestoreText({ family: 4, allPoolsSetId }, active),
    ipsetRestore: `${ipsetRestoreText(pools, 4, allPoolsSetId)}${ipv6 ? ipsetRestoreText(pools, 6, allPoolsSetId) : ""}`,
    ...(ipv6 ? { natRestore6: calicoNatRestoreText({ family: 6, allPoolsSetId }, active6) } : {}),
  };
}

/** Felix's dataplane: its IP sets first (rules naming a missing set are refused), then its rules. */
export async function installCalicoNat(ns: Namespace, plan: CalicoReplicaPlan): Promise<void> {
  await must(ns, ["ipset", "restore"], plan.ipsetRestore);
  await must(ns, ["iptables-restore", "--noflush", "-w"], plan.natRestore);
  if (plan.natRestore6) await must(ns, ["ip6tables-restore", "--noflush", "-w"], plan.natRestore6);
}

/** The far side in podpath's RemoteSite schema. */
export function calicoRemoteSite(plan: CalicoReplicaPlan): string {
  const ipv6 = plan.natRestore6 !== undefined;
  return onpremSite([...plan.routesBack, ...(ipv6 ? [CALICO_NODE_RANGE6] : [])], {
    allowlist: true,
    ipv6,
  });
}

/** The Node, the app pod, and the calico-node DaemonSet with its pod. */
export function calicoClusterObjects(ipv6 = false): {
  nodes: string;
  calicoNode: string;
  pods: string;
} {
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
          { name: "FELIX_IPV6SUPPORT", value: ipv6 ? "true" : "false" },
          ...(ipv6 ? [{ name: "CALICO_IPV6POOL_CIDR", value: DEFAULT_POOL6.cidr }] : []),
        ],
      },
    ],
  };
  const node = nodeObject({
    name: CALICO_NODE,
    ip: CALICO_NODE_IP,
    ...(ipv6 ? { ip6: CALICO_NODE_IP6 } : {}),
    annotations: {
      "projectcalico.org/IPv4Address": `${CALICO_NODE_IP}/24`,
      ...(ipv6 ? { "projectcalico.org/IPv6Address": `${CALICO_NODE_IP6}/64` } : {}),
    },
    // Calico's IPAM ignores the Node's podCIDR: none is set
    spec: {},
    nodeInfo: { kubeletVersion: "v1.33.2", kernelVersion: "6.8.0-60-generic" },
  });
  const [ds, cniPod] = daemonSetAndPod({
    name: "calico-node",
    namespace: "kube-system",
    labels,
    selector: labels,
    podName: "calico-node-5m2xq",
    podSpec,
    nodeName: CALICO_NODE,
    nodeIp: CALICO_NODE_IP,
  });
  const app = appPod({
    name: CALICO_POD_NAME,
    namespace: CALICO_POD_NAMESPACE,
    nodeName: CALICO_NODE,
    nodeIp: CALICO_NODE_IP,
    podIp: CALICO_POD_IP,
    ...(ipv6 ? { podIp6: CALICO_POD_IP6 } : {}),
    annotations: {
      "cni.projectcalico.org/ipv4pools": `["${BILLING_POOL.name}"]`,
      ...(ipv6 ? { "cni.projectcalico.org/ipv6pools": `["${BILLING_POOL6.name}"]` } : {}),
      "cni.projectcalico.org/podIP": `${CALICO_POD_IP}/32`,
      ...(ipv6
        ? { "cni.projectcalico.org/podIPs": `${CALICO_POD_IP}/32,${CALICO_POD_IP6}/128` }
        : {}),
      "cni.projectcalico.org/containerID": "4f1c0d2e9a7b",
    },
  });
  return {
    nodes: kubectlList([node]),
    calicoNode: kubectlList([ds, cniPod]),
    pods: kubectlList([app]),
  };
}

async function run(ctx: ScenarioContext, opts: CalicoOptions): Promise<ScenarioOutcome> {
  const plan = planCalicoReplica(opts);
  return runSnatReplica(ctx, {
    title: "calico",
    note: plan.phase,
    phase: plan.phase,
    node: {
      name: CALICO_NODE,
      ip: CALICO_NODE_IP,
      routerIp: ROUTER_NODE_IP,
      hostVeth: HOST_VETH,
      // the node's IPAM block, as BIRD installs it
      lines: [`route add blackhole ${POD_BLOCK} proto 80`],
      // proxy ARP on the host side answers for 169.254.1.1
      sysctls: [
        `net.ipv4.conf.${HOST_VETH}.proxy_arp=1`,
        `net.ipv4.neigh.${HOST_VETH}.proxy_delay=0`,
      ],
    },
    // Calico's workload: a /32, default via 169.254.1.1; the host side has Calico's fixed MAC
    pod: {
      name: CALICO_POD_NAME,
      namespace: CALICO_POD_NAMESPACE,
      ip: CALICO_POD_IP,
      attach: {
        kind: "routed",
        gateway: "169.254.1.1",
        hostMac: "ee:ee:ee:ee:ee:ee",
        staticNeigh: false,
      },
    },
    // the fabric routes the node's IPAM blocks to it (BGP in a real cluster)
    routerLines: [`route add ${POD_BLOCK} via ${CALICO_NODE_IP}`],
    routesBack: plan.routesBack,
    ...(plan.natRestore6
      ? {
          ipv6: {
            nodeIp: CALICO_NODE_IP6,
            routerIp: ROUTER_NODE_IP6,
            podIp: CALICO_POD_IP6,
            gateway: POD_GATEWAY6,
            routerLines: [`route add ${CALICO_POD_IP6}/128 via ${CALICO_NODE_IP6}`],
            routesBack: [CALICO_NODE_RANGE6],
          },
        }
      : {}),
    kubeProxy: true,
    install: (node) => installCalicoNat(node, plan),
    onpremLabel: "on-prem",
    files: async (r) => {
      const ipsets = await must(
        r.node,
        plan.ipsetForm === "save" ? ["ipset", "save"] : ["ipset", "list"],
      );
      const objs = calicoClusterObjects(plan.natRestore6 !== undefined);
      return [
        [`nodes/${CALICO_NODE}/ipset.txt`, ipsets],
        ["cluster/nodes.yaml", objs.nodes],
        ["cluster/calico-node.yaml", objs.calicoNode],
        ["cluster/ippools.yaml", plan.ippoolsYaml],
        ["cluster/pods.yaml", objs.pods],
        [`remote/${SITE_NAME}.yaml`, calicoRemoteSite(plan)],
      ];
    },
  });
}

export const scenario: Scenario<CalicoOptions> = {
  name: "calico",
  description:
    "Calico SNAT: cali-nat-outgoing and its IP sets, the billing IPPool without natOutgoing, an on-prem site that routes back only the node subnet",
  options: CalicoOptions,
  run,
};
