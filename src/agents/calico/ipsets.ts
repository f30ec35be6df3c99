/**
 * @module agents/calico/ipsets — the names Felix gives the IP sets its NAT-outgoing rule tests
 * (felix/ipsets/ipset_defs.go NameForMainIPSet: "cali" + IP version + "0" + set id, truncated to
 * 31 characters; felix/rules/rule_defs.go set ids), and which pools Felix puts in them
 * (felix/dataplane/linux/masq_mgr.go OnUpdate).
 */
import type { Family } from "../../net/cidr.ts";

/** felix/rules/rule_defs.go IPSetIDNATOutgoingMasqPools: pools with natOutgoing. */
export const SET_ID_MASQ_POOLS = "masq-ipam-pools";
/**
 * felix/rules/rule_defs.go IPSetIDAllPools: every pool. "all-ipam-pools" up to v3.31.x,
 * "network-ip-pools" from v3.32.0 (#12769, which also leaves LoadBalancer-only pools out).
 */
export const SET_ID_ALL_POOLS_LEGACY = "all-ipam-pools";
export const SET_ID_ALL_POOLS = "network-ip-pools";
/** felix/rules/rule_defs.go IPSetIDAllHostNets (natOutgoingExclusions: IPPoolsAndHostIPs). */
export const SET_ID_ALL_HOSTS = "all-hosts-net";

/** felix/ipsets/ipset_defs.go MaxIPSetNameLength. */
const MAX_NAME = 31;

/** The main set's name in the dataplane, e.g. `cali40masq-ipam-pools`, `cali60all-ipam-pools`. */
export function calicoIpsetName(family: Family, setId: string): string {
  return `cali${family}0${setId}`.slice(0, MAX_NAME);
}

/** Is `name` one of Felix's all-pools sets (either release's id), of either family? */
export function isAllPoolsSet(name: string): boolean {
  return /^cali[46]0(all-ipam-pools|network-ip-pools)$/.test(name);
}

/** Is `name` Felix's NAT-outgoing pools set, of either family? */
export function isMasqPoolsSet(name: string): boolean {
  return /^cali[46]0masq-ipam-pools$/.test(name);
}
