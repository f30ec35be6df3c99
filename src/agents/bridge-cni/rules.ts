/**
 * @module agents/bridge-cni/rules — the iptables rules the bridge plugin writes for one pod with
 * `"ipMasq": true` (containernetworking/plugins v1.9.1: pkg/ip/ipmasq_iptables_linux.go
 * `setupIPMasqIPTables` + `SetupIPMasq`, pkg/utils/utils.go `FormatChainName`/`FormatComment`):
 * a chain `CNI-` + the first 24 hex digits of sha512(network name + container ID), the comment
 * `name: "<network>" id: "<containerID>"`, and with go-iptables' AppendUnique (`-C`, then `-A`):
 *
 *   nat <chain>      -d <pod address/prefix> -j ACCEPT -m comment --comment <comment>
 *   nat <chain>      ! -d 224.0.0.0/4 -j MASQUERADE -m comment --comment <comment>   (ff00::/8 for IPv6)
 *   nat POSTROUTING  -s <pod address> -j <chain> -m comment --comment <comment>
 *
 * through ip6tables for an IPv6 address. Nothing else: pods of the network keep their address to
 * the subnet (and multicast), everything else is masqueraded. With `"ipMasq": false` (the
 * default) the plugin writes no rule at all. `cmdDel` tears the chain down only when the config
 * says `ipMasq: true` at DEL time.
 */
import { createHash } from "node:crypto";
import { type Cidr, formatCidr, formatIp, type Ip } from "../../net/cidr.ts";

const MAX_CHAIN_LENGTH = 28;
const CHAIN_PREFIX = "CNI-";

/** `utils.FormatChainName(name, id)`: "CNI-" + sha512(name+id) in hex, cut to 28 characters. */
export function formatChainName(network: string, containerId: string): string {
  const hex = createHash("sha512")
    .update(network + containerId)
    .digest("hex");
  return `${CHAIN_PREFIX}${hex}`.slice(0, MAX_CHAIN_LENGTH);
}

/** Go's %q of a plain string (the comment's quoting): backslash and quote escaped. */
function goQuote(s: string): string {
  return `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/** `utils.FormatComment(name, id)`: `name: "<name>" id: "<id>"`. */
export function formatComment(network: string, containerId: string): string {
  return `name: ${goQuote(network)} id: ${goQuote(containerId)}`;
}

export type BridgeRuleKind = "subnet-accept" | "masquerade" | "postrouting-jump";

export interface BridgeRule {
  readonly kind: BridgeRuleKind;
  readonly family: 4 | 6;
  readonly table: "nat";
  readonly chain: string;
  /** The spec the plugin passes to AppendUnique (after the chain). */
  readonly spec: readonly string[];
  /** As `iptables-save` prints it. */
  readonly saved: string;
}

export interface PodMasqInput {
  readonly network: string;
  readonly containerId: string;
  /** The pod's address as IPAM gave it, with the subnet's prefix (`10.88.0.5/16`). */
  readonly ip: Ip;
  readonly subnet: Cidr;
}

/** iptables-save's quoting of a comment: in double quotes, `"` and `\` escaped. */
function savedComment(c: string): string {
  return `"${c.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/** The plugin's chain, its two rules and the POSTROUTING jump for one pod address, in its order. */
export function podMasqRules(input: PodMasqInput): { chain: string; rules: BridgeRule[] } {
  const chain = formatChainName(input.network, input.containerId);
  const comment = formatComment(input.network, input.containerId);
  const family = input.ip.family;
  const multicast = family === 4 ? "224.0.0.0/4" : "ff00::/8";
  // ipn.String(): the pod's address with the subnet's prefix; iptables keeps the network
  const ipn = `${formatIp(input.ip)}/${input.subnet.prefix}`;
  const net = formatCidr({ ...input.subnet });
  const host = `${formatIp(input.ip)}/${family === 4 ? 32 : 128}`;
  const c = savedComment(comment);
  return {
    chain,
    rules: [
      {
        kind: "subnet-accept",
        family,
        table: "nat",
        chain,
        spec: ["-d", ipn, "-j", "ACCEPT", "-m", "comment", "--comment", comment],
        saved: `-A ${chain} -d ${net} -m comment --comment ${c} -j ACCEPT`,
      },
      {
        kind: "masquerade",
        family,
        table: "nat",
        chain,
        spec: ["!", "-d", multicast, "-j", "MASQUERADE", "-m", "comment", "--comment", comment],
        saved: `-A ${chain} ! -d ${multicast} -m comment --comment ${c} -j MASQUERADE`,
      },
      {
        kind: "postrouting-jump",
        family,
        table: "nat",
        chain: "POSTROUTING",
        spec: ["-s", formatIp(input.ip), "-j", chain, "-m", "comment", "--comment", comment],
        saved: `-A POSTROUTING -s ${host} -m comment --comment ${c} -j ${chain}`,
      },
    ],
  };
}

/** The network and container ID a `name: "…" id: "…"` comment names, or undefined. */
export function parseComment(
  comment: string,
): { network: string; containerId: string } | undefined {
  const m = /^name: "((?:[^"\\]|\\.)*)" id: "((?:[^"\\]|\\.)*)"$/.exec(comment);
  if (!m) return undefined;
  const unq = (s: string) => s.replace(/\\(.)/g, "$1");
  return { network: unq(m[1] ?? ""), containerId: unq(m[2] ?? "") };
}
