/**
 * @module agents/ip-masq-agent/flags — the agent's command-line flags as Go's `flag` package
 * parses them (`-x`, `--x`, `--x=v`, `--x v`, boolean forms, `--` and the first non-flag argument
 * ending the flags), and where to find them: the DaemonSet container's `command` and `args`.
 */
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";
import { goQuote } from "./go-quote.ts";
import { type PortInterval, parseIntervals } from "./intervals.ts";

/** The agent's own flags, with its defaults (`DEFAULT_AGENT_FLAGS`). */
export interface AgentFlags {
  readonly masqChain: string;
  readonly nomasqAllReservedRanges: boolean;
  readonly enableIpv6: boolean;
  readonly randomFully: boolean;
  /** The `--to-ports` text as given ("" when unset). */
  readonly toPorts: string;
}

export const DEFAULT_AGENT_FLAGS: AgentFlags = {
  masqChain: "IP-MASQ-AGENT",
  nomasqAllReservedRanges: false,
  enableIpv6: false,
  randomFully: true,
  toPorts: "",
};

const AGENT_FLAG_NAMES = {
  "masq-chain": "masqChain",
  "nomasq-all-reserved-ranges": "nomasqAllReservedRanges",
  "enable-ipv6": "enableIpv6",
  "random-fully": "randomFully",
  "to-ports": "toPorts",
} as const satisfies Record<string, keyof AgentFlags>;

type AgentFlagName = keyof typeof AGENT_FLAG_NAMES;
const BOOL_FLAGS: ReadonlySet<string> = new Set([
  "nomasq-all-reserved-ranges",
  "enable-ipv6",
  "random-fully",
]);

/** klog's flags, registered on the same flag set (klog.InitFlags): accepted, no effect here. */
const KLOG_BOOL_FLAGS: ReadonlySet<string> = new Set([
  "logtostderr",
  "alsologtostderr",
  "skip_headers",
  "skip_log_headers",
  "add_dir_header",
  "one_output",
  "legacy_stderr_threshold_behavior",
]);
const KLOG_VALUE_FLAGS: ReadonlySet<string> = new Set([
  "v",
  "vmodule",
  "log_dir",
  "log_file",
  "log_file_max_size",
  "stderrthreshold",
  "log_backtrace_at",
]);

/** strconv.ParseBool. */
export function goParseBool(s: string): boolean | undefined {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(s)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(s)) return false;
  return undefined;
}

/** The flags, and `fatal`: the text the agent exits with at startup, when it would not start. */
export interface AgentFlagsResult {
  readonly flags: AgentFlags;
  /** Which flags were set explicitly. */
  readonly set: readonly (keyof AgentFlags)[];
  /** Parsed `--to-ports` intervals (empty when unset). */
  readonly toPorts: readonly PortInterval[];
  /** The agent refuses to start with these arguments (Go flag error or a bad --to-ports). */
  readonly fatal?: string;
}

/**
 * Parses the agent's arguments (without the program name) as Go's flag package does.
 * Unknown flags are fatal for the agent (it exits at startup); they are reported as errors.
 * @example agentFlagsFromArgs(["--masq-chain=IP-MASQ", "--nomasq-all-reserved-ranges"])
 */
export function agentFlagsFromArgs(
  args: readonly string[],
  source?: SourceRef,
): Parsed<AgentFlagsResult> {
  const diagnostics: Diagnostic[] = [];
  const flags: { -readonly [K in keyof AgentFlags]: AgentFlags[K] } = { ...DEFAULT_AGENT_FLAGS };
  const set: (keyof AgentFlags)[] = [];
  let fatal: string | undefined;
  const diag = (code: string, severity: Diagnostic["severity"], message: string): Diagnostic =>
    source ? { code, severity, message, source } : { code, severity, message };

  const r: FlagReading = { rest: [...args], flags, set, fatal: undefined, diagnostics, diag };
  while (r.rest.length > 0 && r.fatal === undefined) {
    if (!nextFlag(r)) break;
  }
  fatal = r.fatal;

  let toPorts: PortInterval[] = [];
  if (fatal === undefined && flags.toPorts !== "") {
    const r = parseIntervals(flags.toPorts);
    if ("error" in r) fatal = `Invalid --to-ports flag ${goQuote(flags.toPorts)}: ${r.error}`;
    else toPorts = r.intervals;
  }
  if (fatal !== undefined) {
    diagnostics.push(
      diag("IPMASQ_FLAG_FATAL", "error", `the agent exits at startup with: ${fatal}`),
    );
  }
  const value: AgentFlagsResult =
    fatal === undefined ? { flags, set, toPorts } : { flags, set, toPorts, fatal };
  return { value, diagnostics };
}

/** Reading the agent's arguments: what is left, what is set, and the fatal error if any. */
interface FlagReading {
  rest: string[];
  readonly flags: { -readonly [K in keyof AgentFlags]: AgentFlags[K] };
  readonly set: (keyof AgentFlags)[];
  fatal: string | undefined;
  readonly diagnostics: Diagnostic[];
  readonly diag: (code: string, severity: Diagnostic["severity"], message: string) => Diagnostic;
}

/** Reads the flag at the head of `r.rest` (and its value): false when flag parsing stops. */
function nextFlag(r: FlagReading): boolean {
  const s = r.rest[0]!;
  if (s.length < 2 || s[0] !== "-") {
    r.diagnostics.push(
      r.diag(
        "IPMASQ_FLAG_STOP",
        "warning",
        `argument ${goQuote(s)} is not a flag: Go's flag parsing stops there, so the agent ignores it and every argument after it (${r.rest.length - 1} more)`,
      ),
    );
    return false;
  }
  let minuses = 1;
  if (s[1] === "-") {
    minuses = 2;
    if (s.length === 2) {
      r.rest = r.rest.slice(1);
      if (r.rest.length > 0) {
        r.diagnostics.push(
          r.diag(
            "IPMASQ_FLAG_STOP",
            "warning",
            `"--" ends the flags: the agent ignores the ${r.rest.length} argument(s) after it`,
          ),
        );
      }
      return false;
    }
  }
  let name = s.slice(minuses);
  if (name.length === 0 || name[0] === "-" || name[0] === "=") {
    r.fatal = `bad flag syntax: ${s}`;
    return false;
  }
  r.rest = r.rest.slice(1);
  let value: string | undefined;
  const eq = name.indexOf("=", 1);
  if (eq > 0) {
    value = name.slice(eq + 1);
    name = name.slice(0, eq);
  }
  const known = (AGENT_FLAG_NAMES as Record<string, keyof AgentFlags>)[name];
  const isBool = BOOL_FLAGS.has(name) || KLOG_BOOL_FLAGS.has(name);
  if (!known && !isBool && !KLOG_VALUE_FLAGS.has(name)) {
    r.fatal =
      name === "help" || name === "h"
        ? `-${name}: the agent prints its usage and exits`
        : `flag provided but not defined: -${name}`;
    return false;
  }
  if (isBool) {
    const text = value ?? "true";
    const b = goParseBool(text);
    if (b === undefined) {
      r.fatal = `invalid boolean value ${goQuote(text)} for -${name}: parse error`;
      return false;
    }
    if (known) {
      (r.flags as Record<string, unknown>)[known] = b;
      r.set.push(known);
    }
    return true;
  }
  if (value === undefined) {
    if (r.rest.length === 0) {
      r.fatal = `flag needs an argument: -${name}`;
      return false;
    }
    value = r.rest[0]!;
    r.rest = r.rest.slice(1);
  }
  if (known) {
    (r.flags as Record<string, unknown>)[known] = value;
    r.set.push(known);
  } else if (name === "v" && !/^[+-]?[0-9]+$/.test(value)) {
    // klog's Level.Set: strconv.ParseInt(value, 10, 32)
    r.fatal = `invalid value ${goQuote(value)} for flag -v: strconv.ParseInt: parsing ${goQuote(value)}: invalid syntax`;
  }
  return true;
}

/** Is `name` one of the agent's own flags (not klog's)? */
export function isAgentFlagName(name: string): name is AgentFlagName {
  return Object.hasOwn(AGENT_FLAG_NAMES, name);
}
