/**
 * @module agents/ip-masq-agent/rules — the rules the agent writes each cycle (`syncMasqRules`,
 * `syncMasqRulesIPv6`): the iptables-restore input byte for byte, the upstream test fake's
 * rendering, and the same rules as a real `iptables-save` prints them (for drift checks).
 */
import { type Cidr, formatCidr, tryParseIp } from "../../net/cidr.ts";
import { LINK_LOCAL_V4, LINK_LOCAL_V6, type MasqConfig, type NonMasqEntry } from "./config.ts";
import type { AgentFlags } from "./flags.ts";
import { goParseCidr } from "./go-net.ts";
import { formatInterval, intervalSize, intervalsSize, type PortInterval } from "./intervals.ts";

export const RETURN_COMMENT = "ip-masq-agent: local traffic is not subject to MASQUERADE";
export const MASQUERADE_COMMENT =
  "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)";
/** The POSTROUTING jump's comment for a chain. */
export function jumpComment(chain: string): string {
  return `ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom ${chain} chain`;
}
/** Protocols that get `--to-ports` rules, in the agent's order. */
export const TO_PORTS_PROTOCOLS = ["tcp", "udp", "sctp"] as const;

export type RuleFamily = 4 | 6;

/** How the rules are produced: the agent's flags and what the node's iptables supports. */
export interface RuleOptions {
  readonly flags: AgentFlags;
  /** Parsed `--to-ports` (see agentFlagsFromArgs); empty when unset. */
  readonly toPorts?: readonly PortInterval[];
  /** The agent's iptables is >= 1.6.2 (HasRandomFully). Default true. */
  readonly hasRandomFully?: boolean;
}

/** One rule of the agent's chain, in both renderings. */
export interface AgentRule {
  readonly kind: "jump" | "return" | "masquerade";
  readonly chain: string;
  /** As the agent writes it to iptables-restore (or passes to `iptables -A`, for the jump). */
  readonly written: string;
  /** As a real `iptables-save` prints it after loading. */
  readonly saved: string;
  /** For RETURN rules of nonMasqueradeCIDRs: the config entry (with its SourceRef). */
  readonly entry?: NonMasqEntry;
  /** For RETURN rules: the destination as written. */
  readonly destination?: string;
}

/** The chain the agent maintains in one family, in order, plus its POSTROUTING jump. */
export interface AgentChain {
  readonly family: RuleFamily;
  readonly chain: string;
  readonly jump: AgentRule;
  readonly rules: readonly AgentRule[];
}

/** strconv.FormatFloat(x, 'f', -1, 64): shortest round-trip digits, never an exponent. */
export function goFormatFloatF(x: number): string {
  const s = String(x);
  const m = /^(-?)(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(s);
  if (!m) return s;
  const [, sign, int, frac = "", expText] = m;
  const digits = int! + frac;
  const point = int!.length + Number(expText);
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** libxt_statistic: the probability is stored as round(p·2³¹) and saved with %.11f. */
export function savedProbability(p: number): string {
  return (Math.round(p * 0x80000000) / 0x80000000).toFixed(11);
}

function cidrFamily(text: string): RuleFamily | undefined {
  const r = goParseCidr(text);
  return "ok" in r ? r.ok.agentFamily : undefined;
}

/**
 * The prefix length iptables reads from the text after `/`: xtables parses it with strtoul base 0,
 * so a leading zero means octal (`/010` is /8, where Go's net.ParseCIDR, and so the agent's
 * validation, read /10) and `/08` is refused. Undefined when iptables refuses it.
 */
export function iptablesPrefix(maskText: string, family: RuleFamily): number | undefined {
  let v: number;
  if (/^0[0-7]*$/.test(maskText)) v = Number.parseInt(maskText, 8);
  else if (/^[1-9][0-9]*$/.test(maskText)) v = Number(maskText);
  else return undefined;
  return v <= (family === 4 ? 32 : 128) ? v : undefined;
}

/** The destination as iptables installs it, or why iptables-restore refuses the text. */
export function installedDestination(
  text: string,
  family: RuleFamily,
): { cidr: Cidr } | { refused: string } {
  const r = goParseCidr(text);
  const slash = text.indexOf("/");
  const maskText = slash < 0 ? "" : text.slice(slash + 1);
  if (!("ok" in r)) return { refused: `host/network \`${text}' not found` };
  if (r.ok.cidr.family !== family) {
    // an IPv4-mapped IPv6 block filed under IPv4 by the agent
    return { refused: `invalid mask \`${maskText}' specified` };
  }
  const prefix = iptablesPrefix(maskText, family);
  if (prefix === undefined) return { refused: `invalid mask \`${maskText}' specified` };
  const bits = BigInt(family === 4 ? 32 : 128);
  const host = (1n << (bits - BigInt(prefix))) - 1n;
  const all = (1n << bits) - 1n;
  // iptables masks the address as written with the prefix it read
  const start = parseAddrValue(text.slice(0, slash), family) & (all ^ host);
  return { cidr: { family, start, end: start | host, prefix } };
}

function parseAddrValue(text: string, family: RuleFamily): bigint {
  const ip = tryParseIp(text);
  return ip && ip.family === family ? ip.value : 0n;
}

/** How iptables-save prints a destination: the installed network/prefix, omitted for /0. */
function savedDestination(text: string, family: RuleFamily): string | undefined {
  const d = installedDestination(text, family);
  if (!("cidr" in d)) return text;
  if (d.cidr.prefix === 0) return undefined;
  return formatCidr(d.cidr);
}

/**
 * The agent's rules for one family, or undefined for IPv6 when `--enable-ipv6` is off (the agent
 * then never touches ip6tables).
 */
export function agentChain(
  config: MasqConfig,
  family: RuleFamily,
  options: RuleOptions,
): AgentChain | undefined {
  const { flags } = options;
  if (family === 6 && !flags.enableIpv6) return undefined;
  const chain = flags.masqChain;
  const randomFully = (options.hasRandomFully ?? true) && flags.randomFully;
  const toPorts = options.toPorts ?? [];
  const rules: AgentRule[] = [];

  const returnRule = (destination: string, entry?: NonMasqEntry): AgentRule => {
    const d = savedDestination(destination, family);
    return {
      kind: "return",
      chain,
      written: `-A ${chain} -m comment --comment "${RETURN_COMMENT}" -d ${destination} -j RETURN`,
      saved: `-A ${chain}${d === undefined ? "" : ` -d ${d}`} -m comment --comment "${RETURN_COMMENT}" -j RETURN`,
      destination,
      ...(entry ? { entry } : {}),
    };
  };

  // link-local first, unless the config masquerades it
  if (family === 4 ? !config.masqLinkLocal : !config.masqLinkLocalIPv6) {
    rules.push(returnRule(family === 4 ? LINK_LOCAL_V4 : LINK_LOCAL_V6));
  }
  for (const entry of config.nonMasqueradeCIDRs ?? []) {
    // isIPv6CIDR decides the table; an unparsable entry never gets here (validation)
    if ((cidrFamily(entry.text) ?? 6) === family) rules.push(returnRule(entry.text, entry));
  }

  const rf = randomFully ? " --random-fully" : "";
  const base = `-A ${chain} -m comment --comment "${MASQUERADE_COMMENT}" -j MASQUERADE${rf}`;
  for (const protocol of TO_PORTS_PROTOCOLS) {
    let size = intervalsSize(toPorts);
    for (const i of toPorts) {
      const s = intervalSize(i);
      let statisticWritten = "";
      let statisticSaved = "";
      if (size !== s) {
        const p = s / size;
        statisticWritten = ` -m statistic --mode random --probability ${goFormatFloatF(p)}`;
        statisticSaved = ` -m statistic --mode random --probability ${savedProbability(p)}`;
      }
      size -= s;
      const ports = formatInterval(i);
      rules.push({
        kind: "masquerade",
        chain,
        written: `${base} -p ${protocol}${statisticWritten} --to-ports ${ports}`,
        saved: `-A ${chain} -p ${protocol} -m comment --comment "${MASQUERADE_COMMENT}"${statisticSaved} -j MASQUERADE --to-ports ${ports}${rf}`,
      });
    }
  }
  rules.push({
    kind: "masquerade",
    chain,
    written: base,
    saved: `-A ${chain} -m comment --comment "${MASQUERADE_COMMENT}" -j MASQUERADE${rf}`,
  });

  const comment = jumpComment(chain);
  const jump: AgentRule = {
    kind: "jump",
    chain: "POSTROUTING",
    // EnsureRule passes argv to `iptables -A`, so the comment is one argument, unquoted
    written: `-A POSTROUTING -m comment --comment ${comment} -m addrtype ! --dst-type LOCAL -j ${chain}`,
    saved: `-A POSTROUTING -m comment --comment "${comment}" -m addrtype ! --dst-type LOCAL -j ${chain}`,
  };
  return { family, chain, jump, rules };
}

/** The chain's rules as the agent restores them, one a line. */
function restoredRules(c: AgentChain): string {
  return c.rules.map((r) => `${r.written}\n`).join("");
}

/**
 * The exact iptables-restore input the agent writes (run with `--noflush`): `*nat`, the chain
 * line (which flushes only that chain), the rules, `COMMIT`. Undefined for IPv6 when disabled.
 */
export function agentRestoreInput(
  config: MasqConfig,
  family: RuleFamily,
  options: RuleOptions,
): string | undefined {
  const c = agentChain(config, family, options);
  if (!c) return undefined;
  return `*nat\n:${c.chain} - [0:0]\n${restoredRules(c)}COMMIT\n`;
}

/**
 * What the upstream unit tests' fake iptables saves after one sync: both chains as
 * `:NAME - [0:0]`, the jump verbatim from argv, then the restored rules verbatim.
 */
export function agentFakeSave(
  config: MasqConfig,
  family: RuleFamily,
  options: RuleOptions,
): string | undefined {
  const c = agentChain(config, family, options);
  if (!c) return undefined;
  return (
    `*nat\n:POSTROUTING - [0:0]\n:${c.chain} - [0:0]\n${c.jump.written}\n` +
    `${restoredRules(c)}COMMIT\n`
  );
}

/** The chain's lines as a real iptables-save prints them: chain line, jump, then the rules. */
export function agentSavedLines(chain: AgentChain): string[] {
  return [`:${chain.chain} - [0:0]`, chain.jump.saved, ...chain.rules.map((r) => r.saved)];
}

/**
 * The rules a real `iptables-save` shows for the agent's chain and jump, given the config and
 * flags: what {@link compareAgentChain} compares the installed rules with.
 */
export function expectedAgentChain(
  config: MasqConfig,
  flags: AgentFlags,
  options: {
    readonly family?: RuleFamily;
    readonly toPorts?: readonly PortInterval[];
    readonly hasRandomFully?: boolean;
  } = {},
): AgentChain | undefined {
  return agentChain(config, options.family ?? 4, {
    flags,
    ...(options.toPorts ? { toPorts: options.toPorts } : {}),
    ...(options.hasRandomFully === undefined ? {} : { hasRandomFully: options.hasRandomFully }),
  });
}

/** The longest chain name iptables accepts (XT_EXTENSION_MAXNAMELEN - 1). */
const MAX_CHAIN_NAME = 28;

/** A line of the agent's restore input that the real iptables-restore refuses. */
export interface RestoreProblem {
  /** 1-based line of the restore input. */
  readonly line: number;
  /** iptables-restore's own complaint. */
  readonly message: string;
  readonly rule?: AgentRule;
}

/**
 * Where the real `iptables-restore` would refuse what the agent writes, although the agent
 * accepted the config: a prefix with a leading zero that is not octal (`/08`), an IPv4-mapped
 * IPv6 block filed under IPv4, a port above 65535 in `--to-ports`, a chain name over 28
 * characters. The agent then logs "Error syncing masquerade rules" every cycle and changes
 * nothing: the rules installed before stay. (A valid octal prefix such as `/010` loads, as /8:
 * see `saved` of that rule.)
 */
export function restoreProblems(chain: AgentChain): RestoreProblem[] {
  const out: RestoreProblem[] = [];
  if (chain.chain.length > MAX_CHAIN_NAME || chain.chain.length === 0) {
    out.push({
      line: 2,
      message: `chain name \`${chain.chain}' too long (must be under 29 chars)`,
    });
  }
  chain.rules.forEach((rule, i) => {
    const line = i + 3;
    if (rule.kind === "return" && rule.destination !== undefined) {
      const d = installedDestination(rule.destination, chain.family);
      if ("refused" in d) out.push({ line, message: d.refused, rule });
    }
    const ports = / --to-ports (\S+)/.exec(rule.written)?.[1];
    if (ports !== undefined) {
      for (const p of ports.split("-")) {
        if (Number(p) > 65535) out.push({ line, message: `Port \`${p}' not valid`, rule });
      }
    }
  });
  return out;
}
