/**
 * @module evidence/probe-telnet — reads telnet used as a port check (inetutils and netkit telnet,
 * BusyBox, Windows): connected, refused, timed out, unreachable, or the name not resolved.
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";
import { type Ip, tryParseIp } from "../net/cidr.ts";
import { noResult } from "./probe-no-result.ts";
import { portCheckReading } from "./probe-tcp.ts";
import type { CommandLine, OutputLine, ProbeResult, ToolReading } from "./probes.ts";
import { lineMatch, outputRef, positional } from "./probes.ts";

const TELNET_WITH_VALUE = new Set(["-l", "-e", "-n", "-k", "-X", "-b", "-S"]);
const TELNET_PORT = 23;

function failureOf(detail: string): ProbeResult | undefined {
  if (/Connection refused/i.test(detail)) return "refused";
  if (/No route to host|Network is unreachable|Host is unreachable/i.test(detail))
    return "unreachable";
  if (/timed out/i.test(detail)) return "timeout";
  if (/Temporary failure in name resolution/.test(detail)) return "no-server";
  if (/Name or service not known|No address associated|Unknown host|bad address/i.test(detail))
    return "nxdomain";
  return undefined;
}

export function readTelnet(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  const [host, portText] = positional(cmd.args, TELNET_WITH_VALUE);
  const port =
    portText === undefined ? TELNET_PORT : /^\d+$/.test(portText) ? Number(portText) : undefined;
  let result: ProbeResult | undefined;
  let decided: OutputLine | undefined;
  let trying: OutputLine | undefined;
  let tried: Ip | undefined;
  let interrupted: OutputLine | undefined;
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    const before = result;
    if (on.test(/^Trying ([0-9a-fA-F:.]+?)\.\.\.$/)) {
      tried ??= tryParseIp(on.g(1));
      trying ??= l;
    } else if (result !== undefined) {
      continue; // decided; read on only for the address tried
    } else if (/^Connected to |^Escape character is/.test(t)) {
      result = "ok";
    } else if (
      // inetutils/netkit "telnet: Unable to connect to remote host: Connection refused",
      // BusyBox "telnet: can't connect to remote host (10.0.0.2): Connection refused",
      // "telnet: could not resolve web/80: Name or service not known", "telnet: bad address 'x'"
      on.test(/^telnet: (.*)$/) ||
      // inetutils "Server lookup failure:  web:80, Temporary failure in name resolution"
      on.test(/^(Server lookup failure:.*)$/)
    ) {
      result = failureOf(on.g(1));
    } else if (/^Could not open connection to the host/.test(t)) {
      // Windows telnet says "Connect failed" for a refused and a silent port alike
      result = "error";
      diagnostics.push({
        code: "PROBE_AMBIGUOUS",
        severity: "info",
        message:
          'Windows telnet prints "Connect failed" for a refused and for a silent port alike; Test-NetConnection -Port or curl -v tell them apart',
        source: outputRef(cmd.file, l),
      });
    } else if (/^\^C$/.test(t)) {
      interrupted ??= l;
    }
    if (before === undefined && result !== undefined) decided = l;
  }
  if (result === undefined && trying && interrupted) {
    // "Trying 10.0.0.5..." and nothing until the person pressed ^C: no answer while they waited
    result = "timeout";
    decided = trying;
  }
  if (result === undefined) {
    result = noResult(
      diagnostics,
      commandRef,
      'telnet output shows neither "Connected to" nor a failure; paste its output up to the error (or to ^C when it hung)',
    );
  }
  return portCheckReading(cmd, commandRef, {
    host,
    targetIp: (host === undefined ? undefined : tryParseIp(host)) ?? tried,
    port,
    result,
    timingsMs: [],
    decided,
  });
}
