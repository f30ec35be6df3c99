/**
 * @module iptables/owners — which component wrote a rule of a node's dump: kube-proxy, the kubelet,
 * ip-masq-agent, GKE's node startup, the AWS VPC CNI, kubenet, the bridge CNI plugin, Calico,
 * Flannel, Cilium, Docker — or unknown. Decided from the rule's comment first (each component
 * writes its own, quoted here as its source writes it), then its chain's name, then the chain it
 * jumps to; the answer carries the name or comment that decided it.
 */
import type { Rule } from "./dump.ts";

export const OWNERS = [
  "kube-proxy",
  "kubelet",
  "ip-masq-agent",
  "gke-node-startup",
  "aws-vpc-cni",
  "kubenet",
  "bridge-cni",
  "calico",
  "flannel",
  "cilium",
  "docker",
  "firewalld",
  "distribution",
  "unknown",
] as const;
export type Owner = (typeof OWNERS)[number];

/** What attribution reads of a rule. */
export interface RuleFacts {
  readonly chain: string;
  readonly comment?: string;
  /** The chain the rule jumps to (or goes to), when its target is a chain. */
  readonly jumpTo?: string;
}

export interface Attribution {
  readonly owner: Owner;
  /** What decided: the comment, the rule's chain, or the chain it jumps to. */
  readonly by: "comment" | "chain" | "jump" | "none";
  /** In words, with the name or comment that decided. */
  readonly reason: string;
}

export interface AttributeOptions {
  /** ip-masq-agent's `--masq-chain` when the snapshot's DaemonSet sets one (default IP-MASQ-AGENT). */
  readonly masqChain?: string;
}

interface Row {
  readonly owner: Owner;
  readonly test: RegExp;
  /** Where the text comes from (the component's source), for the reason. */
  readonly what: string;
}

/** Comments as each component writes them (exact strings or the component's fixed prefix). */
const COMMENT_ROWS: readonly Row[] = [
  // ip-masq-agent (cmd/ip-masq-agent/ip-masq-agent.go): every comment starts "ip-masq-agent: "
  { owner: "ip-masq-agent", test: /^ip-masq-agent: /, what: 'ip-masq-agent\'s "ip-masq-agent: …"' },
  // GKE's configure-helper.sh writes the IP-MASQ chain with "ip-masq: …" comments
  { owner: "gke-node-startup", test: /^ip-masq: /, what: 'GKE node startup\'s "ip-masq: …"' },
  // amazon-vpc-cni-k8s pkg/networkutils/network.go and iptables_connmark.go (v1.23.1; the
  // ", VPC CIDR" / ", EXCLUDED CIDR" connmark comments are those of the chained form before #2697)
  {
    owner: "aws-vpc-cni",
    test: /^(AWS SNAT CHAIN( EXCLUSION)?|AWS, SNAT|AWS, primary ENI|AWS, outbound connections|AWS, CONNMARK|AWS CONNMARK CHAIN(, VPC CIDR|, EXCLUDED CIDR)?)$/,
    what: "the AWS VPC CNI's",
  },
  // kubenet (kubernetes pkg/kubelet/dockershim/network/kubenet/kubenet_linux.go ensureMasqRule, ≤ v1.23)
  {
    owner: "kubenet",
    test: /^kubenet: SNAT for outbound traffic from cluster$/,
    what: "kubenet's",
  },
  // containernetworking/plugins v1.9.1 pkg/utils/utils.go FormatComment: fmt.Sprintf("name: %q id: %q", …)
  { owner: "bridge-cni", test: /^name: ".*" id: ".*"$/, what: 'the CNI ipMasq "name: … id: …"' },
  // Calico (felix) writes "cali:<hash>" on every rule
  { owner: "calico", test: /^cali:/, what: 'Calico\'s "cali:…"' },
  // Flannel (pkg/trafficmngr/iptables): "flanneld masq"
  { owner: "flannel", test: /^flanneld /, what: 'Flannel\'s "flanneld …"' },
  // Cilium: "cilium-feeder: …", "cilium masquerade non-cluster", "cilium: …"
  { owner: "cilium", test: /^cilium[-: ]/, what: 'Cilium\'s "cilium…"' },
  // kube-proxy (pkg/proxy/iptables): "kubernetes service portals", "kubernetes postrouting rules", …
  { owner: "kube-proxy", test: /^kubernetes /, what: 'kube-proxy\'s "kubernetes …"' },
];

/** Chain names each component owns. */
const CHAIN_ROWS: readonly Row[] = [
  // kubelet's own chains (pkg/kubelet/kubelet_network_linux.go)
  {
    owner: "kubelet",
    test: /^KUBE-(KUBELET-CANARY|FIREWALL|MARK-DROP|IPTABLES-HINT)$/,
    what: "the kubelet's chain",
  },
  { owner: "kube-proxy", test: /^KUBE-/, what: "kube-proxy's KUBE-* chain" },
  { owner: "ip-masq-agent", test: /^IP-MASQ-AGENT$/, what: "ip-masq-agent's default chain" },
  {
    owner: "gke-node-startup",
    test: /^IP-MASQ$/,
    what: "GKE node startup's chain (an ip-masq-agent run with --masq-chain=IP-MASQ writes it too; its comments would say so)",
  },
  {
    owner: "aws-vpc-cni",
    test: /^AWS-(SNAT|CONNMARK)-CHAIN-\d+$/,
    what: "the AWS VPC CNI's chain",
  },
  // containernetworking/plugins pkg/utils.FormatChainName: "CNI-" + 24 hex digits of a hash
  { owner: "bridge-cni", test: /^CNI-[0-9a-f]{24}$/, what: "the CNI ipMasq chain" },
  { owner: "calico", test: /^cali-/, what: "Calico's cali-* chain" },
  { owner: "flannel", test: /^FLANNEL-/, what: "Flannel's FLANNEL-* chain" },
  { owner: "cilium", test: /^(CILIUM_|OLD_CILIUM_)/, what: "Cilium's CILIUM_* chain" },
  { owner: "docker", test: /^DOCKER(-|$)/, what: "Docker's chain" },
  // firewalld's iptables backend (src/firewall/core/ipXtables.py): INPUT_direct, INPUT_ZONES,
  // IN_<zone>[_allow|_deny|_log], FWDI_/FWDO_<zone>, FORWARD_IN_ZONES, …
  {
    owner: "firewalld",
    test: /^((INPUT|FORWARD|OUTPUT|PREROUTING|POSTROUTING)_(direct|ZONES(_SOURCE)?)|FORWARD_(IN|OUT)_ZONES(_SOURCE)?|(IN|FWDI|FWDO|FWD|PRE|POST)_[A-Za-z0-9_-]+)$/,
    what: "firewalld's chain",
  },
];

function byChain(chain: string, options: AttributeOptions): Row | undefined {
  if (options.masqChain !== undefined && chain === options.masqChain) {
    return { owner: "ip-masq-agent", test: /^/, what: "ip-masq-agent's --masq-chain" };
  }
  return CHAIN_ROWS.find((r) => r.test.test(chain));
}

/**
 * Who wrote a rule. A comment decides first (a rule in a built-in chain carries its writer's
 * comment), then the rule's own chain, then the chain it jumps to.
 *
 * @example
 * attributeRule({ chain: "AWS-SNAT-CHAIN-0", comment: "AWS SNAT CHAIN" }).owner; // "aws-vpc-cni"
 */
export function attributeRule(rule: RuleFacts, options: AttributeOptions = {}): Attribution {
  if (rule.comment !== undefined) {
    const row = COMMENT_ROWS.find((r) => r.test.test(rule.comment ?? ""));
    if (row) {
      return {
        owner: row.owner,
        by: "comment",
        reason: `${row.what} comment "${rule.comment}"`,
      };
    }
  }
  const own = byChain(rule.chain, options);
  if (own) return { owner: own.owner, by: "chain", reason: `${own.what} ${rule.chain}` };
  if (rule.jumpTo !== undefined) {
    const to = byChain(rule.jumpTo, options);
    if (to) {
      return {
        owner: to.owner,
        by: "jump",
        reason: `${rule.chain} jumps to ${to.what} ${rule.jumpTo}`,
      };
    }
  }
  return {
    owner: "unknown",
    by: "none",
    reason:
      rule.comment !== undefined
        ? `no component podpath knows writes the comment "${rule.comment}" or the chain ${rule.chain}`
        : `a rule in ${rule.chain} without a comment or a chain name podpath knows`,
  };
}

/** The facts attribution reads of a parsed rule. */
export function factsOfRule(rule: Rule): RuleFacts {
  let comment: string | undefined;
  for (const m of rule.matches) if (m.kind === "comment") comment ??= m.comment;
  const t = rule.target;
  return {
    chain: rule.chain,
    ...(comment !== undefined ? { comment } : {}),
    ...(t?.kind === "chain" ? { jumpTo: t.name } : {}),
  };
}

/** The rule of `dump`'s table written on `line` of `file` (a trace step's or a finding's source). */
export function ruleAtLine(
  tables: ReadonlyMap<
    string,
    { readonly chains: ReadonlyMap<string, { readonly rules: readonly Rule[] }> }
  >,
  file: string,
  line: number,
): Rule | undefined {
  for (const t of tables.values()) {
    for (const c of t.chains.values()) {
      const r = c.rules.find((x) => x.source.file === file && x.source.line === line);
      if (r) return r;
    }
  }
  return undefined;
}

/**
 * Who wrote a rule that drops or rejects, given the names of every chain of its table: the
 * attribution above, and for a bare REJECT in a built-in chain (no comment, no match, the line RHEL
 * and CentOS ship in /etc/sysconfig/iptables: `-A INPUT -j REJECT --reject-with
 * icmp-host-prohibited`, the same at the end of FORWARD) firewalld when its chains are in the
 * table (its iptables backend ends INPUT and FORWARD the same way), else the distribution.
 */
export function attributeBlockingRule(rule: Rule, chains: Iterable<string>): Attribution {
  const a = attributeRule(factsOfRule(rule));
  if (a.owner !== "unknown") return a;
  const t = rule.target;
  const builtin = ["INPUT", "FORWARD", "OUTPUT"].includes(rule.chain);
  const bare =
    rule.src === undefined &&
    rule.dst === undefined &&
    rule.inIface === undefined &&
    rule.outIface === undefined &&
    rule.protocol === undefined &&
    rule.matches.length === 0;
  if (builtin && bare && t?.kind === "extension" && t.name === "REJECT") {
    const firewalld = [...chains].some((c) => /^(INPUT|FORWARD)_(direct|ZONES)$/.test(c));
    return firewalld
      ? {
          owner: "firewalld",
          by: "chain",
          reason: `firewalld's closing REJECT of ${rule.chain} (its INPUT_ZONES/FORWARD_IN_ZONES chains are in the table)`,
        }
      : {
          owner: "distribution",
          by: "none",
          reason: `a bare REJECT at the end of ${rule.chain}: the rule RHEL/CentOS ship in /etc/sysconfig/iptables (iptables-services)`,
        };
  }
  return a;
}
