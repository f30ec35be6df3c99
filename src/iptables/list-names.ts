/**
 * @module iptables/list-names — the names `iptables -L` prints instead of numbers when run without
 * `-n`, read back to numbers: service names for ports, protocol names, ICMP type names. The port
 * and protocol tables are those of Debian's netbase 6.4 (`/etc/services`, `/etc/protocols`), the
 * files `getservbyport`/`getprotobynumber` read on most nodes; the ICMP names are libxt_icmp's and
 * libxt_icmp6's own tables (iptables 1.8). A name not in these tables is not guessed: the caller
 * keeps it as a hidden part (the node's own files may name other ports).
 */

/**
 * Service names `getservbyport` gives (netbase 6.4 `/etc/services`, the official name of each
 * entry) for ports that kube-proxy, CNI and common node rules use. Names that differ by protocol
 * (514: tcp `shell`, udp `syslog`) are both listed: a name stands for one port either way.
 */
export const SERVICE_PORTS: ReadonlyMap<string, number> = new Map([
  ["ftp-data", 20],
  ["ftp", 21],
  ["fsp", 21],
  ["ssh", 22],
  ["telnet", 23],
  ["smtp", 25],
  ["time", 37],
  ["whois", 43],
  ["tacacs", 49],
  ["domain", 53],
  ["bootps", 67],
  ["bootpc", 68],
  ["tftp", 69],
  ["gopher", 70],
  ["finger", 79],
  ["http", 80],
  ["kerberos", 88],
  ["pop3", 110],
  ["sunrpc", 111],
  ["auth", 113],
  ["nntp", 119],
  ["ntp", 123],
  ["epmap", 135],
  ["netbios-ns", 137],
  ["netbios-dgm", 138],
  ["netbios-ssn", 139],
  ["imap2", 143],
  ["snmp", 161],
  ["snmp-trap", 162],
  ["bgp", 179],
  ["ldap", 389],
  ["https", 443],
  ["microsoft-ds", 445],
  ["kpasswd", 464],
  ["submissions", 465],
  ["isakmp", 500],
  ["shell", 514],
  ["syslog", 514],
  ["printer", 515],
  ["submission", 587],
  ["ipp", 631],
  ["ldaps", 636],
  ["domain-s", 853],
  ["rsync", 873],
  ["ftps", 990],
  ["imaps", 993],
  ["pop3s", 995],
  ["socks", 1080],
  ["openvpn", 1194],
  ["ms-sql-s", 1433],
  ["l2f", 1701],
  ["radius", 1812],
  ["radius-acct", 1813],
  ["cisco-sccp", 2000],
  ["nfs", 2049],
  ["iscsi-target", 3260],
  ["mysql", 3306],
  ["ms-wbt-server", 3389],
  ["ipsec-nat-t", 4500],
  ["sip", 5060],
  ["sip-tls", 5061],
  ["mdns", 5353],
  ["postgresql", 5432],
  ["amqps", 5671],
  ["amqp", 5672],
  ["x11", 6000],
  ["redis", 6379],
  ["sge-qmaster", 6444],
  ["sge-execd", 6445],
  ["http-alt", 8080],
  ["tproxy", 8081],
  ["git", 9418],
  ["webmin", 10000],
  ["zabbix-agent", 10050],
]);

/**
 * Protocol numbers to the names `getprotobynumber` gives (netbase 6.4 `/etc/protocols`): the name
 * iptables-save prints after `-p`, and `iptables -L` prints in its `prot` column without `-n`.
 */
export const PROTOCOL_NAMES: ReadonlyMap<number, string> = new Map([
  [1, "icmp"],
  [2, "igmp"],
  [3, "ggp"],
  [4, "ipencap"],
  [5, "st"],
  [6, "tcp"],
  [8, "egp"],
  [9, "igp"],
  [12, "pup"],
  [17, "udp"],
  [20, "hmp"],
  [22, "xns-idp"],
  [27, "rdp"],
  [29, "iso-tp4"],
  [33, "dccp"],
  [36, "xtp"],
  [37, "ddp"],
  [38, "idpr-cmtp"],
  [41, "ipv6"],
  [43, "ipv6-route"],
  [44, "ipv6-frag"],
  [45, "idrp"],
  [46, "rsvp"],
  [47, "gre"],
  [50, "esp"],
  [51, "ah"],
  [57, "skip"],
  [58, "ipv6-icmp"],
  [59, "ipv6-nonxt"],
  [60, "ipv6-opts"],
  [73, "rspf"],
  [81, "vmtp"],
  [88, "eigrp"],
  [89, "ospf"],
  [93, "ax.25"],
  [94, "ipip"],
  [97, "etherip"],
  [98, "encap"],
  [103, "pim"],
  [108, "ipcomp"],
  [112, "vrrp"],
  [115, "l2tp"],
  [124, "isis"],
  [132, "sctp"],
  [133, "fc"],
  [135, "mobility-header"],
  [136, "udplite"],
  [137, "mpls-in-ip"],
  [138, "manet"],
  [139, "hip"],
  [140, "shim6"],
  [141, "wesp"],
  [142, "rohc"],
  [143, "ethernet"],
]);

const PROTOCOL_NUMBERS: ReadonlyMap<string, number> = new Map(
  [...PROTOCOL_NAMES].map(([n, name]) => [name, n]),
);

/**
 * The protocol as iptables-save would name it, from the `prot` column (`tcp`, `6`, `all`, `0`);
 * undefined for "all protocols".
 */
export function protocolName(text: string): string | undefined {
  const lower = text.toLowerCase();
  if (lower === "all" || lower === "0") return undefined;
  if (lower === "icmpv6") return "ipv6-icmp";
  if (/^[0-9]{1,3}$/.test(lower)) return PROTOCOL_NAMES.get(Number(lower)) ?? lower;
  return lower;
}

/** Is this a protocol `iptables -L` could print (a number, or a name from the table)? */
export function isProtocolText(text: string): boolean {
  const lower = text.toLowerCase();
  return (
    lower === "all" ||
    lower === "icmpv6" ||
    /^[0-9]{1,3}$/.test(lower) ||
    PROTOCOL_NUMBERS.has(lower)
  );
}

/** A port as printed: a number, or a service name from {@link SERVICE_PORTS}; undefined otherwise. */
export function portNumber(text: string): number | undefined {
  if (/^[0-9]{1,5}$/.test(text)) {
    const n = Number(text);
    return n <= 65535 ? n : undefined;
  }
  return SERVICE_PORTS.get(text);
}

/** An ICMP type (and code, or a code range) as libxt_icmp/libxt_icmp6 keep it. */
export interface IcmpType {
  readonly type: number;
  readonly codeMin: number;
  readonly codeMax: number;
}

const any = (type: number): IcmpType => ({ type, codeMin: 0, codeMax: 0xff });
const code = (type: number, c: number): IcmpType => ({ type, codeMin: c, codeMax: c });

/** libxt_icmp's names, first name of each type as `iptables -L` prints it. */
export const ICMP_NAMES: ReadonlyMap<string, IcmpType> = new Map([
  ["any", { type: 0xff, codeMin: 0, codeMax: 0xff }],
  ["echo-reply", any(0)],
  ["destination-unreachable", any(3)],
  ["network-unreachable", code(3, 0)],
  ["host-unreachable", code(3, 1)],
  ["protocol-unreachable", code(3, 2)],
  ["port-unreachable", code(3, 3)],
  ["fragmentation-needed", code(3, 4)],
  ["source-route-failed", code(3, 5)],
  ["network-unknown", code(3, 6)],
  ["host-unknown", code(3, 7)],
  ["network-prohibited", code(3, 9)],
  ["host-prohibited", code(3, 10)],
  ["TOS-network-unreachable", code(3, 11)],
  ["TOS-host-unreachable", code(3, 12)],
  ["communication-prohibited", code(3, 13)],
  ["host-precedence-violation", code(3, 14)],
  ["precedence-cutoff", code(3, 15)],
  ["source-quench", any(4)],
  ["redirect", any(5)],
  ["network-redirect", code(5, 0)],
  ["host-redirect", code(5, 1)],
  ["TOS-network-redirect", code(5, 2)],
  ["TOS-host-redirect", code(5, 3)],
  ["echo-request", any(8)],
  ["router-advertisement", any(9)],
  ["router-solicitation", any(10)],
  ["time-exceeded", any(11)],
  ["ttl-zero-during-transit", code(11, 0)],
  ["ttl-zero-during-reassembly", code(11, 1)],
  ["parameter-problem", any(12)],
  ["ip-header-bad", code(12, 0)],
  ["required-option-missing", code(12, 1)],
  ["timestamp-request", any(13)],
  ["timestamp-reply", any(14)],
  ["address-mask-request", any(17)],
  ["address-mask-reply", any(18)],
]);

/** libxt_icmp6's names. */
export const ICMP6_NAMES: ReadonlyMap<string, IcmpType> = new Map([
  ["destination-unreachable", any(1)],
  ["no-route", code(1, 0)],
  ["communication-prohibited", code(1, 1)],
  ["beyond-scope", code(1, 2)],
  ["address-unreachable", code(1, 3)],
  ["port-unreachable", code(1, 4)],
  ["failed-policy", code(1, 5)],
  ["reject-route", code(1, 6)],
  ["packet-too-big", any(2)],
  ["time-exceeded", any(3)],
  ["ttl-zero-during-transit", code(3, 0)],
  ["ttl-zero-during-reassembly", code(3, 1)],
  ["parameter-problem", any(4)],
  ["bad-header", code(4, 0)],
  ["unknown-header-type", code(4, 1)],
  ["unknown-option", code(4, 2)],
  ["echo-request", any(128)],
  ["echo-reply", any(129)],
  ["router-solicitation", any(133)],
  ["router-advertisement", any(134)],
  ["neighbour-solicitation", any(135)],
  ["neighbour-advertisement", any(136)],
  ["redirect", any(137)],
]);

/** The value iptables-save prints after `--icmp-type` / `--icmpv6-type`. */
export function icmpSaveValue(t: IcmpType, v6: boolean): string {
  if (!v6 && t.type === 0xff) return "any";
  const withCode = t.codeMin !== 0 || t.codeMax !== 0xff;
  return withCode ? `${t.type}/${t.codeMin}` : String(t.type);
}

/** LOG levels by the names `iptables -L` prints without `-n` (syslog's). */
export const LOG_LEVELS: ReadonlyMap<string, number> = new Map([
  ["emerg", 0],
  ["alert", 1],
  ["crit", 2],
  ["error", 3],
  ["warning", 4],
  ["warn", 4],
  ["notice", 5],
  ["info", 6],
  ["debug", 7],
]);

/** TCP flag bits in the order libxt_tcp prints them, and the name it prints. */
const TCP_FLAGS: readonly (readonly [string, number])[] = [
  ["FIN", 0x01],
  ["SYN", 0x02],
  ["RST", 0x04],
  ["PSH", 0x08],
  ["ACK", 0x10],
  ["URG", 0x20],
];

/** libxt_tcp's print_tcpf: flag bits as comma-joined names, `NONE` for none. */
export function tcpFlagNames(bits: number): string | undefined {
  if (bits & 0xc0) return undefined;
  const names = TCP_FLAGS.filter(([, b]) => bits & b).map(([n]) => n);
  return names.length === 0 ? "NONE" : names.join(",");
}

/** Names (`SYN,ACK`, `ALL`, `NONE`) or hex (`0x17`) to the flag bits; undefined if neither. */
export function tcpFlagBits(text: string): number | undefined {
  if (/^0x[0-9a-fA-F]{1,2}$/.test(text)) return Number.parseInt(text.slice(2), 16);
  let bits = 0;
  for (const n of text.split(",")) {
    if (n === "ALL") bits |= 0x3f;
    else if (n === "NONE") continue;
    else {
      const f = TCP_FLAGS.find(([name]) => name === n);
      if (!f) return undefined;
      bits |= f[1];
    }
  }
  return bits;
}
