/**
 * @module agents/calico/rules — the nat rules exactly as Felix (iptables dataplane) writes them for
 * given settings: the POSTROUTING hook, `cali-POSTROUTING` (felix/rules/static.go
 * StaticNATPostroutingChains: jump cali-fip-snat, jump cali-nat-outgoing) and `cali-nat-outgoing`
 * (felix/rules/nat.go NATOutgoingChain/makeNATOutgoingRuleIPTables), each with its `cali:<hash>`
 * comment computed as felix/generictables/rules.go RuleHashes does (SHA-224 chained from the chain
 * name over each rule rendered with "HASH" for its comment, URL-safe base64, 16 characters), and
 * the IP sets' contents (felix/dataplane/linux/masq_mgr.go). Read from projectcalico/calico v3.32.1.
 */
import { createHash } from "node:crypto";
import type { Family } from "../../net/cidr.ts";
import { type CalicoIpPool, isLoadBalancerOnly } from "./ippool.ts";
import {
  calicoIpsetName,
  SET_ID_ALL_HOSTS,
  SET_ID_ALL_POOLS,
  SET_ID_ALL_POOLS_LEGACY,
  SET_ID_MASQ_POOLS,
} from "./ipsets.ts";

export const CHAIN_NAT_POSTROUTING = "cali-POSTROUTING";
export const CHAIN_NAT_OUTGOING = "cali-nat-outgoing";
export const CHAIN_FIP_SNAT = "cali-fip-snat";
/** The prefix of the hash comment Felix puts on each of its rules. */
export const HASH_PREFIX = "cali:";

/** What Felix's NAT-outgoing chain depends on (FelixConfiguration and detected features). */
export interface FelixNatSettings {
  readonly family: Family;
  /** The all-pools set id: "network-ip-pools" (>= v3.32) or "all-ipam-pools" (<= v3.31). */
  readonly allPoolsSetId?: typeof SET_ID_ALL_POOLS | typeof SET_ID_ALL_POOLS_LEGACY;
  /** environment.Features.MASQFullyRandom: iptables >= 1.6.2 and kernel >= 3.14. Default true. */
  readonly masqFullyRandom?: boolean;
  /** FelixConfiguration natOutgoingAddress: SNAT to it instead of MASQUERADE. */
  readonly natOutgoingAddress?: string;
  /** FelixConfiguration natPortRange. */
  readonly natPortRange?: { readonly min: number; readonly max: number };
  /** FelixConfiguration natOutgoingExclusions (default IPPoolsOnly). */
  readonly natOutgoingExclusions?: "IPPoolsOnly" | "IPPoolsAndHostIPs";
  /** FelixConfiguration iptablesNATOutgoingInterfaceFilter. */
  readonly interfaceFilter?: string;
}

/**
 * felix/generictables/rules.go RuleHashes: each hash chains the previous one (the first the
 * chain's name), so a rule's hash depends on its position and the rules before it.
 */
export function felixRuleHashes(chain: string, rendered: readonly string[]): string[] {
  let h = createHash("sha224").update(chain).digest();
  return rendered.map((r) => {
    h = createHash("sha224").update(h).update(r).digest();
    return h.toString("base64url").slice(0, 16);
  });
}

/** One rule as Felix builds it: its match fragments and its action fragment. */
interface FelixRule {
  readonly match: readonly string[];
  readonly action: string;
}

/** felix/iptables/renderer.go RenderAppend, with the hash comment (or "HASH" for hashing). */
function renderAppend(chain: string, r: FelixRule, hash: string): string {
  const comment = hash === "HASH" ? "HASH" : `-m comment --comment "${HASH_PREFIX}${hash}"`;
  return ["-A", chain, comment, ...r.match, r.action].filter((p) => p !== "").join(" ");
}

/** The chain's rules in Felix's own rendering, each with its hash comment. */
export function renderFelixChain(chain: string, rules: readonly FelixRule[]): string[] {
  const hashes = felixRuleHashes(
    chain,
    rules.map((r) => renderAppend(chain, r, "HASH")),
  );
  return rules.map((r, i) => renderAppend(chain, r, hashes[i] ?? ""));
}

function masqAction(s: FelixNatSettings, toPorts: string): string {
  const rand = (s.masqFullyRandom ?? true) ? " --random-fully" : "";
  if (s.natOutgoingAddress) {
    const to = toPorts ? `${s.natOutgoingAddress}:${toPorts}` : s.natOutgoingAddress;
    return `--jump SNAT --to-source ${to}${rand}`;
  }
  return toPorts ? `--jump MASQUERADE --to-ports ${toPorts}${rand}` : `--jump MASQUERADE${rand}`;
}

function natOutgoingRule(s: FelixNatSettings, protocol: string, action: string): FelixRule {
  const match = [
    `-m set --match-set ${calicoIpsetName(s.family, SET_ID_MASQ_POOLS)} src`,
    `-m set ! --match-set ${calicoIpsetName(s.family, s.allPoolsSetId ?? SET_ID_ALL_POOLS)} dst`,
  ];
  if (s.natOutgoingExclusions === "IPPoolsAndHostIPs") {
    match.push(`-m set ! --match-set ${calicoIpsetName(s.family, SET_ID_ALL_HOSTS)} dst`);
  }
  if (protocol) match.push(`-p ${protocol}`);
  if (s.interfaceFilter) match.push(`--out-interface ${s.interfaceFilter}`);
  return { match, action };
}

/**
 * `cali-nat-outgoing` as Felix writes it: empty while no pool has natOutgoing, else one
 * MASQUERADE (or SNAT) rule, or five with a natPortRange (tcp, udp with the ports, then the rest).
 *
 * @example
 * natOutgoingRules({ family: 4, allPoolsSetId: "all-ipam-pools" }, true)[0];
 * // -A cali-nat-outgoing -m comment --comment "cali:flqWnvo8yq4ULQLa" -m set --match-set
 * //   cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst --jump MASQUERADE --random-fully
 */
export function natOutgoingRules(s: FelixNatSettings, natOutgoingActive: boolean): string[] {
  if (!natOutgoingActive) return [];
  const plain = masqAction(s, "");
  const rules: FelixRule[] = [];
  if (s.natPortRange && s.natPortRange.max > 0) {
    const ported = masqAction(s, `${s.natPortRange.min}-${s.natPortRange.max}`);
    rules.push(
      natOutgoingRule(s, "tcp", ported),
      natOutgoingRule(s, "tcp", "--jump RETURN"),
      natOutgoingRule(s, "udp", ported),
      natOutgoingRule(s, "udp", "--jump RETURN"),
    );
  }
  rules.push(natOutgoingRule(s, "", plain));
  return renderFelixChain(CHAIN_NAT_OUTGOING, rules);
}

/** `cali-POSTROUTING` without tunnels or BPF: the floating-IP SNAT chain, then NAT outgoing. */
export function natPostroutingRules(): string[] {
  return renderFelixChain(CHAIN_NAT_POSTROUTING, [
    { match: [], action: `--jump ${CHAIN_FIP_SNAT}` },
    { match: [], action: `--jump ${CHAIN_NAT_OUTGOING}` },
  ]);
}

/** The hook Felix inserts at the top of the kernel's POSTROUTING (`cali:O3lYWMrLQYEMJtB5`). */
export function postroutingHookRule(): string {
  return (
    renderFelixChain("POSTROUTING", [
      { match: [], action: `--jump ${CHAIN_NAT_POSTROUTING}` },
    ])[0] ?? ""
  );
}

/** Felix's two NAT-outgoing sets for the pools of one family (masq_mgr.go OnUpdate). */
export function poolSets(
  pools: readonly CalicoIpPool[],
  family: Family,
  allPoolsSetId: typeof SET_ID_ALL_POOLS | typeof SET_ID_ALL_POOLS_LEGACY = SET_ID_ALL_POOLS,
): { readonly masq: string[]; readonly all: string[] } {
  const mine = pools.filter((p) => p.cidr?.family === family);
  return {
    masq: mine.filter((p) => p.natOutgoing).map((p) => p.cidrText),
    // LoadBalancer-only pools are left out from v3.32 (#12769)
    all: mine
      .filter((p) => allPoolsSetId === SET_ID_ALL_POOLS_LEGACY || !isLoadBalancerOnly(p))
      .map((p) => p.cidrText),
  };
}

/** `ipset restore` input creating Felix's sets with the pools' CIDRs (hash:net). */
export function ipsetRestoreText(
  pools: readonly CalicoIpPool[],
  family: Family,
  allPoolsSetId: typeof SET_ID_ALL_POOLS | typeof SET_ID_ALL_POOLS_LEGACY = SET_ID_ALL_POOLS,
): string {
  const { masq, all } = poolSets(pools, family, allPoolsSetId);
  const inet = family === 4 ? "inet" : "inet6";
  const lines: string[] = [];
  for (const [id, members] of [
    [allPoolsSetId, all],
    [SET_ID_MASQ_POOLS, masq],
  ] as const) {
    const name = calicoIpsetName(family, id);
    // felix/ipsets: hash:net with MaxSize from FelixConfiguration maxIpsetSize (default 1048576)
    lines.push(`create ${name} hash:net family ${inet} hashsize 1024 maxelem 1048576`);
    for (const m of members) lines.push(`add ${name} ${m}`);
  }
  return `${lines.join("\n")}\n`;
}

/** The nat table's Calico part as `iptables-restore --noflush` input (Felix's own rendering). */
export function calicoNatRestoreText(s: FelixNatSettings, natOutgoingActive: boolean): string {
  return [
    "*nat",
    `:${CHAIN_NAT_POSTROUTING} - [0:0]`,
    `:${CHAIN_FIP_SNAT} - [0:0]`,
    `:${CHAIN_NAT_OUTGOING} - [0:0]`,
    postroutingHookRule().replace("-A POSTROUTING", "-I POSTROUTING 1"),
    ...natPostroutingRules(),
    ...natOutgoingRules(s, natOutgoingActive),
    "COMMIT",
    "",
  ].join("\n");
}
