/**
 * @module evidence/probes — client-side probe transcripts (`probes/*.txt` as a person pastes them,
 * and the JSON `podpath probe -o json` writes): each command with its tool, target, result, timings
 * and the line that decided it. Per-tool output readers live in `probe-*.ts`.
 */

import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { type Ip, tryParseIp } from "../net/cidr.ts";
import type { Route } from "./ip-route.ts";
import { readDig, readHost, readNslookup } from "./probe-dns.ts";
import { readResolve, readTcpConnect } from "./probe-native.ts";
import { readPing } from "./probe-ping.ts";
import { classifyLine, type PodExec, splitWords, stripComment, toolOf } from "./probe-prompt.ts";
import { readIpRouteTranscript, readTraceroute } from "./probe-route.ts";
import { readCurl, readNc } from "./probe-tcp.ts";
import { readTelnet } from "./probe-telnet.ts";
import { readMtr, readTracepath } from "./probe-trace.ts";
import { readWget } from "./probe-wget.ts";

export type { PodExec };
export { splitWords, toolOf };

export const PROBE_TOOLS = [
  "ping",
  "dig",
  "nslookup",
  "host",
  "curl",
  "wget",
  "nc",
  "telnet",
  "traceroute",
  "tracepath",
  "mtr",
  "ip-route",
  "tcp-connect",
  "resolve",
  "unknown",
] as const;
export type ProbeTool = (typeof PROBE_TOOLS)[number];

export const PROBE_RESULTS = [
  "replies",
  "timeout",
  "unreachable",
  "refused",
  "nxdomain",
  "no-server",
  "ok",
  "error",
] as const;
/**
 * What one command showed. `replies`: echo replies came back; `ok`: a name resolved, a TCP
 * connection opened or an HTTP status arrived; `timeout`: silence; `unreachable`: an ICMP error
 * or a local "no route"; `refused`: a TCP RST / ICMP port unreachable; `nxdomain`: the server
 * answered that the name does not exist (or SERVFAIL: `status` says which); `no-server`: no DNS
 * server answered; `error`: the output did not show any of these.
 */
export type ProbeResult = (typeof PROBE_RESULTS)[number];

/** Which hop of the outward walk a probe tests (DESIGN.md case B). */
export const PROBE_ROLES = ["peer", "pod-ip", "service-ip", "public", "name"] as const;
export type ProbeRole = (typeof PROBE_ROLES)[number];

export interface TraceHop {
  readonly hop: number;
  readonly address?: Ip;
  readonly timingsMs: readonly number[];
  /** True when every probe of the hop was `*`. */
  readonly silent: boolean;
}

export interface RouteLine {
  /** As iproute2 prints it: `default`, `10.96.0.10`, `10.0.0.0/8`, `unreachable 10.20.0.0/16`. */
  readonly destination: string;
  readonly via?: Ip;
  readonly dev?: string;
  /** The whole route as evidence/ip-route reads it (source address, table, metric, flags...). */
  readonly route?: Route;
  readonly source: SourceRef;
}

export interface ProbeCommand {
  readonly tool: ProbeTool;
  /** The command line as typed, without the prompt (and without a trailing `# comment`). */
  readonly command: string;
  /** The pod the command ran in, when it was typed behind `kubectl exec POD --`. */
  readonly ranIn?: PodExec;
  /** The target as typed (address or name); absent for `ip route`. */
  readonly target?: string;
  /** The target as an address, when it is one (or the tool printed the address it resolved). */
  readonly targetIp?: Ip;
  readonly port?: number;
  /** The hop this command tests, when the transcript says so (`$ ping 10.8.0.1  # peer`). */
  readonly role?: ProbeRole;
  readonly result: ProbeResult;
  /** Round-trip or query times in milliseconds, in the order printed. */
  readonly timingsMs: readonly number[];
  readonly sent?: number;
  readonly received?: number;
  /** The address that answered: the echo replier, or the router that sent an ICMP error. */
  readonly replyFrom?: Ip;
  /** DNS: the server asked, the addresses in the answer, and the rcode (NOERROR, SERVFAIL …). */
  readonly dnsServer?: Ip;
  readonly answers?: readonly Ip[];
  /** DNS rcode (`NOERROR`, `NXDOMAIN`, `SERVFAIL`) or HTTP status (`200`). */
  readonly status?: string;
  readonly hops?: readonly TraceHop[];
  readonly routes?: readonly RouteLine[];
  /** The command line. */
  readonly source: SourceRef;
  /** The output line that decided `result` (the command line when the output said nothing). */
  readonly resultSource: SourceRef;
}

export interface ProbeTranscript {
  readonly file: string;
  readonly client?: { readonly name: string; readonly vpnAddress?: Ip; readonly source: SourceRef };
  readonly commands: readonly ProbeCommand[];
}

/** One output line with its 1-based number in the file. */
export interface OutputLine {
  readonly text: string;
  readonly line: number;
}

/** What a per-tool reader learns from a command's output. */
export type ToolReading = Omit<ProbeCommand, "tool" | "command" | "source" | "role" | "ranIn">;

/** The reader's view of a command line. */
export interface CommandLine {
  readonly file: string;
  readonly line: number;
  readonly text: string;
  /** Words after the program name, shell-split. */
  readonly args: readonly string[];
}

export type ToolReader = (
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
) => ToolReading;

const READERS: { [K in ProbeTool]?: ToolReader } = {
  ping: readPing,
  dig: readDig,
  nslookup: readNslookup,
  host: readHost,
  curl: readCurl,
  wget: readWget,
  nc: readNc,
  telnet: readTelnet,
  traceroute: readTraceroute,
  tracepath: readTracepath,
  mtr: readMtr,
  "ip-route": readIpRouteTranscript,
  "tcp-connect": readTcpConnect,
  resolve: readResolve,
};

const HEADER = /^#\s*client:\s*(\S+)(?:\s+vpn-address:\s*(\S+))?/;
const ROLE_COMMENT = /\s#\s*(?:role:\s*)?(peer|pod-ip|service-ip|public|name)\b.*$/;

/** At most this many skipped-line diagnostics per transcript; then one that counts the rest. */
const MAX_SKIPPED_NOTES = 10;

/**
 * Reads a transcript. A command starts after a shell prompt (`$ `, `# `, `/ # `, `~ $ `,
 * `user@host:~$ `, `[user@host dir]$ `, `bash-5.1# `, `host% `, `➜  dir `, `PS C:\> `,
 * `C:\Users\x>`) or is a probe typed at the start of a line (`ping 10.8.0.1`); `sudo`,
 * `kubectl exec POD -- …` and `sh -c '…'` around it are looked through. Never throws: unknown
 * commands and outputs that show no result become `result: "error"` with a diagnostic naming the
 * line, and lines that look like a prompt but hold no command are named in an info diagnostic.
 * @example parseProbeTranscript("$ ping -c 1 10.8.0.1\n64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=1 ms\n", "probes/laptop.txt")
 */
export function parseProbeTranscript(text: string, file: string): Parsed<ProbeTranscript> {
  const diagnostics: Diagnostic[] = [];
  const lines = text.split(/\r?\n/);
  let client: ProbeTranscript["client"];
  const blocks: { cmd: OutputLine & { raw: string }; output: OutputLine[] }[] = [];
  const skipped: SourceRef[] = [];
  let preamble = 0;
  lines.forEach((raw, idx) => {
    const line = idx + 1;
    const h = blocks.length === 0 && client === undefined ? HEADER.exec(raw) : null;
    if (h) {
      const vpn = h[2] === undefined ? undefined : tryParseIp(h[2]);
      if (h[2] !== undefined && vpn === undefined) {
        diagnostics.push({
          code: "PROBE_HEADER",
          severity: "warning",
          message: `vpn-address "${h[2]}" is not an IP address; expected e.g. "# client: laptop vpn-address: 10.8.0.6"`,
          source: { file, line, text: raw },
        });
      }
      client = {
        name: h[1]!,
        ...(vpn === undefined ? {} : { vpnAddress: vpn }),
        source: { file, line, text: raw },
      };
      return;
    }
    const kind = classifyLine(raw);
    if (kind.kind === "command") {
      blocks.push({ cmd: { text: kind.command, line, raw }, output: [] });
      return;
    }
    if (kind.kind === "skipped") skipped.push({ file, line, text: raw });
    const last = blocks.at(-1);
    if (last) last.output.push({ text: raw, line });
    else if (raw.trim() !== "" && !raw.startsWith("#")) preamble++;
  });
  for (const s of skipped.slice(0, MAX_SKIPPED_NOTES)) {
    diagnostics.push({
      code: "PROBE_SKIPPED_LINE",
      severity: "info",
      message: `starts like a prompt, but what follows is not a command podpath knows; read as ${
        s.text?.startsWith("#") ? "a comment" : "output"
      }, not as a command`,
      source: s,
    });
  }
  if (skipped.length > MAX_SKIPPED_NOTES) {
    diagnostics.push({
      code: "PROBE_SKIPPED_LINE",
      severity: "info",
      message: `${skipped.length - MAX_SKIPPED_NOTES} more lines that start like a prompt were read as comments or output`,
      source: skipped[MAX_SKIPPED_NOTES]!,
    });
  }
  if (blocks.length === 0) {
    diagnostics.push({
      code: "PROBE_NO_COMMANDS",
      severity: preamble > 0 ? "error" : "warning",
      message:
        'no command found: a transcript has command lines (after a prompt such as "$ ", "# " or "user@host:~$ ", or a probe such as "ping 10.8.0.1" at the start of a line), each followed by its output',
      source: { file, line: 1 },
    });
  }
  const commands = blocks.map((b) => readBlock(b.cmd, b.output, file, diagnostics));
  return { value: { file, ...(client ? { client } : {}), commands }, diagnostics };
}

function readBlock(
  cmd: OutputLine & { raw: string },
  output: OutputLine[],
  file: string,
  diagnostics: Diagnostic[],
): ProbeCommand {
  const roleMatch = ROLE_COMMENT.exec(cmd.text);
  const role = roleMatch?.[1] as ProbeRole | undefined;
  const commandText = stripComment(
    roleMatch ? cmd.text.slice(0, roleMatch.index) : cmd.text,
  ).trim();
  const { tool, args, ranIn } = toolOf(splitWords(commandText));
  const source: SourceRef = { file, line: cmd.line, text: cmd.raw };
  const reader = READERS[tool];
  const base = {
    tool,
    command: commandText,
    ...(ranIn ? { ranIn } : {}),
    source,
    ...(role ? { role } : {}),
  };
  if (reader === undefined) {
    if (commandText !== "") {
      diagnostics.push({
        code: "PROBE_UNKNOWN_TOOL",
        severity: "info",
        message: `"${commandText}" is not a probe podpath reads (ping, traceroute, tracepath, mtr, dig, nslookup, host, curl, wget, nc, telnet, ip route); its output is kept but not judged`,
        source,
      });
    }
    return { ...base, result: "error", timingsMs: [], resultSource: source };
  }
  const reading = reader({ file, line: cmd.line, text: commandText, args }, output, diagnostics);
  return { ...base, ...reading };
}

/** A line reference for an output line. */
export function outputRef(file: string, l: OutputLine): SourceRef {
  return { file, line: l.line, text: l.text };
}

/** The first non-option argument, skipping the values of options that take one. */
export function positional(args: readonly string[], withValue: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      out.push(...args.slice(i + 1));
      break;
    }
    if (a.startsWith("-") && a.length > 1) {
      if (withValue.has(a)) i++;
      continue;
    }
    out.push(a);
  }
  return out;
}

/**
 * Reads the JSON `podpath probe -o json` writes: `{schemaVersion: 1, tool: "podpath", question:
 * "probe", transcript: ["$ ping …", "…"]}`. The transcript is an array of lines, one per JSON
 * line as written, so evidence cites the JSON file's own line numbers.
 */
export function parseProbeJson(text: string, file: string): Parsed<ProbeTranscript> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    return {
      value: { file, commands: [] },
      diagnostics: [
        {
          code: "PROBE_JSON",
          severity: "error",
          message: `not JSON (${msg}); expected the output of "podpath probe -o json"`,
          source: { file, line: 1 },
        },
      ],
    };
  }
  const lines = (doc as { transcript?: unknown } | null)?.transcript;
  if (!Array.isArray(lines) || !lines.every((l) => typeof l === "string")) {
    return {
      value: { file, commands: [] },
      diagnostics: [
        {
          code: "PROBE_JSON",
          severity: "error",
          message: 'expected a "transcript" array of strings, as "podpath probe -o json" writes',
          source: { file, line: 1 },
        },
      ],
    };
  }
  const jsonLines = text.split(/\r?\n/);
  const at = jsonLines.findIndex((l) => /"transcript"\s*:\s*\[/.test(l));
  // Written one element per line: element i sits on JSON line at + 2 + i (1-based).
  const offset = at >= 0 && jsonLines.length >= at + 1 + lines.length ? at + 1 : 0;
  const parsed = parseProbeTranscript(lines.join("\n"), file);
  const shift = (r: SourceRef): SourceRef => ({ ...r, line: r.line + offset });
  const commands = parsed.value.commands.map((c) => ({
    ...c,
    source: shift(c.source),
    resultSource: shift(c.resultSource),
    ...(c.routes
      ? {
          routes: c.routes.map((r) => ({
            ...r,
            source: shift(r.source),
            ...(r.route ? { route: { ...r.route, source: shift(r.route.source) } } : {}),
          })),
        }
      : {}),
  }));
  const client = parsed.value.client && {
    ...parsed.value.client,
    source: shift(parsed.value.client.source),
  };
  return {
    value: { file, ...(client ? { client } : {}), commands },
    diagnostics: parsed.diagnostics.map((d) => (d.source ? { ...d, source: shift(d.source) } : d)),
  };
}

/** Reads a `probes/` file by its extension: `.json` as podpath probe JSON, anything else as text. */
export function parseProbeFile(text: string, file: string): Parsed<ProbeTranscript> {
  return file.endsWith(".json") ? parseProbeJson(text, file) : parseProbeTranscript(text, file);
}

/** Matches one line against several patterns in turn, keeping the last match's groups. */
export interface LineMatch {
  test(re: RegExp): boolean;
  /** Group `i` of the last successful match ("" when absent). */
  g(i: number): string;
}

export function lineMatch(text: string): LineMatch {
  let last: RegExpExecArray | null = null;
  return {
    test(re) {
      last = re.exec(text);
      return last !== null;
    },
    g(i) {
      return last?.[i] ?? "";
    },
  };
}
