/**
 * @module agents/flannel/rules — the nat rules flanneld writes with `--ip-masq`, exactly as
 * flannel v0.28.9 pkg/trafficmngr/iptables/iptables.go masqRules / masqIP6Rules builds them (in
 * that order, appended; the POSTROUTING jump first), as iptables-save prints them. Without
 * `--ip-masq` flanneld writes none (main.go: SetupAndEnsureMasqRules only when opts.ipMasq).
 */
import type { Family } from "../../net/cidr.ts";

export const CHAIN_POSTRTG = "FLANNEL-POSTRTG";
export const FLANNEL_MASQ_COMMENT = "flanneld masq";
/** pkg/trafficmngr/trafficmngr.go KubeProxyMark. */
export const KUBE_PROXY_MARK = "0x4000/0x4000";

export interface FlannelMasqInput {
  readonly family: Family;
  /** net-conf.json Network (IPv6Network): the cluster CIDR. */
  readonly network: string;
  /** The node's lease (its pod subnet). */
  readonly podSubnet: string;
  /** `ipt.HasRandomFully() && !--ip-masq-fully-random-disable`. Default true. */
  readonly randomFully?: boolean;
}

/** The rules as iptables-save prints them, POSTROUTING's jump first. */
export function flannelMasqRules(i: FlannelMasqInput): string[] {
  const c = `-m comment --comment "${FLANNEL_MASQ_COMMENT}"`;
  const rand = (i.randomFully ?? true) ? " --random-fully" : "";
  const multicast = i.family === 4 ? "224.0.0.0/4" : "ff00::/8";
  const A = `-A ${CHAIN_POSTRTG}`;
  return [
    `-A POSTROUTING ${c} -j ${CHAIN_POSTRTG}`,
    // kube-proxy marked it: kube-proxy masquerades it (avoids double NAT)
    `${A} -m mark --mark ${KUBE_PROXY_MARK} ${c} -j RETURN`,
    // traffic within the overlay keeps its pod address
    `${A} -s ${i.podSubnet} -d ${i.network} ${c} -j RETURN`,
    `${A} -s ${i.network} -d ${i.podSubnet} ${c} -j RETURN`,
    // external traffic arriving for a pod of this node
    `${A} ! -s ${i.network} -d ${i.podSubnet} ${c} -j RETURN`,
    // everything else from the pods, not multicast
    `${A} -s ${i.network} ! -d ${multicast} ${c} -j MASQUERADE${rand}`,
    // the host toward the overlay
    `${A} ! -s ${i.network} -d ${i.network} ${c} -j MASQUERADE${rand}`,
  ];
}

/** The same rules as `iptables-restore --noflush` input (the chain declared). */
export function flannelRestoreText(i: FlannelMasqInput): string {
  return ["*nat", `:${CHAIN_POSTRTG} - [0:0]`, ...flannelMasqRules(i), "COMMIT", ""].join("\n");
}
