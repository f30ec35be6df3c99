/**
 * @module evidence/probe-dns — reads dig (full and `+short`), nslookup (BIND, BusyBox, Windows) and
 * BIND host output: the server asked, the rcode, the addresses answered, and "no servers could be
 * reached".
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";
import { type Ip, tryParseIp } from "../net/cidr.ts";
import { noResult } from "./probe-no-result.ts";
import type { CommandLine, OutputLine, ProbeResult, ToolReading } from "./probes.ts";
import { lineMatch, outputRef, positional } from "./probes.ts";

const RR_TYPES = new Set([
  "A",
  "AAAA",
  "ANY",
  "CNAME",
  "MX",
  "NS",
  "PTR",
  "SOA",
  "SRV",
  "TXT",
  "CAA",
  "DS",
  "DNSKEY",
]);
const DIG_WITH_VALUE = new Set(["-b", "-c", "-f", "-k", "-p", "-q", "-t", "-x", "-y"]);

/** dig's rcode → result: the server answered, so only the name is at fault. */
function fromRcode(rcode: string, answers: number): ProbeResult {
  if (rcode === "NOERROR") return answers > 0 ? "ok" : "nxdomain";
  if (rcode === "NXDOMAIN") return "nxdomain";
  return "error"; // SERVFAIL, REFUSED, FORMERR, NOTIMP: the server failed; `status` says how
}

/** What a DNS lookup tool's output showed, before it is made a {@link ToolReading}. */
interface DnsSeen {
  readonly target: string | undefined;
  readonly targetIp?: Ip | undefined;
  readonly result: ProbeResult;
  readonly timingsMs: number[];
  readonly server: Ip | undefined;
  readonly answers: Ip[];
  readonly status: string | undefined;
  /** The output line that decided the result; without one, the command line is the source. */
  readonly decided: OutputLine | undefined;
}

/** The reading of a DNS lookup (dig, nslookup, host): the same keys for every tool. */
function dnsReading(cmd: CommandLine, commandRef: SourceRef, seen: DnsSeen): ToolReading {
  const { target, targetIp, server, status, decided } = seen;
  return {
    ...(target === undefined ? {} : { target }),
    ...(targetIp ? { targetIp } : {}),
    result: seen.result,
    timingsMs: seen.timingsMs,
    ...(server ? { dnsServer: server } : {}),
    answers: seen.answers,
    ...(status === undefined ? {} : { status }),
    resultSource: decided ? outputRef(cmd.file, decided) : commandRef,
  };
}

export function readDig(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  let server: Ip | undefined;
  let target: string | undefined;
  let isShort = false;
  for (let i = 0; i < cmd.args.length; i++) {
    const a = cmd.args[i]!;
    if (a.startsWith("@")) server = tryParseIp(a.slice(1));
    else if (a === "+short") isShort = true;
    else if (a.startsWith("+")) continue;
    else if (a.startsWith("-")) {
      if (a === "-x") target ??= cmd.args[i + 1];
      if (DIG_WITH_VALUE.has(a)) i++;
    } else if (!RR_TYPES.has(a.toUpperCase()) && a.toUpperCase() !== "IN") target ??= a;
  }
  let status: string | undefined;
  let statusLine: OutputLine | undefined;
  let noServer: OutputLine | undefined;
  const answers: Ip[] = [];
  let firstAnswer: OutputLine | undefined;
  const timingsMs: number[] = [];
  let inAnswer = false;
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    if (on.test(/status: ([A-Z]+)/)) {
      status = on.g(1);
      statusLine = l;
    } else if (/no servers could be reached/.test(t)) {
      noServer ??= l;
    } else if (t === ";; ANSWER SECTION:") {
      inAnswer = true;
    } else if (t.startsWith(";;") || t === "") {
      inAnswer = false;
      if (on.test(/^;; Query time: (\d+) msec/)) timingsMs.push(Number(on.g(1)));
      if (on.test(/^;; SERVER: ([0-9a-fA-F:.]+)#/)) server = tryParseIp(on.g(1)) ?? server;
    } else if (inAnswer && on.test(/\sIN\s+(?:A|AAAA)\s+(\S+)$/)) {
      const ip = tryParseIp(on.g(1));
      if (ip) answers.push(ip);
      firstAnswer ??= l;
    } else if (isShort && !t.startsWith(";")) {
      const ip = tryParseIp(t);
      if (ip) {
        answers.push(ip);
        firstAnswer ??= l;
      }
    }
  }
  let result: ProbeResult;
  let decided: OutputLine | undefined;
  if (status !== undefined) {
    result = fromRcode(status, answers.length);
    decided = status === "NOERROR" && firstAnswer ? firstAnswer : statusLine;
  } else if (noServer) {
    result = "no-server";
    decided = noServer;
  } else if (answers.length > 0) {
    result = "ok";
    decided = firstAnswer;
  } else if (isShort) {
    // `dig +short` prints nothing for NXDOMAIN and for an empty answer alike.
    result = "nxdomain";
  } else {
    result = noResult(
      diagnostics,
      commandRef,
      'dig output shows neither a "status:" header nor "no servers could be reached"; expected dig\'s full output or +short',
    );
  }
  const targetIp = target === undefined ? undefined : tryParseIp(target);
  return dnsReading(cmd, commandRef, {
    target,
    targetIp,
    result,
    timingsMs,
    server,
    answers,
    status,
    decided,
  });
}

export function readNslookup(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  const words = cmd.args.filter((a) => !a.startsWith("-"));
  const target = words[0];
  let server = words[1] === undefined ? undefined : tryParseIp(words[1]);
  const answers: Ip[] = [];
  let afterName = false;
  let status: string | undefined;
  let decided: OutputLine | undefined;
  let result: ProbeResult | undefined;
  let firstAnswer: OutputLine | undefined;
  let serverSeen = false;
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    if (on.test(/^Server:\s*(\S+)/)) {
      serverSeen = true;
      server = tryParseIp(on.g(1)) ?? server;
    } else if (/^Name:/.test(t)) {
      afterName = true;
    } else if (on.test(/^Address(?:es)?:\s*([0-9a-fA-F:.]+)(#\d+)?$/)) {
      if (afterName) {
        const ip = tryParseIp(on.g(1));
        if (ip) answers.push(ip);
        firstAnswer ??= l;
      } else if (serverSeen) server = tryParseIp(on.g(1)) ?? server;
    } else if (afterName && on.test(/^([0-9a-fA-F:.]+)$/)) {
      const ip = tryParseIp(on.g(1)); // Windows lists further addresses indented under "Addresses:"
      if (ip) answers.push(ip);
    } else if (on.test(/can't find .*: ([A-Za-z -]+)$/)) {
      const why = on.g(1).trim();
      status = /NXDOMAIN|Non-existent domain/i.test(why) ? "NXDOMAIN" : why.toUpperCase();
      result ??= status === "NXDOMAIN" ? "nxdomain" : why === "No answer" ? "nxdomain" : "error";
      decided ??= l;
    } else if (
      /no servers could be reached|DNS request timed out|Request to .* timed-out/.test(t)
    ) {
      result ??= "no-server";
      decided ??= l;
    }
  }
  if (answers.length > 0 && result === undefined) {
    result = "ok";
    decided = firstAnswer;
  }
  if (result === undefined) {
    result = noResult(
      diagnostics,
      commandRef,
      'nslookup output shows no "Name:/Address:" answer, "** server can\'t find" or "no servers could be reached"',
    );
  }
  return dnsReading(cmd, commandRef, {
    target,
    result,
    timingsMs: [],
    server,
    answers,
    status,
    decided,
  });
}

const HOST_WITH_VALUE = new Set(["-c", "-N", "-R", "-t", "-W", "-m", "-p"]);

/**
 * BIND `host`: `NAME has address IP`, `… domain name pointer …`, `Host NAME not found:
 * 3(NXDOMAIN)`, `;; no servers could be reached`; with `-v`, dig-like sections. The target is the
 * name looked up: a lookup tests the DNS server, not a hop to the address.
 */
export function readHost(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  const [target, serverArg] = positional(cmd.args, HOST_WITH_VALUE);
  let server = serverArg === undefined ? undefined : tryParseIp(serverArg);
  const answers: Ip[] = [];
  let firstAnswer: OutputLine | undefined;
  let status: string | undefined;
  let failure: { result: ProbeResult; line: OutputLine } | undefined;
  let empty: OutputLine | undefined;
  let usingServer = false;
  const timingsMs: number[] = [];
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    if (t === "Using domain server:") usingServer = true;
    else if (usingServer && on.test(/^Address:\s*([0-9a-fA-F:.]+)#\d+$/)) {
      server = tryParseIp(on.g(1)) ?? server;
      usingServer = false;
    } else if (
      on.test(/ has (?:IPv6 )?address (\S+)$/) ||
      on.test(/\sIN\s+(?:A|AAAA)\s+(\S+)$/) ||
      on.test(/ domain name pointer (\S+)$/)
    ) {
      const ip = tryParseIp(on.g(1));
      if (ip) answers.push(ip);
      firstAnswer ??= l;
    } else if (on.test(/^Host \S+ not found: \d+\(([A-Z]+)\)/)) {
      status ??= on.g(1);
      failure ??= { result: fromRcode(on.g(1), 0), line: l };
    } else if (/no servers could be reached/.test(t)) {
      failure ??= { result: "no-server", line: l };
    } else if (/ has no \S+ record$/.test(t)) {
      empty ??= l;
    } else if (on.test(/^Received \d+ bytes from ([0-9a-fA-F:.]+)#\d+ in (\d+) ms/)) {
      server = tryParseIp(on.g(1)) ?? server;
      timingsMs.push(Number(on.g(2)));
    } else if (on.test(/status: ([A-Z]+)/)) {
      status ??= on.g(1);
    }
  }
  let result: ProbeResult;
  let decided: OutputLine | undefined;
  if (answers.length > 0) {
    result = "ok";
    decided = firstAnswer;
  } else if (failure) {
    result = failure.result;
    decided = failure.line;
  } else if (empty) {
    // NOERROR without the asked type: the server answered, the name has no such record
    result = "nxdomain";
    status ??= "NOERROR";
    decided = empty;
  } else {
    result = noResult(
      diagnostics,
      commandRef,
      'host output shows no "has address" answer, "Host … not found" or "no servers could be reached"',
    );
  }
  return dnsReading(cmd, commandRef, {
    target,
    result,
    timingsMs,
    server,
    answers,
    status,
    decided,
  });
}
