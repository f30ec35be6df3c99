/**
 * @module evidence/probe-native — the two probe forms `podpath probe` writes when the system has no
 * ping or dig: a TCP connect and a lookup through Node's resolver. Their transcript lines are
 * podpath's own (documented here, read back by the transcript parser):
 *
 * ```
 * $ tcp-connect 10.96.0.20 80
 * connected in 3 ms                      | refused (ECONNREFUSED) after 1 ms
 * timed out after 2000 ms                | unreachable (EHOSTUNREACH) after 0 ms
 * $ resolve web.demo.svc.cluster.local @10.96.0.10
 * web.demo.svc.cluster.local has address 10.96.0.20
 * NXDOMAIN (ENOTFOUND) after 4 ms        | no server reached (ETIMEOUT) after 2000 ms
 * SERVFAIL (ESERVFAIL) after 3 ms
 * ```
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";
import { type Ip, tryParseIp } from "../net/cidr.ts";
import { noResult } from "./probe-no-result.ts";
import type { CommandLine, OutputLine, ProbeResult, ToolReading } from "./probes.ts";
import { outputRef } from "./probes.ts";

export type ConnectOutcome = "connected" | "refused" | "timeout" | "unreachable" | "error";

/** The output line for a TCP connect outcome. */
export function connectLine(outcome: ConnectOutcome, ms: number, code?: string): string {
  switch (outcome) {
    case "connected":
      return `connected in ${ms} ms`;
    case "timeout":
      return `timed out after ${ms} ms`;
    default:
      return `${outcome} (${code ?? "?"}) after ${ms} ms`;
  }
}

const AFTER = /(?:in|after) (\d+) ms$/;

function noResultLine(cmd: CommandLine, what: string, diagnostics: Diagnostic[]): SourceRef {
  const ref = { file: cmd.file, line: cmd.line, text: cmd.text };
  noResult(
    diagnostics,
    ref,
    `${what} output shows no result line; expected e.g. "connected in 3 ms" or "timed out after 2000 ms"`,
  );
  return ref;
}

export function readTcpConnect(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const [host, portText] = cmd.args;
  const targetIp = host === undefined ? undefined : tryParseIp(host);
  const port = portText !== undefined && /^\d+$/.test(portText) ? Number(portText) : undefined;
  const base = {
    ...(host === undefined ? {} : { target: host }),
    ...(targetIp ? { targetIp } : {}),
    ...(port === undefined ? {} : { port }),
  };
  for (const l of output) {
    const t = l.text.trim();
    const m = /^(connected|refused|timed out|unreachable|error)\b/.exec(t);
    if (!m) continue;
    const result: ProbeResult =
      m[1] === "connected"
        ? "ok"
        : m[1] === "refused"
          ? "refused"
          : m[1] === "timed out"
            ? "timeout"
            : m[1] === "unreachable"
              ? "unreachable"
              : "error";
    const ms = AFTER.exec(t);
    return {
      ...base,
      result,
      timingsMs: ms ? [Number(ms[1])] : [],
      resultSource: outputRef(cmd.file, l),
    };
  }
  return {
    ...base,
    result: "error",
    timingsMs: [],
    resultSource: noResultLine(cmd, "tcp-connect", diagnostics),
  };
}

export function readResolve(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const target = cmd.args.find((a) => !a.startsWith("@"));
  const serverArg = cmd.args.find((a) => a.startsWith("@"));
  const dnsServer = serverArg === undefined ? undefined : tryParseIp(serverArg.slice(1));
  const answers: Ip[] = [];
  let first: OutputLine | undefined;
  let result: ProbeResult | undefined;
  let status: string | undefined;
  const timingsMs: number[] = [];
  for (const l of output) {
    const t = l.text.trim();
    const a = / has (?:IPv6 )?address (\S+)$/.exec(t);
    if (a) {
      const ip = tryParseIp(a[1]!);
      if (ip) answers.push(ip);
      first ??= l;
      continue;
    }
    const f = /^(NXDOMAIN|NODATA|no server reached|SERVFAIL|REFUSED|error) \((\w+)\)/.exec(t);
    if (f && result === undefined) {
      result =
        f[1] === "NXDOMAIN" || f[1] === "NODATA"
          ? "nxdomain"
          : f[1] === "no server reached"
            ? "no-server"
            : "error";
      status = f[1] === "no server reached" ? f[2]! : f[1]!;
      first = l;
    }
    const ms = AFTER.exec(t);
    if (ms) timingsMs.push(Number(ms[1]));
  }
  if (result === undefined && answers.length > 0) result = "ok";
  const base = {
    ...(target === undefined ? {} : { target }),
    ...(dnsServer ? { dnsServer } : {}),
    answers,
    timingsMs,
    ...(status === undefined ? {} : { status }),
  };
  if (result === undefined) {
    return { ...base, result: "error", resultSource: noResultLine(cmd, "resolve", diagnostics) };
  }
  return { ...base, result, resultSource: outputRef(cmd.file, first!) };
}
