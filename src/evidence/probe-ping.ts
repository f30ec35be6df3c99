/**
 * @module evidence/probe-ping — reads ping output as Linux iputils, BusyBox, macOS and Windows print
 * it: echo replies with their times, timeouts, ICMP errors with the address that sent them, name
 * resolution failures, and the summary line.
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";
import { type Ip, tryParseIp } from "../net/cidr.ts";
import { noResult } from "./probe-no-result.ts";
import type { CommandLine, OutputLine, ProbeResult, ToolReading } from "./probes.ts";
import { lineMatch, outputRef } from "./probes.ts";

/** Options of the four pings that take a value (iputils, BusyBox, macOS, Windows). */
const WITH_VALUE = new Set([
  "-c",
  "-i",
  "-W",
  "-w",
  "-s",
  "-t",
  "-I",
  "-l",
  "-Q",
  "-p",
  "-m",
  "-M",
  "-S",
  "-T",
  "-F",
  "-g",
  "-h",
  "-z",
  "-k",
  "-r",
  "-j",
  "-b",
  "-G",
]);

/** The target: the last word that is not an option or an option's value. */
export function pingTarget(args: readonly string[]): string | undefined {
  let target: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith("-") && a.length > 1) {
      // Windows `-n COUNT`; iputils `-n` (numeric) takes no value.
      if (a === "-n" && /^\d+$/.test(args[i + 1] ?? "") && i + 2 < args.length) i++;
      else if (WITH_VALUE.has(a)) i++;
      continue;
    }
    target = a;
  }
  return target;
}

const NUM = String.raw`(\d+(?:\.\d+)?)`;
// iputils/BusyBox/macOS: "64 bytes from 10.8.0.1: icmp_seq=1 ttl=64 time=0.353 ms",
// "64 bytes from host.example (10.8.0.1): icmp_seq=1 ...", BusyBox "seq=0".
const UNIX_REPLY = new RegExp(
  String.raw`^\d+ bytes from (?:\S+ \()?([0-9a-fA-F:.]*[0-9a-fA-F])\)?:? (?:icmp_seq|seq)=\d+.*?time[=<]${NUM}\s*ms`,
);
// Windows: "Reply from 10.8.0.1: bytes=32 time=24ms TTL=64", "time<1ms".
const WIN_REPLY = new RegExp(String.raw`^Reply from ([0-9a-fA-F:.]+): bytes=\d+ time[=<]${NUM}ms`);
// iputils: "From 10.8.0.1 icmp_seq=1 Destination Host Unreachable" (also "From host (ip) ...");
// IPv6: "From fd00::1 icmp_seq=1 Destination unreachable: Address unreachable".
const UNIX_ICMP_ERROR =
  /^From (?:\S+ \()?([0-9a-fA-F:.]*[0-9a-fA-F])\)?:? (?:icmp_seq|seq)=\d+ (Destination .*[Uu]nreachable|Time to live exceeded|Packet filtered|.*[Pp]rohibited.*)/;
// macOS: "92 bytes from 10.8.0.1: Destination Host Unreachable".
const MAC_ICMP_ERROR =
  /^\d+ bytes from ([0-9a-fA-F:.]+): (Destination .*Unreachable|Time to live exceeded)/;
// Windows: "Reply from 10.8.0.6: Destination host unreachable." — counted as received by Windows.
const WIN_ICMP_ERROR =
  /^Reply from ([0-9a-fA-F:.]+): (Destination (?:host|net|network|port|protocol) unreachable|TTL expired in transit)/i;
const LOCAL_UNREACHABLE =
  /^(?:ping: (?:connect|sendto|sendmsg): (?:Network is unreachable|No route to host|Network unreachable|Host is down)|Destination (?:host|net) unreachable\.|PING: transmit failed\. General failure\.|General failure\.)/i;
const TIMEOUT_LINE =
  /^(?:Request timeout for icmp_seq \d+|Request timed out\.|no answer yet for icmp_seq=\d+)/;
const NAME_UNKNOWN =
  /^(?:ping: (?:\S+: )?(?:Name or service not known|No address associated with hostname)|ping: unknown host|ping: cannot resolve .*Unknown host|ping: bad address|Ping request could not find host)/i;
const NAME_NO_SERVER = /^ping: (?:\S+: )?Temporary failure in name resolution/;
// iputils "3 packets transmitted, 0 received, +2 errors, 100% packet loss, time 317ms";
// BusyBox/macOS "3 packets transmitted, 3 packets received, 0.0% packet loss".
const UNIX_STATS = /^(\d+) packets transmitted, (\d+) (?:packets )?received/;
const WIN_STATS = /Packets: Sent = (\d+), Received = (\d+), Lost = (\d+)/;
const HEADER = /^(?:PING|Pinging) (\S+) [([]([0-9a-fA-F:.]+)[)\]]/;

export function readPing(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const target = pingTarget(cmd.args);
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  const timingsMs: number[] = [];
  let replyFrom: Ip | undefined;
  let errorFrom: Ip | undefined;
  let firstReply: OutputLine | undefined;
  let firstError: OutputLine | undefined;
  let firstTimeout: OutputLine | undefined;
  let nameLine: { line: OutputLine; result: ProbeResult } | undefined;
  let stats: { sent: number; received: number; line: OutputLine } | undefined;
  let resolved: Ip | undefined;
  let winUnreachable = 0;
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    if (on.test(HEADER)) resolved ??= tryParseIp(on.g(2));
    if (on.test(UNIX_REPLY) || on.test(WIN_REPLY)) {
      timingsMs.push(Number(on.g(2)));
      replyFrom ??= tryParseIp(on.g(1));
      firstReply ??= l;
    } else if (on.test(UNIX_ICMP_ERROR) || on.test(MAC_ICMP_ERROR)) {
      errorFrom ??= tryParseIp(on.g(1));
      firstError ??= l;
    } else if (on.test(WIN_ICMP_ERROR)) {
      errorFrom ??= tryParseIp(on.g(1));
      firstError ??= l;
      winUnreachable++;
    } else if (LOCAL_UNREACHABLE.test(t)) {
      firstError ??= l;
    } else if (TIMEOUT_LINE.test(t)) {
      firstTimeout ??= l;
    } else if (NAME_UNKNOWN.test(t)) {
      nameLine ??= { line: l, result: "nxdomain" };
    } else if (NAME_NO_SERVER.test(t)) {
      nameLine ??= { line: l, result: "no-server" };
    } else if (on.test(UNIX_STATS)) {
      stats = { sent: Number(on.g(1)), received: Number(on.g(2)), line: l };
    } else if (on.test(WIN_STATS)) {
      // Windows counts "Destination host unreachable" replies as received.
      stats = {
        sent: Number(on.g(1)),
        received: Math.max(0, Number(on.g(2)) - winUnreachable),
        line: l,
      };
    }
  }
  const targetIp = (target === undefined ? undefined : tryParseIp(target)) ?? resolved;
  let result: ProbeResult;
  let decided: OutputLine | undefined;
  if (firstReply) {
    result = "replies";
    decided = firstReply;
  } else if (firstError) {
    result = "unreachable";
    decided = firstError;
  } else if (nameLine) {
    result = nameLine.result;
    decided = nameLine.line;
  } else if (firstTimeout || (stats && stats.sent > 0 && stats.received === 0)) {
    result = "timeout";
    decided = firstTimeout ?? stats?.line;
  } else {
    result = noResult(
      diagnostics,
      commandRef,
      "ping output shows no reply, timeout, ICMP error or summary line; expected e.g. " +
        '"64 bytes from 10.8.0.1: icmp_seq=1 …" or "3 packets transmitted, 0 received"',
    );
  }
  return {
    ...(target === undefined ? {} : { target }),
    ...(targetIp === undefined ? {} : { targetIp }),
    result,
    timingsMs,
    ...(stats ? { sent: stats.sent, received: stats.received } : {}),
    ...(replyFrom ? { replyFrom } : errorFrom ? { replyFrom: errorFrom } : {}),
    resultSource: decided ? outputRef(cmd.file, decided) : commandRef,
  };
}
