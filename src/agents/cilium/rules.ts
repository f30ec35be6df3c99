/**
 * @module agents/cilium/rules — the nat rules Cilium's agent writes when it masquerades with
 * iptables (`enable-bpf-masquerade: "false"`, the default): pkg/datapath/iptables/iptables.go
 * `installMasqueradeRules` (IPv4 and IPv6 alike, into CILIUM_POST_nat), the chains and their
 * feeder rules (`customChain.installFeeder`, `-I` with prepend-iptables-chains, the default) and
 * the node ipset (`cilium_node_set_v4` / `_v6`, pkg/datapath/iptables/ipset) used when routing is
 * native. The argv are the agent's, in its order (one rule per masquerade interface, as
 * allEgressMasqueradeCmds / nodeIpsetNATCmds and their tests in iptables_test.go write them); `iptables-save` prints them normalised (`-s`
 * before `-d`, marks in short hex, `127.0.0.1/32`). Source-route masquerade
 * (enable-masquerade-to-route-source) is not modelled.
 */
import type { Family } from "../../net/cidr.ts";

export const POST_NAT_CHAIN = "CILIUM_POST_nat";
export const MASQ_COMMENT = "cilium masquerade non-cluster";
export const NODE_SET_COMMENT = "exclude traffic to cluster nodes from masquerade";
export const PROXY_RETURN_COMMENT = "exclude proxy return traffic from masquerade";
export const NODE_SET_V4 = "cilium_node_set_v4";
export const NODE_SET_V6 = "cilium_node_set_v6";
/** linux_defaults.MagicMarkIsProxy / MagicMarkProxyMask, as fmt "%#08x/%#08x" writes them. */
export const PROXY_MARK = "0x00000a00/0x00000e00";
/** linux_defaults.MagicMarkIdentity / MagicMarkHostMask. */
export const IDENTITY_MARK = "0x00000f00/0x00000f00";
export const HOST_DEVICE = "cilium_host";

/** What the agent's masquerade rules depend on, for one family. */
export interface CiliumIptablesInput {
  readonly family: Family;
  /** The node's pod CIDR (ipv4AllocCIDR). */
  readonly allocRange: string;
  /** remoteSNATDstAddrExclusionCIDR: the native-routing CIDR when set, else the pod CIDR. */
  readonly snatDstExclusionCidr: string;
  /** masquerade-interfaces; empty: `-s <pod CIDR> ! -o cilium_+`. */
  readonly masqueradeInterfaces: readonly string[];
  readonly randomFully: boolean;
  /** NodeIpsetNeeded: native routing with iptables masquerade. */
  readonly nodeIpsetNeeded: boolean;
  readonly tunneling: boolean;
  /** The agent's internal IP on cilium_host (hostMasqueradeIP). */
  readonly hostMasqueradeIp: string;
  /** cilium_host, or lxc+ with enable-endpoint-routes. */
  readonly localDeliveryInterface: string;
  readonly endpointRoutes: boolean;
}

/** One rule as the agent passes it to iptables, after `-t nat`. */
export interface CiliumRule {
  readonly chain: string;
  readonly op: "append" | "insert";
  readonly spec: readonly string[];
  readonly comment: string;
}

const rule = (spec: string[], comment: string): CiliumRule => ({
  chain: POST_NAT_CHAIN,
  op: "append",
  spec,
  comment,
});

/** CILIUM_POST_nat's rules for `input`, in the order the agent appends them. */
export function ciliumMasqueradeRules(i: CiliumIptablesInput): CiliumRule[] {
  const out: CiliumRule[] = [];
  // nodeIpsetNATCmds / allEgressMasqueradeCmds: one rule per masquerade interface
  const ifaces: (string | undefined)[] =
    i.masqueradeInterfaces.length > 0 ? [...i.masqueradeInterfaces] : [undefined];
  if (i.nodeIpsetNeeded) {
    for (const o of ifaces) {
      out.push(
        rule(
          [
            ...(o !== undefined ? ["-o", o] : ["-s", i.allocRange]),
            ...["-m", "set", "--match-set", i.family === 4 ? NODE_SET_V4 : NODE_SET_V6, "dst"],
            ...["-m", "comment", "--comment", NODE_SET_COMMENT, "-j", "ACCEPT"],
          ],
          NODE_SET_COMMENT,
        ),
      );
    }
  }
  for (const o of ifaces) {
    out.push(
      rule(
        [
          ...["!", "-d", i.snatDstExclusionCidr],
          ...(o !== undefined ? ["-o", o] : ["-s", i.allocRange, "!", "-o", "cilium_+"]),
          ...["-m", "comment", "--comment", MASQ_COMMENT, "-j", "MASQUERADE"],
          ...(i.randomFully ? ["--random-fully"] : []),
        ],
        MASQ_COMMENT,
      ),
    );
  }
  out.push(
    rule(
      [
        "-m",
        "mark",
        "--mark",
        PROXY_MARK,
        "-m",
        "comment",
        "--comment",
        PROXY_RETURN_COMMENT,
        "-j",
        "ACCEPT",
      ],
      PROXY_RETURN_COMMENT,
    ),
  );
  if (i.tunneling) {
    const c = "cilium host->cluster masquerade";
    out.push(
      rule(
        [
          ...["!", "-s", i.allocRange, "!", "-d", i.allocRange, "-o", HOST_DEVICE],
          ...["-m", "comment", "--comment", c, "-j", "SNAT", "--to-source", i.hostMasqueradeIp],
        ],
        c,
      ),
    );
  }
  const loopback = i.family === 4 ? "127.0.0.1" : "::1";
  const lc = `cilium host->cluster from ${loopback} masquerade`;
  out.push(
    rule(
      [
        ...["-s", loopback, "-o", i.localDeliveryInterface],
        ...["-m", "comment", "--comment", lc, "-j", "SNAT", "--to-source", i.hostMasqueradeIp],
      ],
      lc,
    ),
  );
  if (!i.endpointRoutes) {
    const hc = "hairpin traffic that originated from a local pod";
    out.push(
      rule(
        [
          ...["-m", "mark", "--mark", IDENTITY_MARK, "-o", i.localDeliveryInterface],
          ...["-m", "conntrack", "--ctstate", "DNAT"],
          ...["-m", "comment", "--comment", hc, "-j", "SNAT", "--to-source", i.hostMasqueradeIp],
        ],
        hc,
      ),
    );
  }
  return out;
}

/** The nat chains Cilium adds (ciliumChains) and the hook each is fed from. */
export const CILIUM_NAT_CHAINS = [
  { name: "CILIUM_POST_nat", hook: "POSTROUTING" },
  { name: "CILIUM_OUTPUT_nat", hook: "OUTPUT" },
  { name: "CILIUM_PRE_nat", hook: "PREROUTING" },
] as const;

/** A chain's feeder rule as getFeedRule writes it (prepend-iptables-chains: `-I`). */
export function feederRule(chain: string, hook: string, prepend = true): CiliumRule {
  return {
    chain: hook,
    op: prepend ? "insert" : "append",
    spec: ["-m", "comment", "--comment", `cilium-feeder: ${chain}`, "-j", chain],
    comment: `cilium-feeder: ${chain}`,
  };
}

/** `ipset` argv that create the node set and add the nodes (pkg/datapath/iptables/ipset). */
export function nodeIpsetCommands(family: Family, nodeIps: readonly string[]): string[][] {
  const name = family === 4 ? NODE_SET_V4 : NODE_SET_V6;
  return [
    ["ipset", "create", name, "iphash", "family", family === 4 ? "inet" : "inet6", "-exist"],
    ...nodeIps.map((ip) => ["ipset", "add", name, ip, "-exist"]),
  ];
}
