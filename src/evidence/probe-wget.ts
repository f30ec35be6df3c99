/**
 * @module evidence/probe-wget — reads GNU wget and BusyBox wget output: the connection (made,
 * refused, timed out, unreachable), the HTTP status the server sent, and name resolution
 * failures.
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";
import { tryParseIp } from "../net/cidr.ts";
import { noResult } from "./probe-no-result.ts";
import { portCheckReading, urlHostPort } from "./probe-tcp.ts";
import type { CommandLine, OutputLine, ProbeResult, ToolReading } from "./probes.ts";
import { lineMatch, positional } from "./probes.ts";

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
  const st = new WgetSeen();
  for (const l of output) wgetLine(st, l);
  if (st.result === undefined && st.connected) st.decide("ok", st.connected);
  const result =
    st.result ??
    noResult(
      diagnostics,
      commandRef,
      'wget output shows no connection result, HTTP status or error; run it without -q so "Connecting to … connected." and the status are printed',
    );
  const { resolvedIp } = st;
  return portCheckReading(cmd, commandRef, {
    host: hp?.host,
    targetIp:
      (hp === undefined ? undefined : tryParseIp(hp.host)) ??
      (resolvedIp === undefined ? undefined : tryParseIp(resolvedIp)),
    port: hp?.port,
    result,
    timingsMs: [],
    status: st.status,
    decided: st.decided,
  });
}

/** What wget's output has shown so far; the first result seen decides. */
class WgetSeen {
  result: ProbeResult | undefined;
  decided: OutputLine | undefined;
  status: string | undefined;
  connected: OutputLine | undefined;
  resolvedIp: string | undefined;
  tempFailure = false;

  decide(r: ProbeResult, l: OutputLine): void {
    if (this.result === undefined) {
      this.result = r;
      this.decided = l;
    }
  }
}

/** One line of GNU or BusyBox wget output. */
function wgetLine(st: WgetSeen, l: OutputLine): void {
  const t = l.text.trim();
  const on = lineMatch(t);
  // GNU: "Connecting to 10.0.0.2:8080... connected." / "... failed: Connection refused."
  // (a name shows as "Connecting to web (web)|10.0.0.2|:80... connected.")
  if (on.test(/^Connecting to (.+?)\.\.\. (connected|failed: (.*?))\.?$/)) {
    if (on.g(2) === "connected") st.connected ??= l;
    else {
      const r = connectFailure(on.g(3));
      if (r) st.decide(r, l);
    }
    return;
  }
  // GNU: "Resolving web (web)... 10.0.0.2" or "... failed: Name or service not known."
  if (on.test(/^Resolving \S+(?: \([^)]*\))?\.\.\. (.*)$/)) {
    const rest = on.g(1);
    if (/Temporary failure in name resolution/.test(rest)) st.tempFailure = true;
    else if (/failed/.test(rest)) st.decide("nxdomain", l);
    else st.resolvedIp ??= rest.split(",")[0]?.trim();
    return;
  }
  if (/^wget: unable to resolve host address/.test(t)) {
    st.decide(st.tempFailure ? "no-server" : "nxdomain", l);
    return;
  }
  // GNU: "HTTP request sent, awaiting response... 404 Not Found", -S "  HTTP/1.1 200 OK"
  if (
    on.test(/^HTTP request sent, awaiting response\.\.\. (\d{3})\b/) ||
    on.test(/^HTTP\/[\d.]+ (\d{3})\b/)
  ) {
    st.status ??= on.g(1);
    st.decide("ok", l);
    return;
  }
  // BusyBox: "wget: server returned error: HTTP/1.1 404 Not Found"
  if (on.test(/^wget: server returned error: HTTP\/[\d.]+ (\d{3})/)) {
    st.status ??= on.g(1);
    st.decide("ok", l);
    return;
  }
  // BusyBox: "wget: can't connect to remote host (10.0.0.2): Connection refused"
  if (on.test(/^wget: can't connect to remote host[^:]*: (.*)$/)) {
    st.decide(connectFailure(on.g(1)) ?? "error", l);
    return;
  }
  if (/^wget: bad address/.test(t)) {
    st.decide("nxdomain", l);
    return;
  }
  if (/^wget: download timed out/.test(t)) {
    st.decide("timeout", l);
    return;
  }
  // BusyBox success: "'index.html' saved", "written to stdout", "remote file exists"
  if (/ saved$| saved \[|^written to stdout$|^remote file exists$/.test(t)) {
    st.decide("ok", l);
    return;
  }
  // GNU: the connection was made, then the server closed or reset it
  if (/^Read error \(.*\) in headers|^No data received/.test(t)) {
    st.decide("ok", l);
  }
}
