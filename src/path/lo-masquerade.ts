/**
 * @module path/lo-masquerade — the source MASQUERADE gives the node's own packet as it leaves
 * through lo to one of the node's addresses (kube-proxy marks it for masquerade when the Service's
 * endpoint is the node itself). The kernel asks inet_select_addr(lo, nexthop, scope universe):
 * lo's own addresses are scope host, so it takes lo's first primary address of scope global if
 * lo has one, else the first primary address of scope global of the namespace's devices in their
 * order, which `ip addr` prints (ifindex order). Verified on the kernel by
 * own-packet-lo-masquerade.kernel.test.ts. IPv6's masquerade chooses by source address selection
 * (ipv6_dev_get_saddr), not held to the kernel here: every global address of the node's is a
 * candidate.
 */
import type { NatContext } from "../iptables/nat-trace.ts";
import type { SourceRef } from "../model/types.ts";
import { contains, type Family, formatIp, type Ip, parseCidr } from "../net/cidr.ts";
import type { PathOutcome, PathStep, PathVerdict } from "./path-types.ts";

/** The source the masquerade on lo gives, as far as the evidence tells. */
export type LoMasqueradeSource =
  /** `ip addr` decides: the first interface with a global primary address of the family. */
  | {
      readonly kind: "known";
      readonly ip: Ip;
      readonly iface: string;
      readonly source?: SourceRef;
    }
  /** Without `ip addr`: one of the node's addresses (scope global), which one not known. */
  | { readonly kind: "candidates"; readonly ips: readonly Ip[] }
  /** No address of the node's to choose from. */
  | { readonly kind: "unknown" };

const NOT_GLOBAL = [
  parseCidr("127.0.0.0/8"),
  parseCidr("169.254.0.0/16"),
  parseCidr("::1/128"),
  parseCidr("fe80::/10"),
];

/**
 * The source of the node's own packet after MASQUERADE on lo, from the node's interfaces in `ip
 * addr` order (their `primary` address), else from the node's address list.
 *
 * @example
 * loMasqueradeSource({ interfaces: [{ name: "lo" }, { name: "eth0", primary }] }, 4);
 * // → { kind: "known", ip: primary, iface: "eth0" }
 */
export function loMasqueradeSource(ctx: NatContext, family: Family): LoMasqueradeSource {
  const ifaces = ctx.interfaces ?? [];
  if (family === 4 && ifaces.some((i) => (i.addresses?.length ?? 0) > 0 || i.primary)) {
    for (const i of ifaces) {
      const a = i.primary;
      if (a === undefined || a.family !== family) continue;
      return {
        kind: "known",
        ip: a,
        iface: i.name,
        ...(i.primarySource ? { source: i.primarySource } : {}),
      };
    }
    return { kind: "unknown" };
  }
  const ips: Ip[] = [];
  for (const a of ctx.localAddresses ?? []) {
    let ip: Ip = a as Ip;
    if ("prefix" in a) {
      // a block of addresses (`local 10.0.0.0/8` routes) does not say which one is an interface's
      if (a.start !== a.end) return { kind: "unknown" };
      ip = { family: a.family, value: a.start };
    }
    if (ip.family !== family || NOT_GLOBAL.some((c) => contains(c, ip))) continue;
    if (!ips.some((b) => b.value === ip.value)) ips.push(ip);
  }
  return ips.length > 0 ? { kind: "candidates", ips } : { kind: "unknown" };
}

/** The step that records the rewrite: MASQUERADE's rule, and the `ip addr` line of its address. */
export function loMasqueradeStep(
  from: Ip,
  m: Exclude<LoMasqueradeSource, { kind: "unknown" }>,
  rule: SourceRef,
): PathStep {
  const note =
    m.kind === "known"
      ? `masquerade on lo: ${formatIp(m.ip)}, the first address of scope global (${m.iface}${m.source ? `, ${m.source.file}:${m.source.line}` : ""})`
      : `masquerade on lo: one of the node's addresses ${m.ips.map(formatIp).join(", ")} (which one, the evidence does not say: IPv4 takes the first of scope global in \`ip addr\` order)`;
  return {
    kind: "snat",
    decision: "masquerade",
    from,
    ...(m.kind === "known" ? { to: m.ip } : {}),
    note,
    source: rule,
  };
}

/** The verdict without its source line details that do not depend on the source address. */
function verdictKey(v: PathVerdict): string {
  switch (v.kind) {
    case "dropped":
    case "rejected":
      return `${v.kind} ${v.by.file}:${v.by.line}`;
    case "delivered":
      return `delivered ${v.dst.value}:${v.port ?? ""}`;
    case "undecided":
      return `undecided ${v.reason}`;
    default:
      return v.kind;
  }
}

/**
 * The outcomes of the walk after the masquerade, one list per candidate source: the first list
 * when every candidate ends the same way (the rules never told the sources apart), else undefined.
 */
export function settleCandidates(
  per: readonly (readonly PathOutcome[])[],
): readonly PathOutcome[] | undefined {
  const keys = per.map((os) => [...new Set(os.map((o) => verdictKey(o.verdict)))].sort().join("|"));
  return keys.every((k) => k === keys[0]) ? per[0] : undefined;
}

/** The verdict when the source is not known and the candidates end differently (or none is). */
export function loMasqueradeUndecided(rule: SourceRef | undefined, why: string): PathVerdict {
  return {
    kind: "undecided",
    reason: `nat POSTROUTING masquerades the node's own packet on lo and ${why}: \`ip addr\` decides (MASQUERADE takes the first address of scope global in its order)`,
    ...(rule ? { at: rule } : {}),
    unknowns: [],
  };
}
