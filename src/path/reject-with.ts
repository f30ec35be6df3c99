/**
 * @module path/reject-with — what a REJECT rule answers with (`--reject-with`, as iptables-save
 * prints it, and the short forms iptables accepts), and the default when the rule names none.
 */
import type { ModuleOption } from "../iptables/dump.ts";
import type { Family } from "../net/cidr.ts";
import type { RejectWith } from "./path-types.ts";

/** IPv4's names (ipt_REJECT), as iptables-save prints them and the short forms iptables takes. */
const NAMES4: Readonly<Record<string, RejectWith>> = {
  "icmp-net-unreachable": "icmp-net-unreachable",
  "net-unreach": "icmp-net-unreachable",
  "icmp-host-unreachable": "icmp-host-unreachable",
  "host-unreach": "icmp-host-unreachable",
  "icmp-port-unreachable": "icmp-port-unreachable",
  "port-unreach": "icmp-port-unreachable",
  "icmp-proto-unreachable": "icmp-proto-unreachable",
  "proto-unreach": "icmp-proto-unreachable",
  "icmp-net-prohibited": "icmp-net-prohibited",
  "net-prohib": "icmp-net-prohibited",
  "icmp-host-prohibited": "icmp-host-prohibited",
  "host-prohib": "icmp-host-prohibited",
  "icmp-admin-prohibited": "icmp-admin-prohibited",
  "admin-prohib": "icmp-admin-prohibited",
  "tcp-reset": "tcp-reset",
  "tcp-rst": "tcp-reset",
};

/**
 * IPv6's names (ip6t_REJECT: ICMPv6 destination unreachable, codes 0, 1, 3, 4, 5 and 6), as
 * ip6tables-save prints them and the short forms ip6tables takes (`port-unreach` is code 4 here).
 */
const NAMES6: Readonly<Record<string, RejectWith>> = {
  "icmp6-no-route": "icmp6-no-route",
  "no-route": "icmp6-no-route",
  "icmp6-adm-prohibited": "icmp6-adm-prohibited",
  "adm-prohibited": "icmp6-adm-prohibited",
  "icmp6-addr-unreachable": "icmp6-addr-unreachable",
  "addr-unreach": "icmp6-addr-unreachable",
  "icmp6-port-unreachable": "icmp6-port-unreachable",
  "port-unreach": "icmp6-port-unreachable",
  "port-unreachable": "icmp6-port-unreachable",
  "icmp6-policy-fail": "icmp6-policy-fail",
  "policy-fail": "icmp6-policy-fail",
  "icmp6-reject-route": "icmp6-reject-route",
  "reject-route": "icmp6-reject-route",
  "tcp-reset": "tcp-reset",
  "tcp-rst": "tcp-reset",
};

/**
 * The answer of a REJECT with these options, in the dump's family. Without `--reject-with` the
 * kernel sends port unreachable (ipt_REJECT / ip6t_REJECT). `tcp-reset` on a packet that is not
 * TCP is refused by iptables when the rule is added, so a dump never holds one.
 */
export function rejectWithOf(
  options: readonly ModuleOption[],
  family: Family,
  _proto: string,
): RejectWith {
  const o = options.find((x) => x.name === "--reject-with");
  const name = o?.values[0];
  const named = name ? (family === 6 ? NAMES6 : NAMES4)[name] : undefined;
  if (named) return named;
  return family === 6 ? "icmp6-port-unreachable" : "icmp-port-unreachable";
}

/** What the sender sees for each answer (the errno a connect() or a ping reports). */
export const REJECT_SEEN_AS: { readonly [K in RejectWith]: string } = {
  "icmp-net-unreachable": "Network is unreachable",
  "icmp-host-unreachable": "No route to host",
  "icmp-port-unreachable": "Connection refused",
  "icmp-proto-unreachable": "Protocol not available",
  "icmp-net-prohibited": "Network is unreachable (administratively prohibited)",
  "icmp-host-prohibited": "No route to host",
  "icmp-admin-prohibited": "No route to host (administratively prohibited)",
  "tcp-reset": "Connection refused",
  "icmp6-no-route": "Network is unreachable",
  "icmp6-adm-prohibited": "Permission denied",
  "icmp6-addr-unreachable": "No route to host",
  "icmp6-port-unreachable": "Connection refused",
  "icmp6-policy-fail": "Permission denied (source address failed ingress/egress policy)",
  "icmp6-reject-route": "Permission denied (reject route to destination)",
};
