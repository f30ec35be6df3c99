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
    fixed: boolText.optional(),
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
  const fixed = isTrue(o.fixed);
  const flag = fixed ? CLUSTER_CIDR : o["non-masquerade-cidr"];
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

/** kubenet's EnsureRule(Append, nat, POSTROUTING, …): `-C`, then `-A` when missing. */
export async function installKubenetRule(ns: Namespace, rule: KubenetRule): Promise<void> {
  const ipt = rule.family === 4 ? "iptables" : "ip6tables";
  const check = await ns.exec([ipt, "-w", "-t", "nat", "-C", rule.chain, ...rule.spec]);
  if (check.code === 0) return;
  await must(ns, [ipt, "-w", "-t", "nat", "-A", rule.chain, ...rule.spec]);
}

/** The far side in podpath's RemoteSite schema. */
function remoteSite(plan: KubenetReplicaPlan): string {
  return onpremSite(plan.routesBack, { allowlist: true });
}

/** The cluster's objects: the Node (its podCIDR), kube-proxy's ConfigMap, the app pod. */
export function kubenetClusterObjects(): { nodes: string; kubeProxy: string; pods: string } {
  const node = nodeObject({
    name: KUBENET_NODE_NAME,
    ip: NODE_IP,
    spec: { podCIDR: NODE_POD_CIDR, podCIDRs: [NODE_POD_CIDR] },
    nodeInfo: { kubeletVersion: KUBELET_VERSION, containerRuntimeVersion: "docker://20.10.24" },
  });
  const kubeProxy = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: meta("kube-proxy", { namespace: "kube-system" }),
    data: {
      "config.conf": `apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: ${CLUSTER_CIDR}\nmode: iptables\n`,
    },
  };
  const app = appPod({
    name: POD_NAME,
    namespace: "default",
    nodeName: KUBENET_NODE_NAME,
    nodeIp: NODE_IP,
    podIp: POD_IP,
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
    kubeProxy: true,
    install: async (node) => {
      for (const r of plan.rules) await installKubenetRule(node, r);
    },
    files: async () => {
      const objs = kubenetClusterObjects();
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
