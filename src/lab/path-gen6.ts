/**
 * @module lab/path-gen6 — the IPv6 cases of the whole-path differential: a seed's IPv4 node
 * configuration and flows (lab/path-gen) carried over to IPv6 address by address. Each IPv4
 * address a.b.c.d becomes fd00::ab:cd (its 32 bits under fd00::/96) and each prefix length grows
 * by 96, so every block still holds what it held; ICMP becomes ICMPv6, each REJECT type the
 * ICMPv6 one ip6t_REJECT sends, DNAT's `addr:port` the bracketed `[addr]:port`. The sandbox's
 * fixed shape (lab/path-sandbox) is carried over the same way. Pure and reproducible.
 */
import { PATH_NET, type PathCase, type PathFlow } from "./path-gen.ts";

const V4 = /(?<![\w:.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(\/\d{1,2})?(:\d+)?(?![\w.])/g;

/** The IPv6 address an IPv4 address stands for in the IPv6 cases. */
export function toIpv6(v4: string): string {
  const out = toIpv6Text(v4);
  if (out === v4) throw new Error(`${v4} is not an IPv4 address`);
  return out;
}

/** A text with every IPv4 address (and prefix, and DNAT's `:port`) carried over to IPv6. */
export function toIpv6Text(text: string): string {
  return text.replace(V4, (_m, a, b, c, d, len: string | undefined, port: string | undefined) => {
    const hi = ((Number(a) << 8) | Number(b)).toString(16);
    const lo = ((Number(c) << 8) | Number(d)).toString(16);
    const addr = hi === "0" ? `fd00::${lo}` : `fd00::${hi}:${lo}`;
    const prefix = len ? `/${96 + Number(len.slice(1))}` : "";
    return port ? `[${addr}]${prefix}${port}` : `${addr}${prefix}`;
  });
}

/** Each IPv4 REJECT type as the ICMPv6 answer that stands for it (all six of ip6t_REJECT's). */
const REJECT6: Readonly<Record<string, string>> = {
  "icmp-net-unreachable": "icmp6-no-route",
  "icmp-host-unreachable": "icmp6-addr-unreachable",
  "icmp-port-unreachable": "icmp6-port-unreachable",
  "icmp-proto-unreachable": "icmp6-policy-fail",
  "icmp-net-prohibited": "icmp6-adm-prohibited",
  "icmp-host-prohibited": "icmp6-reject-route",
  "icmp-admin-prohibited": "icmp6-adm-prohibited",
};

/** ip6tables-restore input for an iptables-restore input of the generator. */
export function toIp6tablesRestore(restore: string): string {
  return toIpv6Text(restore)
    .replace(/-p icmp\b/g, "-p ipv6-icmp")
    .replace(/--reject-with (icmp-[a-z-]+)/g, (m, t: string) => {
      const v6 = REJECT6[t];
      return v6 ? `--reject-with ${v6}` : m;
    });
}

/** The seed's case carried over to IPv6: ip6tables rules, `ip -6 rule` entries and routes. */
export function toIpv6Case(c: PathCase): PathCase {
  return {
    ...c,
    restore: toIp6tablesRestore(c.restore),
    ipRules: c.ipRules.map(toIpv6Text),
    routes: c.routes.map(toIpv6Text),
  };
}

/** The seed's flows carried over to IPv6 (ICMP ones are ICMPv6 echoes). */
export function toIpv6Flows(flows: readonly PathFlow[]): PathFlow[] {
  return flows.map((f) => ({ ...f, src: toIpv6(f.src), dst: toIpv6(f.dst) }));
}

/** The sandbox's fixed shape in IPv6 (each address the carry-over of lab/path-gen's IPv4 one). */
export const PATH_NET6 = {
  podIface: PATH_NET.podIface,
  podGateway: toIpv6(PATH_NET.podGateway),
  pods: PATH_NET.pods.map(toIpv6),
  eth0: {
    iface: "eth0",
    node: toIpv6(PATH_NET.eth0.node),
    gateway: toIpv6(PATH_NET.eth0.gateway),
  },
  eth1: {
    iface: "eth1",
    node: toIpv6(PATH_NET.eth1.node),
    gateway: toIpv6(PATH_NET.eth1.gateway),
  },
} as const;
