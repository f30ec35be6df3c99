/**
 * @module agents/ip-masq-agent/azure-v2-flags — Azure ip-masq-agent-v2's command-line flags
 * (v0.1.15): `--masq-chain`, `--nomasq-all-reserved-ranges`, `--enable-ipv6`, `--resync-interval`
 * (an int, seconds, default 60) and klog's flags. It has no `--random-fully` and no `--to-ports`:
 * its MASQUERADE rule is plain, and either flag stops it at startup.
 */
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { type AgentFlagsResult, agentFlagsFromArgs } from "./flags.ts";
import { goQuote } from "./go-quote.ts";

export interface AzureV2Flags extends AgentFlagsResult {
  readonly resyncIntervalSeconds: number;
}

const NOT_IN_FORK = new Set(["random-fully", "to-ports"]);

/**
 * Parses the fork's arguments as Go's flag package does.
 * @example azureV2FlagsFromArgs(["--v=2", "--enable-ipv6"]).value.flags.enableIpv6 // true
 */
export function azureV2FlagsFromArgs(
  args: readonly string[],
  source?: SourceRef,
): Parsed<AzureV2Flags> {
  const rest: string[] = [];
  let resync = 60;
  let fatal: string | undefined;
  for (let i = 0; i < args.length && fatal === undefined; i++) {
    const a = args[i]!;
    const m = /^--?([^=]+)(?:=(.*))?$/.exec(a);
    const name = m?.[1];
    if (a === "--" || !m || name === undefined) {
      rest.push(...args.slice(i));
      break;
    }
    if (NOT_IN_FORK.has(name)) fatal = `flag provided but not defined: -${name}`;
    else if (name === "version") continue;
    else if (name === "resync-interval") {
      let value = m[2];
      if (value === undefined) value = args[++i];
      if (value === undefined) fatal = "flag needs an argument: -resync-interval";
      else if (!/^[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$/.test(value))
        fatal = `invalid value ${goQuote(value)} for flag -resync-interval: parse error`;
      else
        resync = Number.parseInt(
          value,
          /^[+-]?0[xX]/.test(value) ? 16 : /^[+-]?0[0-7]/.test(value) ? 8 : 10,
        );
    } else rest.push(a);
  }
  const r = agentFlagsFromArgs(rest, source);
  const diagnostics: Diagnostic[] = [...r.diagnostics];
  if (fatal !== undefined) {
    diagnostics.push({
      code: "IPMASQ_FLAG_FATAL",
      severity: "error",
      message: `the agent exits at startup with: ${fatal}`,
      ...(source ? { source } : {}),
    });
  }
  const flags = { ...r.value.flags, randomFully: false, toPorts: "" };
  const f = fatal ?? r.value.fatal;
  return {
    value: {
      ...r.value,
      flags,
      toPorts: [],
      resyncIntervalSeconds: resync,
      ...(f !== undefined ? { fatal: f } : {}),
    },
    diagnostics,
  };
}
