/**
 * @module lab/path-verdict — what the kernel did with one flow in a whole-path sandbox (IPv4 or
 * IPv6), read from the security table's delivery count and the capture points: forwarded (seen
 * on a far host), rejected (an ICMP(v6) destination-unreachable quoting it, or a TCP reset, seen
 * at its sender), or silent.
 */
import type { PathCapture } from "./path-capture.ts";
import type { PathFlow } from "./path-gen.ts";

/** What the kernel did with one flow. */
export type KernelPathVerdict =
  | { readonly kind: "delivered" }
  | {
      readonly kind: "forwarded";
      readonly dev: string;
      readonly src: string;
      readonly dst: string;
      readonly dport?: number;
    }
  | { readonly kind: "rejected"; readonly with: string }
  | { readonly kind: "silent" }
  /**
   * A flow to be sent as a later packet of its connection that conntrack did not hold
   * ESTABLISHED when it was sent (its first packet did not pass, or the answer never reached
   * conntrack): nothing to compare with an established packet's path.
   */
  | { readonly kind: "not-established"; readonly why: string };

/** A sandbox's capture points: the far hosts behind eth0 and eth1, the pod, the node's lo. */
export type PathCaptures = Record<"far0" | "far1" | "pod" | "lo", PathCapture>;

/** ICMP destination-unreachable codes in `--reject-with` words (RFC 792, RFC 1812). */
const ICMP_CODES: Readonly<Record<number, string>> = {
  0: "icmp-net-unreachable",
  1: "icmp-host-unreachable",
  2: "icmp-proto-unreachable",
  3: "icmp-port-unreachable",
  9: "icmp-net-prohibited",
  10: "icmp-host-prohibited",
  13: "icmp-admin-prohibited",
};

/** ICMPv6 destination-unreachable codes (RFC 4443) in ip6tables' `--reject-with` words. */
const ICMP6_CODES: Readonly<Record<number, string>> = {
  0: "icmp6-no-route",
  1: "icmp6-adm-prohibited",
  3: "icmp6-addr-unreachable",
  4: "icmp6-port-unreachable",
  5: "icmp6-policy-fail",
  6: "icmp6-reject-route",
};

/** Per family: ICMP's protocol number, its echo request and destination-unreachable types. */
const ICMP = {
  4: { proto: 1, echo: 8, unreachable: 3, codes: ICMP_CODES, unnamed: "icmp-code" },
  6: { proto: 58, echo: 128, unreachable: 1, codes: ICMP6_CODES, unnamed: "icmp6-code" },
} as const;

export function pathVerdictOf(
  f: PathFlow,
  delivered: boolean,
  caps: PathCaptures,
  family: 4 | 6,
): KernelPathVerdict {
  if (delivered) return { kind: "delivered" };
  const icmp = ICMP[family];
  const proto = { tcp: 6, udp: 17, icmp: icmp.proto }[f.proto];
  for (const [dev, cap] of [
    ["eth0", caps.far0],
    ["eth1", caps.far1],
  ] as const) {
    const p = cap.packets.find((x) =>
      x.proto !== proto
        ? false
        : proto === icmp.proto
          ? x.icmpType === icmp.echo && x.dst === f.dst
          : x.sport === f.sport,
    );
    if (p) {
      return {
        kind: "forwarded",
        dev,
        src: p.src,
        dst: p.dst,
        ...(p.dport !== undefined && proto !== icmp.proto ? { dport: p.dport } : {}),
      };
    }
  }
  const at = f.origin === "pod" ? caps.pod : caps.lo;
  for (const p of at.packets) {
    if (
      p.proto === icmp.proto &&
      p.icmpType === icmp.unreachable &&
      p.inner &&
      p.inner.proto === proto
    ) {
      const same =
        proto === icmp.proto
          ? p.inner.src === f.src && p.inner.dst === f.dst && p.inner.icmpType === icmp.echo
          : p.inner.src === f.src && p.inner.sport === f.sport;
      if (same)
        return {
          kind: "rejected",
          with: icmp.codes[p.icmpCode ?? -1] ?? `${icmp.unnamed}-${p.icmpCode}`,
        };
    }
    if (p.proto === 6 && p.rst && p.dst === f.src && p.dport === f.sport && proto === 6) {
      return { kind: "rejected", with: "tcp-reset" };
    }
  }
  return { kind: "silent" };
}
