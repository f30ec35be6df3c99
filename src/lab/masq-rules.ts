/**
 * @module lab/masq-rules — the nat rules ip-masq-agent writes for a config, as iptables-restore
 * input for a lab node (reference: /work/shared/reference/ip-masq-agent.md §1.5: RETURN for
 * 169.254.0.0/16 unless masqLinkLocal, one RETURN per non-masquerade CIDR in list order, then
 * MASQUERADE last; the POSTROUTING jump skips LOCAL destinations). Pure.
 */

/** The agent's shipped default list (RFC 1918). */
export const AGENT_DEFAULT_NON_MASQUERADE = [
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16",
] as const;

export const AGENT_CHAIN = "IP-MASQ-AGENT";
const JUMP_COMMENT = `ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom ${AGENT_CHAIN} chain`;
const RETURN_COMMENT = "ip-masq-agent: local traffic is not subject to MASQUERADE";
const MASQ_COMMENT =
  "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)";

export interface MasqRuleConfig {
  readonly nonMasqueradeCIDRs: readonly string[];
  readonly masqLinkLocal: boolean;
}

/** iptables-restore input (nat table) installing the agent's jump and chain for `family`. */
export function renderAgentRestore(cfg: MasqRuleConfig, family: 4 | 6 = 4): string {
  const isV6 = (c: string) => c.includes(":");
  const cidrs = cfg.nonMasqueradeCIDRs.filter((c) => (family === 6 ? isV6(c) : !isV6(c)));
  const linkLocal = family === 6 ? "fe80::/10" : "169.254.0.0/16";
  const lines = [
    "*nat",
    `:${AGENT_CHAIN} - [0:0]`,
    `-A POSTROUTING -m comment --comment "${JUMP_COMMENT}" -m addrtype ! --dst-type LOCAL -j ${AGENT_CHAIN}`,
  ];
  const ret = (d: string) =>
    `-A ${AGENT_CHAIN} -d ${d} -m comment --comment "${RETURN_COMMENT}" -j RETURN`;
  if (!cfg.masqLinkLocal) lines.push(ret(linkLocal));
  for (const c of cidrs) lines.push(ret(c));
  lines.push(
    `-A ${AGENT_CHAIN} -m comment --comment "${MASQ_COMMENT}" -j MASQUERADE --random-fully`,
  );
  lines.push("COMMIT", "");
  return lines.join("\n");
}

/** The agent's config file for a list, as a user would write it in the ConfigMap. */
export function renderAgentConfig(cidrs: readonly string[]): string {
  return `nonMasqueradeCIDRs:\n${cidrs.map((c) => `  - ${c}\n`).join("")}masqLinkLocal: false\nresyncInterval: 60s\n`;
}
