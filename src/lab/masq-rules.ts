/**
 * @module lab/masq-rules — installs ip-masq-agent's rules in a lab node the way the agent does
 * (agents/ip-masq-agent renders them): EnsureChain, EnsureRule for the POSTROUTING jump
 * (`iptables -C`, then `-A` with argv), then `iptables-restore --noflush` of the chain. The
 * config goes through the agent's own decoding and validation, so a rejected config keeps the
 * previous rules exactly as the agent would.
 */
import {
  type ConfigError,
  DEFAULT_NON_MASQ_CIDRS,
  defaultMasqConfig,
  type MasqConfig,
  syncMasqConfig,
} from "../agents/ip-masq-agent/config.ts";
import { DEFAULT_AGENT_FLAGS } from "../agents/ip-masq-agent/flags.ts";
import { agentChain, agentRestoreInput, jumpComment } from "../agents/ip-masq-agent/rules.ts";
import { mustExec as must, type Namespace } from "./netns.ts";

export const AGENT_DEFAULT_NON_MASQUERADE: readonly string[] = DEFAULT_NON_MASQ_CIDRS;

/** The agent's config file for a list, as a user would write it in the ConfigMap. */
export function renderAgentConfig(cidrs: readonly string[]): string {
  return `nonMasqueradeCIDRs:\n${cidrs.map((c) => `  - ${c}\n`).join("")}masqLinkLocal: false\nresyncInterval: 60s\n`;
}

/**
 * One agent config cycle from the defaults: the config the agent runs with and, when it rejects
 * the file, its error (it then keeps `previous`).
 */
export function agentConfigFrom(
  text: string,
  enableIpv6: boolean,
  previous: MasqConfig = defaultMasqConfig(),
): { config: MasqConfig; error?: ConfigError } {
  const r = syncMasqConfig(
    previous,
    { present: true, content: text },
    { nomasqAllReservedRanges: false, enableIpv6 },
  );
  return r.error ? { config: r.config, error: r.error } : { config: r.config };
}

/** Runs one agent sync for `family` inside `ns` (nothing for IPv6 unless enableIpv6). */
export async function installAgentRules(
  ns: Namespace,
  config: MasqConfig,
  family: 4 | 6,
  enableIpv6: boolean,
): Promise<void> {
  const flags = { ...DEFAULT_AGENT_FLAGS, enableIpv6 };
  const chain = agentChain(config, family, { flags });
  const input = agentRestoreInput(config, family, { flags });
  if (!chain || input === undefined) return;
  const ipt = family === 4 ? "iptables" : "ip6tables";
  // EnsureChain: -N fails harmlessly when the chain exists
  await ns.exec([ipt, "-w", "-t", "nat", "-N", chain.chain]);
  const jump = [
    "POSTROUTING",
    "-m",
    "comment",
    "--comment",
    jumpComment(chain.chain),
    "-m",
    "addrtype",
    "!",
    "--dst-type",
    "LOCAL",
    "-j",
    chain.chain,
  ];
  const check = await ns.exec([ipt, "-w", "-t", "nat", "-C", ...jump]);
  if (check.code !== 0) await must(ns, [ipt, "-w", "-t", "nat", "-A", ...jump]);
  await must(ns, [`${ipt}-restore`, "--noflush"], input);
}

/**
 * kube-proxy's (iptables mode) nat scaffolding on a node: service portals in PREROUTING/OUTPUT,
 * and the mark-based KUBE-POSTROUTING masquerade it inserts before any agent rule. With no
 * Services the KUBE-SERVICES chain is empty; only packets marked 0x4000 (service traffic needing
 * SNAT) are masqueraded, so pod egress is left to ip-masq-agent.
 */
export const KUBE_PROXY_RESTORE = [
  "*nat",
  ":KUBE-SERVICES - [0:0]",
  ":KUBE-POSTROUTING - [0:0]",
  ":KUBE-MARK-MASQ - [0:0]",
  '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
  '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
  "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
  "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
  "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
  '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
  "COMMIT",
  "",
].join("\n");
