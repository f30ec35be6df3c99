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
import type { Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { DB_PORT, ONPREM_PREFIX, SITE_NAME } from "./masquerade.ts";
import { kubectlList } from "./masquerade-cluster.ts";
import {
  appPod,
  boolText,
  cidrList,
  daemonSetAndPod,
  isTrue,
  must,
  nodeObject,
  onpremSite,
  runSnatReplica,
} from "./snat-replica.ts";

export const VPC_CIDRS = ["192.168.0.0/16", "100.64.0.0/16"] as const;
export const AWS_NODE_NAME = "ip-192-168-1-10.eu-west-1.compute.internal";
const NODE_IP = "192.168.1.10";
const POD_IP = "100.64.1.50";
const POD_NAME = "billing-7d4b9c6f5-x2kqp";
export const VPC_HOST_IP = "192.168.2.20";
export const VPC_SITE_NAME = "vpc-services";
const HOST_VETH = "eni3f1c2a9b7d0";
const ROUTER_NODE_IP = "192.168.1.1";
const ROUTER_VPC_IP = "192.168.2.1";
const CNI_IMAGE = "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.23.1";

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
  const externalSnat = isTrue(o["external-snat"]);
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
    routesBack: cidrList(o["routes-back"]),
    phase: o.phase,
  };
}

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

/** The far sides in podpath's RemoteSite schema. */
export function remoteSites(plan: AwsReplicaPlan): { name: string; text: string }[] {
  return [
    { name: SITE_NAME, text: onpremSite(plan.routesBack, { vpn: true, allowlist: true }) },
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

/** The EKS objects: the Node (no podCIDR), the app pod, the aws-node DaemonSet and its pod. */
export function awsClusterObjects(plan: AwsReplicaPlan): {
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
  const node = nodeObject({
    name: AWS_NODE_NAME,
    ip: NODE_IP,
    labels: {
      "eks.amazonaws.com/nodegroup": "default",
      "topology.kubernetes.io/zone": "eu-west-1a",
    },
    spec: { providerID: "aws:///eu-west-1a/i-0abc123def4567890" },
    nodeInfo: {
      kubeletVersion: "v1.31.4-eks-aeac579",
      kernelVersion: "6.1.119-129.201.amzn2023.x86_64",
    },
  });
  const [ds, cniPod] = daemonSetAndPod({
    name: "aws-node",
    namespace: "kube-system",
    labels,
    selector: { "k8s-app": "aws-node" },
    podName: "aws-node-7xk2p",
    podSpec,
    nodeName: AWS_NODE_NAME,
    nodeIp: NODE_IP,
  });
  const app = appPod({
    name: POD_NAME,
    namespace: "default",
    nodeName: AWS_NODE_NAME,
    nodeIp: NODE_IP,
    podIp: POD_IP,
  });
  return {
    nodes: kubectlList([node]),
    awsNode: kubectlList([ds, cniPod]),
    pods: kubectlList([app]),
  };
}

async function run(ctx: ScenarioContext, opts: AwsVpcCniOptions): Promise<ScenarioOutcome> {
  const plan = planAwsReplica(opts);
  return runSnatReplica(ctx, {
    title: "aws-vpc-cni",
    phase: plan.phase,
    node: { name: AWS_NODE_NAME, ip: NODE_IP, routerIp: ROUTER_NODE_IP, hostVeth: HOST_VETH },
    // the VPC CNI's pod side: a /32, the link-local gateway with a static ARP entry for the host
    // veth (the host answers ARP for it only through that entry)
    pod: {
      name: POD_NAME,
      namespace: "default",
      ip: POD_IP,
      attach: {
        kind: "routed",
        gateway: "169.254.1.1",
        hostMac: "02:00:00:00:00:01",
        staticNeigh: true,
      },
    },
    // the VPC routes the pod's secondary-CIDR address to the node's ENI
    routerLines: [`route add ${POD_IP}/32 via ${NODE_IP}`],
    routesBack: plan.routesBack,
    extraHosts: [
      {
        ns: "vpchost",
        routerIface: "vpc0",
        routerIp: ROUTER_VPC_IP,
        ip: VPC_HOST_IP,
        site: VPC_SITE_NAME,
        label: "VPC host",
      },
    ],
    kubeProxy: true,
    install: (node) => installAwsNodeRules(node, plan.input),
    onpremLabel: "on-prem",
    files: async () => {
      const objs = awsClusterObjects(plan);
      return [
        ["cluster/nodes.yaml", objs.nodes],
        ["cluster/aws-node.yaml", objs.awsNode],
        ["cluster/pods.yaml", objs.pods],
        ...remoteSites(plan).map((s) => [`remote/${s.name}.yaml`, s.text] as const),
      ];
    },
  });
}

export const scenario: Scenario<AwsVpcCniOptions> = {
  name: "aws-vpc-cni",
  description:
    "EKS SNAT: the AWS VPC CNI's AWS-SNAT-CHAIN-0 with an EXCLUDE_SNAT_CIDRS entry, an on-prem site without a route back",
  options: AwsVpcCniOptions,
  run,
};
