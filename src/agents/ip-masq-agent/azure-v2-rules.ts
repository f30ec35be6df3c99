/**
 * @module agents/ip-masq-agent/azure-v2-rules — the rules Azure ip-masq-agent-v2 (v0.1.15) writes:
 * the upstream agent's chain (`IP-MASQ-AGENT`, or `--masq-chain`), comments and order (link-local
 * RETURN unless masqLinkLocal, one RETURN per CIDR of the family, then MASQUERADE), with two
 * differences read from its source: MASQUERADE has no `--random-fully`, and the POSTROUTING
 * jump's comment carries literal double quotes (postRoutingMasqChainCommentFormat), so
 * iptables-save prints it as `"\"ip-masq-agent: ensure nat POSTROUTING … chain\""`. The order of
 * the CIDR RETURNs follows Go map iteration (mergeCIDRs), so it changes between syncs.
 */
import type { MasqConfig } from "./config.ts";
import type { AgentFlags } from "./flags.ts";
import { type AgentChain, agentChain, jumpComment, type RuleFamily } from "./rules.ts";

/** The jump's comment as the fork passes it to `iptables -A` (quotes included). */
export function azureV2JumpComment(chain: string): string {
  return `"${jumpComment(chain)}"`;
}

/** The fork's chain for one family; undefined for IPv6 without --enable-ipv6. */
export function azureV2Chain(
  config: MasqConfig,
  family: RuleFamily,
  flags: AgentFlags,
): AgentChain | undefined {
  const c = agentChain(config, family, {
    flags: { ...flags, randomFully: false, toPorts: "" },
    hasRandomFully: false,
  });
  if (!c) return undefined;
  const comment = azureV2JumpComment(c.chain);
  const saved = comment.replace(/"/g, '\\"');
  return {
    ...c,
    jump: {
      ...c.jump,
      written: `-A POSTROUTING -m comment --comment ${comment} -m addrtype ! --dst-type LOCAL -j ${c.chain}`,
      saved: `-A POSTROUTING -m comment --comment "${saved}" -m addrtype ! --dst-type LOCAL -j ${c.chain}`,
    },
  };
}
