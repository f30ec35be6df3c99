/**
 * @module agents/kubenet/rules — the one masquerade rule kubenet writes for the kubelet's
 * `--non-masquerade-cidr` (kubernetes v1.17 pkg/kubelet/dockershim/network/kubenet/kubenet_linux.go
 * `ensureMasqRule`, the same rule from v1.5 until kubenet's removal with dockershim in v1.24):
 * `EnsureRule(Append, nat, POSTROUTING, -m comment --comment "kubenet: SNAT for outbound traffic
 * from cluster" -m addrtype ! --dst-type LOCAL ! -d <cidr> -j MASQUERADE)`, through ip6tables when
 * the CIDR is IPv6, and no rule at all for 0.0.0.0/0 or ::/0. EnsureRule checks with `-C` and
 * appends when missing, so a changed flag adds a second rule beside the old one until the node's
 * nat table is flushed or rebooted.
 */
import { type Cidr, formatCidr } from "../../net/cidr.ts";

export const KUBENET_COMMENT = "kubenet: SNAT for outbound traffic from cluster";
const ZERO_V4 = "0.0.0.0/0";
const ZERO_V6 = "::/0";

export interface KubenetRule {
  readonly family: 4 | 6;
  readonly table: "nat";
  readonly chain: "POSTROUTING";
  /** The rule spec kubenet passes after the chain (EnsureRule: `-C`, then `-A`). */
  readonly spec: readonly string[];
  /** The rule as `iptables-save` (or `ip6tables-save`) prints it. */
  readonly saved: string;
  /** The CIDR as iptables keeps it (host bits cleared). */
  readonly cidr: string;
}

/**
 * kubenet's rule for a `--non-masquerade-cidr` as written; undefined for the two values that
 * turn it off (compared as strings, as kubenet does: `0.0.0.0/0`, `::/0`).
 */
export function kubenetMasqRule(written: string, cidr: Cidr): KubenetRule | undefined {
  if (written === ZERO_V4 || written === ZERO_V6) return undefined;
  const spec = [
    "-m",
    "comment",
    "--comment",
    KUBENET_COMMENT,
    "-m",
    "addrtype",
    "!",
    "--dst-type",
    "LOCAL",
    "!",
    "-d",
    written,
    "-j",
    "MASQUERADE",
  ];
  const kept = formatCidr(cidr);
  return {
    family: cidr.family,
    table: "nat",
    chain: "POSTROUTING",
    spec,
    saved: `-A POSTROUTING ! -d ${kept} -m comment --comment "${KUBENET_COMMENT}" -m addrtype ! --dst-type LOCAL -j MASQUERADE`,
    cidr: kept,
  };
}
