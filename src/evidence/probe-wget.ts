/**
 * @module evidence/probe-wget — reads GNU wget and BusyBox wget output: the connection (made,
 * refused, timed out, unreachable), the HTTP status the server sent, and name resolution
 * failures.
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";
import { tryParseIp } from "../net/cidr.ts";
import { noResult } from "./probe-no-result.ts";
import { urlHostPort } from "./probe-tcp.ts";
import type { CommandLine, OutputLine, ProbeResult, ToolReading } from "./probes.ts";
import { lineMatch, outputRef, positional } from "./probes.ts";

const WGET_WITH_VALUE = new Set([
  "-O",
  "--output-document",
  "-o",
  "--output-file",
  "-a",
  "--append-output",
  "-T",
  "--timeout",
  "-t",
  "--tries",
  "-w",
  "--wait",
  "-U",
  "--user-agent",
  "-P",
  "--directory-prefix",
  "--header",
  "-e",
  "--execute",
  "--user",
  "--password",
  "-i",
  "--input-file",
  "-B",
  "--base",
  "--post-data",
  "--post-file",
  "--method",
  "--body-data",
  "--bind-address",
  "--connect-timeout",
  "--read-timeout",
  "--dns-timeout",
  "-Y",
  "-Q",
  "--ca-certificate",
  "--certificate",
  "--private-key",
]);

/** What a failed connect said, in GNU's and BusyBox's words. */
function connectFailure(detail: string): ProbeResult | undefined {
  if (/Connection refused/i.test(detail)) return "refused";
  if (/No route to host|Network is unreachable|Host is unreachable/i.test(detail))
    return "unreachable";
  if (/timed out/i.test(detail)) return "timeout";
  return undefined;
}

export function readWget(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  const url = positional(cmd.args, WGET_WITH_VALUE)[0];
  const hp = url === undefined ? undefined : urlHostPort(url);
  let result: ProbeResult | undefined;
  let decided: OutputLine | undefined;
  let status: string | undefined;
  let connected: OutputLine | undefined;
  let resolvedIp: string | undefined;
  let tempFailure = false;
  const decide = (r: ProbeResult, l: OutputLine) => {
    if (result === undefined) {
      result = r;
      decided = l;
    }
  };
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    // GNU: "Connecting to 10.0.0.2:8080... connected." / "... failed: Connection refused."
    // (a name shows as "Connecting to web (web)|10.0.0.2|:80... connected.")
    if (on.test(/^Connecting to (.+?)\.\.\. (connected|failed: (.*?))\.?$/)) {
      if (on.g(2) === "connected") connected ??= l;
      else {
        const r = connectFailure(on.g(3));
        if (r) decide(r, l);
      }
      continue;
    }
    // GNU: "Resolving web (web)... 10.0.0.2" or "... failed: Name or service not known."
    if (on.test(/^Resolving \S+(?: \([^)]*\))?\.\.\. (.*)$/)) {
      const rest = on.g(1);
      if (/Temporary failure in name resolution/.test(rest)) tempFailure = true;
      else if (/failed/.test(rest)) decide("nxdomain", l);
      else resolvedIp ??= rest.split(",")[0]?.trim();
      continue;
    }
    if (/^wget: unable to resolve host address/.test(t)) {
      decide(tempFailure ? "no-server" : "nxdomain", l);
      continue;
    }
    // GNU: "HTTP request sent, awaiting response... 404 Not Found", -S "  HTTP/1.1 200 OK"
    if (
      on.test(/^HTTP request sent, awaiting response\.\.\. (\d{3})\b/) ||
      on.test(/^HTTP\/[\d.]+ (\d{3})\b/)
    ) {
      status ??= on.g(1);
      decide("ok", l);
      continue;
    }
    // BusyBox: "wget: server returned error: HTTP/1.1 404 Not Found"
    if (on.test(/^wget: server returned error: HTTP\/[\d.]+ (\d{3})/)) {
      status ??= on.g(1);
      decide("ok", l);
      continue;
    }
    // BusyBox: "wget: can't connect to remote host (10.0.0.2): Connection refused"
    if (on.test(/^wget: can't connect to remote host[^:]*: (.*)$/)) {
      decide(connectFailure(on.g(1)) ?? "error", l);
      continue;
    }
    if (/^wget: bad address/.test(t)) {
      decide("nxdomain", l);
      continue;
    }
    if (/^wget: download timed out/.test(t)) {
      decide("timeout", l);
      continue;
    }
    // BusyBox success: "'index.html' saved", "written to stdout", "remote file exists"
    if (/ saved$| saved \[|^written to stdout$|^remote file exists$/.test(t)) {
      decide("ok", l);
      continue;
    }
    // GNU: the connection was made, then the server closed or reset it
    if (/^Read error \(.*\) in headers|^No data received/.test(t)) {
      decide("ok", l);
    }
  }
  if (result === undefined && connected) decide("ok", connected);
  if (result === undefined) {
    result = noResult(
      diagnostics,
      commandRef,
      'wget output shows no connection result, HTTP status or error; run it without -q so "Connecting to … connected." and the status are printed',
    );
  }
  const targetIp =
    (hp === undefined ? undefined : tryParseIp(hp.host)) ??
    (resolvedIp === undefined ? undefined : tryParseIp(resolvedIp));
  return {
    ...(hp === undefined ? {} : { target: hp.host }),
    ...(targetIp ? { targetIp } : {}),
    ...(hp?.port === undefined ? {} : { port: hp.port }),
    result,
    timingsMs: [],
    ...(status === undefined ? {} : { status }),
    resultSource: decided ? outputRef(cmd.file, decided) : commandRef,
  };
}
