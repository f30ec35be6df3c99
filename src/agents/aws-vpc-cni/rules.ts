/**
 * @module agents/aws-vpc-cni/rules — the iptables rules the AWS VPC CNI installs on a node for its
 * VPC CIDRs, settings and primary address (amazon-vpc-cni-k8s v1.23.1:
 * pkg/networkutils/network.go `buildIptablesSNATRules` + `updateIptablesRules`, and
 * iptables_connmark.go `buildRules` for the iptables connmark backend): each as the argv the
 * plugin passes to `iptables` (insert at 1 or append, in its order), and the node's resulting
 * chains as `iptables-save` prints them. IPv4 only: with IPv6 the plugin installs none.
 */
import type { AwsNodeSettings } from "./daemonset.ts";

export const SNAT_CHAIN = "AWS-SNAT-CHAIN-0";
export const CONNMARK_CHAIN = "AWS-CONNMARK-CHAIN-0";
export const SNAT_JUMP_COMMENT = "AWS SNAT CHAIN";
export const SNAT_RETURN_COMMENT = "AWS SNAT CHAIN";
export const SNAT_EXCLUSION_COMMENT = "AWS SNAT CHAIN EXCLUSION";
export const SNAT_COMMENT = "AWS, SNAT";
const DEFAULT_ROUTE = "0.0.0.0/0";

export type AwsRuleKind =
  | "snat-jump"
  | "vpc-return"
  | "exclusion-return"
  | "snat"
  | "mangle-connmark-set"
  | "mangle-connmark-restore"
  | "mangle-connmark-restore-vlan"
  | "connmark-jump"
  | "connmark-return"
  | "connmark-restore"
  | "connmark-set";

/** One rule as the plugin adds it on a node that had none of its rules. */
export interface AwsRule {
  readonly kind: AwsRuleKind;
  readonly table: "nat" | "mangle";
  readonly chain: string;
  /** The rule spec the plugin passes (after the chain). */
  readonly spec: readonly string[];
  /** "insert": `iptables -I chain 1` (the plugin's CIDR rules); "append": `iptables -A`. */
  readonly op: "insert" | "append";
  /** The rule as `iptables-save` prints it. */
  readonly saved: string;
  /** For RETURN rules: the CIDR as the plugin writes it. */
  readonly cidr?: string;
}

export interface NodeSnatInput {
  /** The VPC's IPv4 CIDR blocks (the plugin reads them from the instance metadata), in order. */
  readonly vpcCidrs: readonly string[];
  readonly settings: AwsNodeSettings;
  /** The primary ENI's primary address (`--to-source`). */
  readonly primaryIp: string;
  /** The primary ENI's interface name (mangle rules). */
  readonly primaryInterface: string;
  /** iptables supports --random-fully (1.6.2+); else prng falls back to --random. Default true. */
  readonly hasRandomFully?: boolean;
  /** The connmark backend: "nftables" nodes keep it in nft table `ip aws-cni`, not in iptables. */
  readonly connmarkBackend?: "iptables" | "nftables";
}

const q = (s: string) => `"${s}"`;
const hex = (n: number) => `0x${n.toString(16)}`;

function returnRule(
  kind: "vpc-return" | "exclusion-return" | "connmark-return",
  chain: string,
  cidr: string,
  comment: string,
): AwsRule {
  const all = cidr === DEFAULT_ROUTE;
  // the plugin drops -d for 0.0.0.0/0 only for exclusions (the kernel would print none anyway)
  const spec =
    all && kind !== "vpc-return"
      ? ["-m", "comment", "--comment", comment, "-j", "RETURN"]
      : ["-d", cidr, "-m", "comment", "--comment", comment, "-j", "RETURN"];
  return {
    kind,
    table: "nat",
    chain,
    spec,
    op: "insert",
    saved: `-A ${chain}${all ? "" : ` -d ${cidr}`} -m comment --comment ${q(comment)} -j RETURN`,
    cidr,
  };
}

/** The rules in the order the plugin adds them (SNAT and mangle first, then the connmark setup). */
export function awsNodeRules(input: NodeSnatInput): AwsRule[] {
  return [...snatRules(input), ...mangleRules(input), ...connmarkRules(input)];
}

/** nat: the POSTROUTING jump, the VPC and excluded CIDRs' RETURNs, and the SNAT rule. */
function snatRules(input: NodeSnatInput): AwsRule[] {
  const s = input.settings;
  const rules: AwsRule[] = [];
  if (!s.externalSnat) {
    rules.push({
      kind: "snat-jump",
      table: "nat",
      chain: "POSTROUTING",
      spec: ["-m", "comment", "--comment", SNAT_JUMP_COMMENT, "-j", SNAT_CHAIN],
      op: "append",
      saved: `-A POSTROUTING -m comment --comment ${q(SNAT_JUMP_COMMENT)} -j ${SNAT_CHAIN}`,
    });
    for (const c of input.vpcCidrs)
      rules.push(returnRule("vpc-return", SNAT_CHAIN, c, SNAT_RETURN_COMMENT));
    for (const c of s.excludeSnatCidrs) {
      rules.push(returnRule("exclusion-return", SNAT_CHAIN, c, SNAT_EXCLUSION_COMMENT));
    }
    const random =
      s.snatType === "hashrandom" || (s.snatType === "prng" && input.hasRandomFully === false)
        ? ["--random"]
        : s.snatType === "prng"
          ? ["--random-fully"]
          : [];
    const tail = ["-j", "SNAT", "--to-source", input.primaryIp, ...random];
    rules.push({
      kind: "snat",
      table: "nat",
      chain: SNAT_CHAIN,
      spec: [
        "!",
        "-o",
        "vlan+",
        "-m",
        "comment",
        "--comment",
        SNAT_COMMENT,
        "-m",
        "addrtype",
        "!",
        "--dst-type",
        "LOCAL",
        ...tail,
      ],
      op: "append",
      saved: `-A ${SNAT_CHAIN} ! -o vlan+ -m comment --comment ${q(SNAT_COMMENT)} -m addrtype ! --dst-type LOCAL ${tail.join(" ")}`,
    });
  }
  return rules;
}

/** mangle PREROUTING: the primary ENI's node-port mark and its restores on veth and vlan. */
function mangleRules(input: NodeSnatInput): AwsRule[] {
  const s = input.settings;
  const rules: AwsRule[] = [];
  const mark = s.connmark;
  if (s.nodePortSupport) {
    rules.push({
      kind: "mangle-connmark-set",
      table: "mangle",
      chain: "PREROUTING",
      spec: [
        "-m",
        "comment",
        "--comment",
        "AWS, primary ENI",
        "-i",
        input.primaryInterface,
        "-m",
        "addrtype",
        "--dst-type",
        "LOCAL",
        "--limit-iface-in",
        "-j",
        "CONNMARK",
        "--set-mark",
        `${hex(mark)}/${hex(mark)}`,
      ],
      op: "append",
      saved: `-A PREROUTING -i ${input.primaryInterface} -m comment --comment "AWS, primary ENI" -m addrtype --dst-type LOCAL --limit-iface-in -j CONNMARK --set-xmark ${hex(mark)}/${hex(mark)}`,
    });
  }
  if (s.nodePortSupport || !s.externalSnat) {
    rules.push(mangleRestoreRule("mangle-connmark-restore", `${s.vethPrefix}+`, mark));
  }
  if (s.nodePortSupport)
    rules.push(mangleRestoreRule("mangle-connmark-restore-vlan", "vlan+", mark));
  return rules;
}

/** mangle PREROUTING: restore the connection's mark on packets arriving on `iface`. */
function mangleRestoreRule(
  kind: "mangle-connmark-restore" | "mangle-connmark-restore-vlan",
  iface: string,
  mark: number,
): AwsRule {
  return {
    kind,
    table: "mangle",
    chain: "PREROUTING",
    spec: [
      "-m",
      "comment",
      "--comment",
      "AWS, primary ENI",
      "-i",
      iface,
      "-j",
      "CONNMARK",
      "--restore-mark",
      "--mask",
      hex(mark),
    ],
    op: "append",
    saved: `-A PREROUTING -i ${iface} -m comment --comment "AWS, primary ENI" -j CONNMARK --restore-mark --nfmask ${hex(mark)} --ctmask ${hex(mark)}`,
  };
}

/** nat: the connmark chain for outbound connections (iptables connmark backend only). */
function connmarkRules(input: NodeSnatInput): AwsRule[] {
  const s = input.settings;
  const rules: AwsRule[] = [];
  const mark = s.connmark;
  if (!s.externalSnat && (input.connmarkBackend ?? "iptables") === "iptables") {
    const exempt = [...input.vpcCidrs, ...s.excludeSnatCidrs];
    rules.push({
      kind: "connmark-jump",
      table: "nat",
      chain: "PREROUTING",
      spec: [
        "-i",
        `${s.vethPrefix}+`,
        "-m",
        "comment",
        "--comment",
        "AWS, outbound connections",
        "-j",
        CONNMARK_CHAIN,
      ],
      op: "append",
      saved: `-A PREROUTING -i ${s.vethPrefix}+ -m comment --comment "AWS, outbound connections" -j ${CONNMARK_CHAIN}`,
    });
    for (const c of exempt)
      rules.push(returnRule("connmark-return", CONNMARK_CHAIN, c, "AWS CONNMARK CHAIN"));
    rules.push({
      kind: "connmark-restore",
      table: "nat",
      chain: "PREROUTING",
      spec: [
        "-m",
        "comment",
        "--comment",
        "AWS, CONNMARK",
        "-j",
        "CONNMARK",
        "--restore-mark",
        "--mask",
        hex(mark),
      ],
      op: "append",
      saved: `-A PREROUTING -m comment --comment "AWS, CONNMARK" -j CONNMARK --restore-mark --nfmask ${hex(mark)} --ctmask ${hex(mark)}`,
    });
    rules.push({
      kind: "connmark-set",
      table: "nat",
      chain: CONNMARK_CHAIN,
      spec: [
        "-m",
        "comment",
        "--comment",
        "AWS, CONNMARK",
        "-j",
        "CONNMARK",
        "--set-xmark",
        `${hex(mark)}/${hex(mark)}`,
      ],
      op: "append",
      saved: `-A ${CONNMARK_CHAIN} -m comment --comment "AWS, CONNMARK" -j CONNMARK --set-xmark ${hex(mark)}/${hex(mark)}`,
    });
  }
  return rules;
}

/** The chains the plugin creates (`iptables -t nat -N`), in its order. */
export function awsNodeChains(input: NodeSnatInput): string[] {
  // NewChain(AWS-SNAT-CHAIN-0) runs even with external SNAT; the connmark chain only in Setup
  return [
    SNAT_CHAIN,
    ...(!input.settings.externalSnat && (input.connmarkBackend ?? "iptables") === "iptables"
      ? [CONNMARK_CHAIN]
      : []),
  ];
}

/**
 * Each table's rules in the order they end up on a node that had none of them: every insert at
 * position 1 goes before the earlier ones (so the CIDR RETURNs are in reverse order), appends go
 * last. Lines as `iptables-save` prints them, per table and chain.
 */
export function savedOrder(rules: readonly AwsRule[]): Map<string, string[]> {
  const byChain = new Map<string, string[]>();
  for (const r of rules) {
    const key = `${r.table}/${r.chain}`;
    const list = byChain.get(key) ?? [];
    if (r.op === "insert") list.unshift(r.saved);
    else list.push(r.saved);
    byChain.set(key, list);
  }
  return byChain;
}
