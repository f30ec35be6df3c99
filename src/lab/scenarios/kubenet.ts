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
 * `--ipv6` builds the node dual stack with the kubelet's flag an IPv6 CIDR (default fd00::/8, the
 * ULA block as 10.0.0.0/8 is the private one): kubenet then writes its one rule with ip6tables
 * and none in iptables (`ensureMasqRule` picks the family of the one flag), so the IPv6 on-prem
 * host fd00:20::30:40 is "inside the cluster"; `--fixed` sets the flag to the IPv6 pod range.
 *
 * Topology (IPv4):
 *   pod (10.244.1.5/24, eth0 → 10.244.1.1) ─ node (cbr0 10.244.1.1/24 · eth0 172.16.1.10/24)
 *     ─ router (br0 172.16.1.1/24 · onprem0 10.20.0.1/16) ─ on-prem host (10.20.30.40/16)
 */
import { z } from "zod";
import { FLAG_NON_MASQUERADE_CIDR } from "../../agents/kubenet/flags.ts";
import { type KubenetRule, kubenetMasqRule } from "../../agents/kubenet/rules.ts";
import { tryParseCidr } from "../../net/cidr.ts";
import type { Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { SITE_NAME } from "./masquerade.ts";
import { kubectlList } from "./masquerade-cluster.ts";
import {
  appPod,
  boolText,
  cidrList,
  isTrue,
  meta,
  must,
  nodeObject,
  onpremSite,
  runSnatReplica,
} from "./snat-replica.ts";

export const KUBENET_NODE_NAME = "kubenet-pool-1-node-0";
const NODE_IP = "172.16.1.10";
const NODE_RANGE = "172.16.0.0/16";
export const CLUSTER_CIDR = "10.244.0.0/16";
export const NODE_POD_CIDR = "10.244.1.0/24";
const BRIDGE_IP = "10.244.1.1";
const POD_IP = "10.244.1.5";
const POD_NAME = "billing-6f9c7d5b8-q4m2x";
const HOST_VETH = "veth3a9f01c2";
const ROUTER_NODE_IP = "172.16.1.1";
const KUBELET_VERSION = "v1.23.17";
/** The IPv6 side (`--ipv6`): the node's and router's /64, the cluster's and node's pod ranges. */
const NODE_IP6 = "fd00:172:16:1::10";
const ROUTER_NODE_IP6 = "fd00:172:16:1::1";
const NODE_RANGE6 = "fd00:172:16::/48";
export const CLUSTER_CIDR6 = "fd00:10:244::/56";
const NODE_POD_CIDR6 = "fd00:10:244:1::/64";
const BRIDGE_IP6 = "fd00:10:244:1::1";
const POD_IP6 = "fd00:10:244:1::5";
/** The flag's value with `--ipv6` when none is given: the ULA block. */
const DEFAULT_FLAG6 = "fd00::/8";

const cidrText = (flag: string) =>
  z.string().refine((s) => "cidr" in tryParseCidr(s, { allowBareAddress: false }), {
    message: `--${flag} takes a CIDR`,
  });

export const KubenetOptions = z
  .object({
    /** The kubelet's --non-masquerade-cidr as written on its command line. */
    "non-masquerade-cidr": cidrText("non-masquerade-cidr").optional(),
    /** The flag's value before the last kubelet restart: its rule stays, first. */
    previous: cidrText("previous").optional(),
    /** The plan applied: the flag set to the cluster's pod range, only its rule. */
    fixed: boolText.optional(),
    "routes-back": z.string().default(NODE_RANGE),
    /** Dual stack, the kubelet's flag an IPv6 CIDR (kubenet's rule in ip6tables). */
    ipv6: boolText.optional(),
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
  readonly ipv6: boolean;
}

function ruleFor(text: string): KubenetRule | undefined {
  const r = tryParseCidr(text, { allowBareAddress: false });
  return "cidr" in r ? kubenetMasqRule(text, r.cidr) : undefined;
}

export function planKubenetReplica(o: KubenetOptions): KubenetReplicaPlan {
  const fixed = isTrue(o.fixed);
  const ipv6 = isTrue(o.ipv6);
  const given = o["non-masquerade-cidr"] ?? (ipv6 ? DEFAULT_FLAG6 : "10.0.0.0/8");
  const flag = fixed ? (ipv6 ? CLUSTER_CIDR6 : CLUSTER_CIDR) : given;
  const texts = [...(o.previous && !fixed ? [o.previous] : []), flag];
  const rules = [...new Set(texts)].flatMap((t) => {
    const r = ruleFor(t);
    return r ? [r] : [];
  });
  return {
    flag,
    rules,
    routesBack: cidrList(o["routes-back"]),
    phase: fixed || o.previous !== undefined ? "after" : "before",
    ipv6,
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
    ...(plan.ipv6 ? ["--feature-gates=IPv6DualStack=true"] : []),
    `--${FLAG_NON_MASQUERADE_CIDR}=${plan.flag}`,
    "--hairpin-mode=promiscuous-bridge",
    "--v=2",
  ].join(" ")}\n`;
}

/** kubenet's EnsureRule(Append, nat, POSTROUTING, …): `-C`, then `-A` when missing. */
export async function installKubenetRule(ns: Namespace, rule: KubenetRule): Promise<void> {
  const ipt = rule.family === 4 ? "iptables" : "ip6tables";
  const check = await ns.exec([ipt, "-w", "-t", "nat", "-C", rule.chain, ...rule.spec]);
  if (check.code === 0) return;
  await must(ns, [ipt, "-w", "-t", "nat", "-A", rule.chain, ...rule.spec]);
}

/** The far side in podpath's RemoteSite schema. */
function remoteSite(plan: KubenetReplicaPlan): string {
  return onpremSite([...plan.routesBack, ...(plan.ipv6 ? [NODE_RANGE6] : [])], {
    allowlist: true,
    ipv6: plan.ipv6,
  });
}

/** The cluster's objects: the Node (its podCIDR), kube-proxy's ConfigMap, the app pod. */
export function kubenetClusterObjects(ipv6 = false): {
  nodes: string;
  kubeProxy: string;
  pods: string;
} {
  const node = nodeObject({
    name: KUBENET_NODE_NAME,
    ip: NODE_IP,
    ...(ipv6 ? { ip6: NODE_IP6 } : {}),
    spec: {
      podCIDR: NODE_POD_CIDR,
      podCIDRs: [NODE_POD_CIDR, ...(ipv6 ? [NODE_POD_CIDR6] : [])],
    },
    nodeInfo: { kubeletVersion: KUBELET_VERSION, containerRuntimeVersion: "docker://20.10.24" },
  });
  const kubeProxy = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: meta("kube-proxy", { namespace: "kube-system" }),
    data: {
      "config.conf": `apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: ${ipv6 ? `${CLUSTER_CIDR},${CLUSTER_CIDR6}` : CLUSTER_CIDR}\nmode: iptables\n`,
    },
  };
  const app = appPod({
    name: POD_NAME,
    namespace: "default",
    nodeName: KUBENET_NODE_NAME,
    nodeIp: NODE_IP,
    podIp: POD_IP,
    ...(ipv6 ? { podIp6: POD_IP6 } : {}),
  });
  return {
    nodes: kubectlList([node]),
    kubeProxy: kubectlList([kubeProxy]),
    pods: kubectlList([app]),
  };
}

async function run(ctx: ScenarioContext, opts: KubenetOptions): Promise<ScenarioOutcome> {
  const plan = planKubenetReplica(opts);
  return runSnatReplica(ctx, {
    title: "kubenet",
    phase: plan.phase,
    node: { name: KUBENET_NODE_NAME, ip: NODE_IP, routerIp: ROUTER_NODE_IP, hostVeth: HOST_VETH },
    // kubenet's node: the cbr0 bridge holds the pod CIDR's first address, pods hang on it by veth
    pod: {
      name: POD_NAME,
      namespace: "default",
      ip: POD_IP,
      attach: { kind: "bridge", bridge: "cbr0", gateway: BRIDGE_IP },
    },
    // the cloud's route for the node's pod CIDR (kubenet relies on the cloud's routes)
    routerLines: [`route add ${NODE_POD_CIDR} via ${NODE_IP}`],
    routesBack: plan.routesBack,
    ...(plan.ipv6
      ? {
          ipv6: {
            nodeIp: NODE_IP6,
            routerIp: ROUTER_NODE_IP6,
            podIp: POD_IP6,
            gateway: BRIDGE_IP6,
            routerLines: [`route add ${NODE_POD_CIDR6} via ${NODE_IP6}`],
            routesBack: [NODE_RANGE6],
          },
        }
      : {}),
    kubeProxy: true,
    install: async (node) => {
      for (const r of plan.rules) await installKubenetRule(node, r);
    },
    files: async () => {
      const objs = kubenetClusterObjects(plan.ipv6);
      return [
        [`nodes/${KUBENET_NODE_NAME}/kubelet-flags.txt`, kubeletArgs(plan)],
        ["cluster/nodes.yaml", objs.nodes],
        ["cluster/kube-proxy.yaml", objs.kubeProxy],
        ["cluster/pods.yaml", objs.pods],
        [`remote/${SITE_NAME}.yaml`, remoteSite(plan)],
      ];
    },
  });
}

export const scenario: Scenario<KubenetOptions> = {
  name: "kubenet",
  description:
    "kubenet SNAT: the kubelet's --non-masquerade-cidr (default 10.0.0.0/8) holds an on-prem site without a route back",
  options: KubenetOptions,
  run,
};
