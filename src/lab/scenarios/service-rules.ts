/**
 * @module lab/scenarios/service-rules — the rules of the Service and filter scenarios, in the shape
 * kube-proxy's iptables mode writes them (v1.28+ `syncProxyRules`: KUBE-SERVICES → KUBE-SVC-* with
 * KUBE-MARK-MASQ for sources outside the cluster CIDR → KUBE-SEP-* DNAT, one `statistic` rule per
 * endpoint but the last; a Service without endpoints is a filter KUBE-SERVICES REJECT "has no
 * endpoints"; KUBE-FORWARD drops conntrack-invalid packets and accepts marked and established
 * traffic; KUBE-FIREWALL drops outside traffic to 127.0.0.0/8), plus what the distribution's
 * firewall and the CNI add: CentOS's default `REJECT --reject-with icmp-host-prohibited` at the end
 * of INPUT and FORWARD, and Flannel's FLANNEL-FWD accepts. Pure: iptables-restore text out.
 * kube-proxy's part (chain hash names included) is held to what the real kube-proxy v1.36 writes
 * for these Services by test/components/kube-proxy-service-rules.test.ts.
 */
import { SVC_CLUSTER_CIDR, SVC_ENDPOINT_IP, SVC_LISTEN_PORT, SVC_NODE_IP } from "./service-lab.ts";

/** The Services of the scenario: name, ClusterIP, port, and where kube-proxy sends them. */
export const SERVICES = {
  /** default/web: one endpoint, the endpoint pod. */
  web: { name: "default/web:http", ip: "10.96.0.50", port: 80, chain: "KUBE-SVC-CDGGSHYLG3RE2FKL" },
  /** default/kubernetes: the API server on the node itself (hostNetwork), port 6443. */
  apiserver: {
    name: "default/kubernetes:https",
    ip: "10.96.0.1",
    port: 443,
    chain: "KUBE-SVC-NPX46M4PTMTKRN6Y",
  },
  /** default/orders: no ready endpoint. */
  orders: { name: "default/orders:http", ip: "10.96.0.60", port: 80, chain: "" },
} as const;

export const WEB_SEP = "KUBE-SEP-FZKIUYKCK5HASUBH";
export const API_SEP = "KUBE-SEP-QAI6IJGEKZYOMWSX";
export const API_PORT = 6443;

const c = (text: string) => `-m comment --comment "${text}"`;

/** kube-proxy's nat table for the three Services. */
function natLines(): string[] {
  const w = SERVICES.web;
  const a = SERVICES.apiserver;
  const svc = (s: { name: string; ip: string; port: number; chain: string }) => [
    `-A KUBE-SERVICES -d ${s.ip}/32 -p tcp ${c(`${s.name} cluster IP`)} -m tcp --dport ${s.port} -j ${s.chain}`,
  ];
  return [
    "*nat",
    ":PREROUTING ACCEPT [0:0]",
    ":INPUT ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ":POSTROUTING ACCEPT [0:0]",
    ":KUBE-MARK-MASQ - [0:0]",
    ":KUBE-NODEPORTS - [0:0]",
    ":KUBE-POSTROUTING - [0:0]",
    ":KUBE-SERVICES - [0:0]",
    `:${a.chain} - [0:0]`,
    `:${w.chain} - [0:0]`,
    `:${API_SEP} - [0:0]`,
    `:${WEB_SEP} - [0:0]`,
    `-A PREROUTING ${c("kubernetes service portals")} -j KUBE-SERVICES`,
    `-A OUTPUT ${c("kubernetes service portals")} -j KUBE-SERVICES`,
    `-A POSTROUTING ${c("kubernetes postrouting rules")} -j KUBE-POSTROUTING`,
    "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
    "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
    "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
    `-A KUBE-POSTROUTING ${c("kubernetes service traffic requiring SNAT")} -j MASQUERADE --random-fully`,
    ...svc(a),
    ...svc(w),
    `-A KUBE-SERVICES ${c("kubernetes service nodeports; NOTE: this must be the last rule in this chain")} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
    `-A ${a.chain} ! -s ${SVC_CLUSTER_CIDR} -d ${a.ip}/32 -p tcp ${c(`${a.name} cluster IP`)} -m tcp --dport ${a.port} -j KUBE-MARK-MASQ`,
    `-A ${a.chain} ${c(`${a.name} -> ${SVC_NODE_IP}:${API_PORT}`)} -j ${API_SEP}`,
    `-A ${w.chain} ! -s ${SVC_CLUSTER_CIDR} -d ${w.ip}/32 -p tcp ${c(`${w.name} cluster IP`)} -m tcp --dport ${w.port} -j KUBE-MARK-MASQ`,
    `-A ${w.chain} ${c(`${w.name} -> ${SVC_ENDPOINT_IP}:${SVC_LISTEN_PORT}`)} -j ${WEB_SEP}`,
    `-A ${API_SEP} -s ${SVC_NODE_IP}/32 ${c(a.name)} -j KUBE-MARK-MASQ`,
    `-A ${API_SEP} -p tcp ${c(a.name)} -m tcp -j DNAT --to-destination ${SVC_NODE_IP}:${API_PORT}`,
    `-A ${WEB_SEP} -s ${SVC_ENDPOINT_IP}/32 ${c(w.name)} -j KUBE-MARK-MASQ`,
    `-A ${WEB_SEP} -p tcp ${c(w.name)} -m tcp -j DNAT --to-destination ${SVC_ENDPOINT_IP}:${SVC_LISTEN_PORT}`,
    "COMMIT",
  ];
}

/** What the filter table holds besides kube-proxy's chains. */
export interface FilterExtras {
  /** CentOS's /etc/sysconfig/iptables: INPUT accepts established, icmp, lo, ssh, then REJECT. */
  readonly centosInput: boolean;
  /** The same file's `-A FORWARD -j REJECT --reject-with icmp-host-prohibited`, loaded first. */
  readonly centosForward: boolean;
  /** Flannel's FLANNEL-FWD accepts for the cluster CIDR. */
  readonly flannel: boolean;
}

/**
 * The filter table as it stands after boot and start-up: kube-proxy inserts its jumps at the top
 * of the built-in chains, the distribution's rules (loaded at boot) follow, and
 * Flannel's jump is appended after them.
 */
function filterLines(x: FilterExtras): string[] {
  const o = SERVICES.orders;
  return [
    "*filter",
    ":INPUT ACCEPT [0:0]",
    ":FORWARD ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ...(x.flannel ? [":FLANNEL-FWD - [0:0]"] : []),
    ":KUBE-EXTERNAL-SERVICES - [0:0]",
    ":KUBE-FIREWALL - [0:0]",
    ":KUBE-FORWARD - [0:0]",
    ":KUBE-NODEPORTS - [0:0]",
    ":KUBE-PROXY-FIREWALL - [0:0]",
    ":KUBE-SERVICES - [0:0]",
    "-A INPUT -j KUBE-FIREWALL",
    `-A INPUT -m conntrack --ctstate NEW ${c("kubernetes load balancer firewall")} -j KUBE-PROXY-FIREWALL`,
    `-A INPUT ${c("kubernetes health check service ports")} -j KUBE-NODEPORTS`,
    `-A INPUT -m conntrack --ctstate NEW ${c("kubernetes externally-visible service portals")} -j KUBE-EXTERNAL-SERVICES`,
    ...(x.centosInput
      ? [
          "-A INPUT -m state --state RELATED,ESTABLISHED -j ACCEPT",
          "-A INPUT -p icmp -j ACCEPT",
          "-A INPUT -i lo -j ACCEPT",
          "-A INPUT -p tcp -m state --state NEW -m tcp --dport 22 -j ACCEPT",
          "-A INPUT -j REJECT --reject-with icmp-host-prohibited",
        ]
      : []),
    `-A FORWARD -m conntrack --ctstate NEW ${c("kubernetes load balancer firewall")} -j KUBE-PROXY-FIREWALL`,
    `-A FORWARD ${c("kubernetes forwarding rules")} -j KUBE-FORWARD`,
    `-A FORWARD -m conntrack --ctstate NEW ${c("kubernetes service portals")} -j KUBE-SERVICES`,
    `-A FORWARD -m conntrack --ctstate NEW ${c("kubernetes externally-visible service portals")} -j KUBE-EXTERNAL-SERVICES`,
    ...(x.centosForward ? ["-A FORWARD -j REJECT --reject-with icmp-host-prohibited"] : []),
    ...(x.flannel ? [`-A FORWARD ${c("flanneld forward")} -j FLANNEL-FWD`] : []),
    "-A OUTPUT -j KUBE-FIREWALL",
    `-A OUTPUT -m conntrack --ctstate NEW ${c("kubernetes load balancer firewall")} -j KUBE-PROXY-FIREWALL`,
    `-A OUTPUT -m conntrack --ctstate NEW ${c("kubernetes service portals")} -j KUBE-SERVICES`,
    ...(x.flannel
      ? [
          `-A FLANNEL-FWD -s ${SVC_CLUSTER_CIDR} ${c("flanneld forward")} -j ACCEPT`,
          `-A FLANNEL-FWD -d ${SVC_CLUSTER_CIDR} ${c("flanneld forward")} -j ACCEPT`,
        ]
      : []),
    `-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 ${c("block incoming localnet connections")} -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
    // kube-proxy counts these drops in an nfacct object where the kernel has nfacct
    // (`-m nfacct --nfacct-name ct_state_invalid_dropped_pkts`); the rule is the same without it
    "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP",
    `-A KUBE-FORWARD ${c("kubernetes forwarding rules")} -m mark --mark 0x4000/0x4000 -j ACCEPT`,
    `-A KUBE-FORWARD ${c("kubernetes forwarding conntrack rule")} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
    `-A KUBE-SERVICES -d ${o.ip}/32 -p tcp ${c(`${o.name} has no endpoints`)} -m tcp --dport ${o.port} -j REJECT --reject-with icmp-port-unreachable`,
    "COMMIT",
  ];
}

/** The node's whole rule set, as iptables-restore input. */
export function serviceRestoreText(x: FilterExtras): string {
  return `${[...natLines(), ...filterLines(x)].join("\n")}\n`;
}
