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
const IMAGE = "ghcr.io/flannel-io/flannel:v0.28.9";
/** The IPv6 side (`--ipv6`: net-conf.json EnableIPv6 and IPv6Network, the node's IPv6 lease). */
const FLANNEL_NODE_IP6 = "fd00:192:168:50::10";
const ROUTER_NODE_IP6 = "fd00:192:168:50::1";
const FLANNEL_NODE_RANGE6 = "fd00:192:168:50::/64";
export const FLANNEL_NETWORK6 = "fd00:10:244::/56";
export const FLANNEL_POD_SUBNET6 = "fd00:10:244:1::/64";
export const FLANNEL_POD_IP6 = "fd00:10:244:1::7";
const GATEWAY6 = "fd00:10:244:1::1";

export const FlannelOptions = z
  .object({
    phase: z.enum(["before", "after"]).default("before"),
    /** Shorthand for `--phase after`. */
    fixed: boolText.optional(),
    "routes-back": z.string().default(FLANNEL_NODE_SUBNET),
    /** Dual stack: EnableIPv6 with IPv6Network; with --ip-masq, flanneld's IPv6 rules too. */
    ipv6: boolText.optional(),
  })
  .strict();
export type FlannelOptions = z.output<typeof FlannelOptions>;

export interface FlannelReplicaPlan {
  readonly phase: "before" | "after";
  readonly ipMasq: boolean;
  readonly routesBack: readonly string[];
  readonly ipv6: boolean;
}

export function planFlannelReplica(o: FlannelOptions): FlannelReplicaPlan {
  const phase = isTrue(o.fixed) ? "after" : o.phase;
  return {
    phase,
    ipMasq: phase === "after",
    routesBack: cidrList(o["routes-back"]),
    ipv6: isTrue(o.ipv6),
  };
}

/** The far side in podpath's RemoteSite schema (no allowlist). */
export function flannelRemoteSite(plan: FlannelReplicaPlan): string {
  return onpremSite([...plan.routesBack, ...(plan.ipv6 ? [FLANNEL_NODE_RANGE6] : [])], {
    ipv6: plan.ipv6,
  });
}

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
    {
      Network: FLANNEL_NETWORK,
      ...(plan.ipv6 ? { EnableIPv6: true, IPv6Network: FLANNEL_NETWORK6 } : {}),
      EnableNFTables: false,
      Backend: { Type: "vxlan" },
    },
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
  const [ds, flannelPod] = daemonSetAndPod({
    name: "kube-flannel-ds",
    namespace: "kube-flannel",
    labels,
    selector: { app: "flannel" },
    podName: "kube-flannel-ds-7xq2m",
    podSpec,
    nodeName: FLANNEL_NODE,
    nodeIp: FLANNEL_NODE_IP,
  });
  const node = nodeObject({
    name: FLANNEL_NODE,
    ip: FLANNEL_NODE_IP,
    ...(plan.ipv6 ? { ip6: FLANNEL_NODE_IP6 } : {}),
    annotations: {
      "flannel.alpha.coreos.com/backend-type": "vxlan",
      "flannel.alpha.coreos.com/public-ip": FLANNEL_NODE_IP,
      ...(plan.ipv6 ? { "flannel.alpha.coreos.com/public-ipv6": FLANNEL_NODE_IP6 } : {}),
    },
    spec: {
      podCIDR: FLANNEL_POD_SUBNET,
      podCIDRs: [FLANNEL_POD_SUBNET, ...(plan.ipv6 ? [FLANNEL_POD_SUBNET6] : [])],
    },
    nodeInfo: { kubeletVersion: "v1.33.2", kernelVersion: "6.8.0-60-generic" },
  });
  const app = appPod({
    name: FLANNEL_POD_NAME,
    namespace: "default",
    nodeName: FLANNEL_NODE,
    nodeIp: FLANNEL_NODE_IP,
    podIp: FLANNEL_POD_IP,
    ...(plan.ipv6 ? { podIp6: FLANNEL_POD_IP6 } : {}),
  });
  return {
    nodes: kubectlList([node]),
    flannel: kubectlList([cm, ds, flannelPod]),
    pods: kubectlList([app]),
  };
}

async function run(ctx: ScenarioContext, opts: FlannelOptions): Promise<ScenarioOutcome> {
  const plan = planFlannelReplica(opts);
  return runSnatReplica(ctx, {
    title: "flannel",
    note: plan.phase,
    phase: plan.phase,
    node: {
      name: FLANNEL_NODE,
      ip: FLANNEL_NODE_IP,
      routerIp: ROUTER_NODE_IP,
      hostVeth: HOST_VETH,
    },
    // the bridge plugin's side: cni0 with the lease's first address, the pod's veth on it
    pod: {
      name: FLANNEL_POD_NAME,
      namespace: "default",
      ip: FLANNEL_POD_IP,
      attach: { kind: "bridge", bridge: "cni0", gateway: GATEWAY },
    },
    routerLines: [`route add ${FLANNEL_POD_SUBNET} via ${FLANNEL_NODE_IP}`],
    routesBack: plan.routesBack,
    ...(plan.ipv6
      ? {
          ipv6: {
            nodeIp: FLANNEL_NODE_IP6,
            routerIp: ROUTER_NODE_IP6,
            podIp: FLANNEL_POD_IP6,
            gateway: GATEWAY6,
            routerLines: [`route add ${FLANNEL_POD_SUBNET6} via ${FLANNEL_NODE_IP6}`],
            routesBack: [FLANNEL_NODE_RANGE6],
          },
        }
      : {}),
    kubeProxy: true,
    install: async (node) => {
      if (!plan.ipMasq) return;
      await must(
        node,
        ["iptables-restore", "--noflush", "-w"],
        flannelRestoreText({ family: 4, network: FLANNEL_NETWORK, podSubnet: FLANNEL_POD_SUBNET }),
      );
      // with EnableIPv6, flanneld sets up its IPv6 masquerade rules the same way (masqIP6Rules)
      if (plan.ipv6) {
        await must(
          node,
          ["ip6tables-restore", "--noflush", "-w"],
          flannelRestoreText({
            family: 6,
            network: FLANNEL_NETWORK6,
            podSubnet: FLANNEL_POD_SUBNET6,
          }),
        );
      }
    },
    onpremLabel: "on-prem",
    files: async () => {
      const objs = flannelClusterObjects(plan);
      return [
        ["cluster/nodes.yaml", objs.nodes],
        ["cluster/kube-flannel.yaml", objs.flannel],
        ["cluster/pods.yaml", objs.pods],
        [`remote/${SITE_NAME}.yaml`, flannelRemoteSite(plan)],
      ];
    },
  });
}

export const scenario: Scenario<FlannelOptions> = {
  name: "flannel",
  description:
    "Flannel SNAT: flanneld without --ip-masq (CNI delegate ipMasq false), an on-prem site that routes back only the node subnet",
  options: FlannelOptions,
  run,
};
