/**
 * @module evidence/probe-tcp — reads curl (plain, `-v`, `-I`, `-w '%{http_code}'`) and nc
 * (OpenBSD `-vz`, ncat, BusyBox) output: connected, refused, timed out, unreachable, name failure.
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";
import { type Ip, tryParseIp } from "../net/cidr.ts";
import { noResult } from "./probe-no-result.ts";
import type { CommandLine, OutputLine, ProbeResult, ToolReading } from "./probes.ts";
import { lineMatch, outputRef, positional } from "./probes.ts";

const CURL_WITH_VALUE = new Set([
  "-m",
  "--max-time",
  "-o",
  "--output",
  "-w",
  "--write-out",
  "-H",
  "--header",
  "-X",
  "--request",
  "-d",
  "--data",
  "--data-raw",
  "--data-binary",
  "--connect-timeout",
  "-u",
  "--user",
  "-A",
  "--user-agent",
  "-e",
  "--referer",
  "-x",
  "--proxy",
  "--resolve",
  "-T",
  "--upload-file",
  "-F",
  "--form",
  "-b",
  "--cookie",
  "-c",
  "--cookie-jar",
  "-E",
  "--cert",
  "--cacert",
  "--interface",
  "-r",
  "--range",
  "-Y",
  "-y",
  "-C",
  "-K",
  "--config",
  "--retry",
  "--connect-to",
  "--url",
]);
const SCHEME_PORT: Record<string, number> = { http: 80, https: 443, ftp: 21 };

/** Host and port of a curl URL (`http://10.96.0.10:8080/x`, `10.0.0.1`, `[fd00::1]:80`). */
export function urlHostPort(url: string): { host: string; port?: number } | undefined {
  const u = /^(?:([a-z][a-z0-9+.-]*):\/\/)?(?:[^@/]*@)?(\[[^\]]+\]|[^:/?#]+)(?::(\d+))?/i.exec(url);
  if (!u) return undefined;
  const host = u[2]!.replace(/^\[|\]$/g, "");
  const scheme = (u[1] ?? "http").toLowerCase();
  const port = u[3] !== undefined ? Number(u[3]) : SCHEME_PORT[scheme];
  return port === undefined ? { host } : { host, port };
}

function connectFailure(detail: string): ProbeResult | undefined {
  if (/Connection refused/i.test(detail)) return "refused";
  if (
    /No route to host|Network is unreachable|Host is unreachable|Network unreachable/i.test(detail)
  )
    return "unreachable";
  if (/timed out|Timeout was reached|TIMEOUT/i.test(detail)) return "timeout";
  return undefined;
}

/** What a port check (curl, nc, telnet) showed, before it is made a {@link ToolReading}. */
export interface PortCheckSeen {
  readonly host: string | undefined;
  readonly targetIp: Ip | undefined;
  readonly port: number | undefined;
  readonly result: ProbeResult;
  readonly timingsMs: number[];
  readonly status?: string | undefined;
  /** The output line that decided the result; without one, the command line is the source. */
  readonly decided: OutputLine | undefined;
}

/** The reading of a port check (curl, nc, telnet): the same keys for every tool. */
export function portCheckReading(
  cmd: CommandLine,
  commandRef: SourceRef,
  seen: PortCheckSeen,
): ToolReading {
  const { host, targetIp, port, status, decided } = seen;
  return {
    ...(host === undefined ? {} : { target: host }),
    ...(targetIp ? { targetIp } : {}),
    ...(port === undefined ? {} : { port }),
    result: seen.result,
    timingsMs: seen.timingsMs,
    ...(status === undefined ? {} : { status }),
    resultSource: decided ? outputRef(cmd.file, decided) : commandRef,
  };
}

export function readCurl(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  const url = positional(cmd.args, CURL_WITH_VALUE)[0];
  const hp = url === undefined ? undefined : urlHostPort(url);
  let result: ProbeResult | undefined;
  let decided: OutputLine | undefined;
  let status: string | undefined;
  let verboseDetail: { result: ProbeResult; line: OutputLine } | undefined;
  let connected: OutputLine | undefined;
  const timingsMs: number[] = [];
  let body = false;
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    if (on.test(/curl: \((\d+)\) (.*)$/)) {
      const code = Number(on.g(1));
      const text = on.g(2);
      const ms = /after (\d+) (?:ms|milliseconds)/.exec(text);
      if (ms) timingsMs.push(Number(ms[1]));
      if (code === 28) result = "timeout";
      else if (code === 6) result = "nxdomain";
      else if (code === 7) result = connectFailure(text) ?? verboseDetail?.result ?? "error";
      else if (code === 52 || code === 56)
        result = "ok"; // the server accepted, then closed or reset
      else result = "error";
      status ??= `curl-${code}`;
      decided = verboseDetail && code === 7 ? verboseDetail.line : l;
    } else if (on.test(/connect to \S+ port \d+ failed: (.*)$/)) {
      const r = connectFailure(on.g(1));
      if (r) verboseDetail ??= { result: r, line: l };
    } else if (/^\* (?:Connected to|Established connection to)/.test(t)) {
      connected ??= l;
    } else if (on.test(/^(?:< )?HTTP\/[\d.]+ (\d{3})/)) {
      status = on.g(1);
      result ??= "ok";
      decided ??= l;
    } else if (/^\d{3}$/.test(t) && status === undefined) {
      status = t; // -w '%{http_code}'; 000 means no response
      if (t !== "000") {
        result ??= "ok";
        decided ??= l;
      }
    } else if (
      t !== "" &&
      !/^[*<>{}]|^%|^Dload|^\d+\s+\d+\s+\d+/.test(t) &&
      !/^\s*%/.test(l.text)
    ) {
      body = true;
    }
  }
  if (result === undefined && connected) {
    result = "ok";
    decided = connected;
  }
  if (result === "error" && status === "curl-7") {
    diagnostics.push({
      code: "PROBE_AMBIGUOUS",
      severity: "info",
      message:
        'curl 7.8x prints "Couldn\'t connect to server" for a refused and for an unreachable target alike; run it with -v to tell them apart',
      source: decided ? outputRef(cmd.file, decided) : commandRef,
    });
  }
  if (result === undefined && body) {
    result = "ok"; // a body and no error: the request completed
    decided = output.find((l) => l.text.trim() !== "");
  }
  if (result === undefined) {
    result = noResult(
      diagnostics,
      commandRef,
      'curl output shows no "curl: (N)" error, HTTP status or body; run it with -sS or -v so failures are printed',
    );
  }
  return portCheckReading(cmd, commandRef, {
    host: hp?.host,
    targetIp: hp === undefined ? undefined : tryParseIp(hp.host),
    port: hp?.port,
    result,
    timingsMs,
    status,
    decided,
  });
}

const NC_WITH_VALUE = new Set([
  "-w",
  "-s",
  "-p",
  "-i",
  "-X",
  "-x",
  "-q",
  "-I",
  "-O",
  "-T",
  "-V",
  "-W",
  "-e",
  "-M",
  "-m",
]);

export function readNc(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  const [host, portText] = positional(cmd.args, NC_WITH_VALUE);
  const port = portText !== undefined && /^\d+$/.test(portText) ? Number(portText) : undefined;
  let result: ProbeResult | undefined;
  let decided: OutputLine | undefined;
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    if (/succeeded!$|^Ncat: Connected to|\) open$/.test(t)) {
      result = "ok";
    } else if (on.test(/^(?:nc|Ncat|ncat|netcat): (.*)$/)) {
      const detail = on.g(1);
      // ncat: 'Could not resolve hostname "x": Temporary failure in name resolution. QUITTING.'
      if (/Temporary failure in name resolution/.test(detail)) result = "no-server";
      else if (
        /Name or service not known|No address associated|bad address|Could not resolve/i.test(
          detail,
        )
      )
        result = "nxdomain";
      else result = connectFailure(detail) ?? (/TIMEOUT/.test(detail) ? "timeout" : undefined);
    } else if (/Connection refused|timed out|No route to host/.test(t)) {
      result = connectFailure(t);
    }
    if (result !== undefined) {
      decided = l;
      break;
    }
  }
  if (result === undefined) {
    result = noResult(
      diagnostics,
      commandRef,
      "nc output shows neither success nor a failure; run it with -vz so the result is printed",
    );
  }
  return portCheckReading(cmd, commandRef, {
    host,
    targetIp: host === undefined ? undefined : tryParseIp(host),
    port,
    result,
    timingsMs: [],
    decided,
  });
}
