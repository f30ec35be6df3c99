/**
 * @module lab/scenarios/bridge-cni — the SNAT case on a node whose pods use the bridge CNI plugin
 * (containerd's default `10-containerd-net.conflist`): `"ipMasq"` in the config decides whether
 * the plugin writes the pod's `CNI-…` chain (agents/bridge-cni/rules.ts, added as SetupIPMasq
 * does: list the chains, `-N` when missing, AppendUnique = `-C` then `-A`), behind kube-proxy's
 * scaffolding, and an on-prem site that routes back only the node range. With `--ip-masq false`
 * (the default here, as in a config that leaves it out) the pod keeps its address and the replies
 * have no way back; `--fixed` is the plan applied: `"ipMasq": true` and the pod set up again (a new
 * sandbox ID, its chain written).
 * `--ipv6` builds the node dual stack: host-local's second range fd00:88::/64 gives the pod a second
 * address, and with ipMasq the plugin writes the same chain (one name per network and container)
 * for it in ip6tables (`! -d ff00::/8`), as SetupIPMasq does for each of the pod's addresses.
 *
 * Topology (IPv4):
 *   pod (10.88.0.5/24, eth0 → 10.88.0.1) ─ node (cni0 10.88.0.1/24 · eth0 192.168.50.10/24)
 *     ─ router (br0 192.168.50.1/24 · onprem0 10.20.0.1/16) ─ on-prem host (10.20.30.40/16)
 */
import { z } from "zod";
import { type BridgeRule, podMasqRules } from "../../agents/bridge-cni/rules.ts";
import { parseCidr, parseIp } from "../../net/cidr.ts";
import type { Namespace } from "../netns.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./index.ts";
import { SITE_NAME } from "./masquerade.ts";
import { kubectlList } from "./masquerade-cluster.ts";
import {
  appPod,
  boolText,
  cidrList,
  isTrue,
  must,
  nodeObject,
  onpremSite,
  runSnatReplica,
} from "./snat-replica.ts";

export const BRIDGE_NODE_NAME = "bridge-node-0";
const NODE_IP = "192.168.50.10";
const NODE_RANGE = "192.168.0.0/16";
export const NETWORK = "containerd-net";
export const CONF_FILE = "10-containerd-net.conflist";
export const POD_SUBNET = "10.88.0.0/24";
const BRIDGE_IP = "10.88.0.1";
const POD_IP = "10.88.0.5";
const POD_NAME = "billing-5c8d7f9b4-h7r2t";
/** The pod sandbox's ID (containerd's), before and after the pod is set up again. */
export const SANDBOX_BEFORE = "4f1d2a9c7b3e8d60a5c2f9e1b7d4c3a2e6f8b0c1d2e3f4a5b6c7d8e9f0a1b2c3";
export const SANDBOX_AFTER = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d";
const HOST_VETH = "veth5e2b9a41";
const ROUTER_NODE_IP = "192.168.50.1";
/** The IPv6 side (`--ipv6`): the node's and router's /64, the conflist's second range. */
const NODE_IP6 = "fd00:192:168:50::10";
const ROUTER_NODE_IP6 = "fd00:192:168:50::1";
const NODE_RANGE6 = "fd00:192:168::/48";
export const POD_SUBNET6 = "fd00:88::/64";
const BRIDGE_IP6 = "fd00:88::1";
const POD_IP6 = "fd00:88::5";

export const BridgeCniOptions = z
  .object({
    /** `"ipMasq"` as the config file writes it; "omit" leaves the key out (false). */
    "ip-masq": z.enum(["true", "false", "omit"]).default("false"),
    /** The plan applied: ipMasq true and the pod set up again. */
    fixed: boolText.optional(),
    "routes-back": z.string().default(NODE_RANGE),
    /** Dual stack: the conflist's second range, the pod's IPv6 address and its ip6tables chain. */
    ipv6: boolText.optional(),
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
  readonly ipv6: boolean;
}

export function planBridgeReplica(o: BridgeCniOptions): BridgeReplicaPlan {
  const fixed = isTrue(o.fixed);
  const ipMasq = fixed ? "true" : o["ip-masq"];
  const sandbox = fixed ? SANDBOX_AFTER : SANDBOX_BEFORE;
  const ipv6 = isTrue(o.ipv6);
  const masq = (ip: string, subnet: string) =>
    podMasqRules({
      network: NETWORK,
      containerId: sandbox,
      ip: parseIp(ip),
      subnet: parseCidr(subnet),
    });
  const r = ipMasq === "true" ? masq(POD_IP, POD_SUBNET) : undefined;
  // the bridge plugin sets up masquerade for each of the pod's addresses in turn
  const r6 = ipMasq === "true" && ipv6 ? masq(POD_IP6, POD_SUBNET6) : undefined;
  return {
    ipMasq,
    sandbox,
    ...(r ? { chain: r.chain } : {}),
    rules: [...(r?.rules ?? []), ...(r6?.rules ?? [])],
    routesBack: cidrList(o["routes-back"]),
    phase: fixed ? "after" : "before",
    ipv6,
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
      ranges: [[{ subnet: POD_SUBNET }], ...(plan.ipv6 ? [[{ subnet: POD_SUBNET6 }]] : [])],
      routes: [{ dst: "0.0.0.0/0" }, ...(plan.ipv6 ? [{ dst: "::/0" }] : [])],
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

/** SetupIPMasq: `-N` the chain when `-S` does not list it, then AppendUnique each rule. */
export async function installBridgeRules(
  ns: Namespace,
  chain: string,
  rules: readonly BridgeRule[],
): Promise<void> {
  for (const family of new Set(rules.map((r) => r.family))) {
    const ipt = family === 4 ? "iptables" : "ip6tables";
    const listed = await must(ns, [ipt, "-w", "-t", "nat", "-S"]);
    if (!listed.split("\n").includes(`-N ${chain}`)) {
      await must(ns, [ipt, "-w", "-t", "nat", "-N", chain]);
    }
  }
  for (const r of rules) {
    const ipt = r.family === 4 ? "iptables" : "ip6tables";
    const check = await ns.exec([ipt, "-w", "-t", "nat", "-C", r.chain, ...r.spec]);
    if (check.code !== 0) await must(ns, [ipt, "-w", "-t", "nat", "-A", r.chain, ...r.spec]);
  }
}

/** The far side in podpath's RemoteSite schema (as one line of JSON). */
function remoteSite(plan: BridgeReplicaPlan): string {
  return onpremSite([...plan.routesBack, ...(plan.ipv6 ? [NODE_RANGE6] : [])], {
    allowlist: true,
    json: true,
    ipv6: plan.ipv6,
  });
}

/** The Node (its podCIDR, the conflist's subnet) and the app pod. */
export function bridgeClusterObjects(ipv6 = false): { nodes: string; pods: string } {
  const node = nodeObject({
    name: BRIDGE_NODE_NAME,
    ip: NODE_IP,
    ...(ipv6 ? { ip6: NODE_IP6 } : {}),
    spec: { podCIDR: POD_SUBNET, podCIDRs: [POD_SUBNET, ...(ipv6 ? [POD_SUBNET6] : [])] },
    nodeInfo: { kubeletVersion: "v1.31.4", containerRuntimeVersion: "containerd://1.7.24" },
  });
  const app = appPod({
    name: POD_NAME,
    namespace: "default",
    nodeName: BRIDGE_NODE_NAME,
    nodeIp: NODE_IP,
    podIp: POD_IP,
    ...(ipv6 ? { podIp6: POD_IP6 } : {}),
  });
  return { nodes: kubectlList([node]), pods: kubectlList([app]) };
}

async function run(ctx: ScenarioContext, opts: BridgeCniOptions): Promise<ScenarioOutcome> {
  const plan = planBridgeReplica(opts);
  return runSnatReplica(ctx, {
    title: "bridge-cni",
    phase: plan.phase,
    node: { name: BRIDGE_NODE_NAME, ip: NODE_IP, routerIp: ROUTER_NODE_IP, hostVeth: HOST_VETH },
    // the bridge plugin's node side: cni0 with the gateway address (isGateway), the pod's veth on it
    pod: {
      name: POD_NAME,
      namespace: "default",
      ip: POD_IP,
      attach: { kind: "bridge", bridge: "cni0", gateway: BRIDGE_IP },
    },
    routesBack: plan.routesBack,
    ...(plan.ipv6
      ? {
          ipv6: {
            nodeIp: NODE_IP6,
            routerIp: ROUTER_NODE_IP6,
            podIp: POD_IP6,
            gateway: BRIDGE_IP6,
            routesBack: [NODE_RANGE6],
          },
        }
      : {}),
    kubeProxy: true,
    install: async (node) => {
      if (plan.chain) await installBridgeRules(node, plan.chain, plan.rules);
    },
    files: async () => {
      const objs = bridgeClusterObjects(plan.ipv6);
      return [
        [`nodes/${BRIDGE_NODE_NAME}/cni/${CONF_FILE}`, conflist(plan)],
        ["cluster/nodes.yaml", objs.nodes],
        ["cluster/pods.yaml", objs.pods],
        [`remote/${SITE_NAME}.yaml`, remoteSite(plan)],
      ];
    },
  });
}

export const scenario: Scenario<BridgeCniOptions> = {
  name: "bridge-cni",
  description:
    'bridge CNI SNAT: "ipMasq": false in the node\'s conflist, an on-prem site without a route back',
  options: BridgeCniOptions,
  run,
};
