/**
 * @module evidence/probe-trace — reads the hop lists of iputils `tracepath` and of `mtr --report`
 * (`mtr -r`, also `-w`, `-b`): each hop's address, times and silence, whether the target was
 * reached, the ICMP error that ended the path, and name resolution failures.
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";
import { type Ip, tryParseIp } from "../net/cidr.ts";
import { noResult } from "./probe-no-result.ts";
import type { CommandLine, OutputLine, ProbeResult, ToolReading, TraceHop } from "./probes.ts";
import { lineMatch, outputRef, positional } from "./probes.ts";

const TRACEPATH_WITH_VALUE = new Set(["-l", "-m", "-p"]);

/** `tracepath: NAME: Temporary failure …`, `mtr: Failed to resolve host: NAME: …`. */
function nameFailure(t: string): ProbeResult | undefined {
  if (/Temporary failure in name resolution/.test(t)) return "no-server";
  if (/Name or service not known|No address associated with hostname|Unknown host/i.test(t))
    return "nxdomain";
  return undefined;
}

interface HopBuild {
  hop: number;
  address?: Ip;
  timingsMs: number[];
  answered: boolean;
  line: OutputLine;
  /** The name mtr -b printed beside the address. */
  name?: string;
}

function toHop(h: HopBuild): TraceHop {
  return {
    hop: h.hop,
    ...(h.address ? { address: h.address } : {}),
    timingsMs: h.timingsMs,
    silent: !h.answered,
  };
}

/** A trace's reading: its target, result, every hop's timings and the last hop that answered. */
function traceReading(
  target: string | undefined,
  result: ProbeResult,
  list: readonly HopBuild[],
  resultSource: SourceRef,
): ToolReading {
  const targetIp = target === undefined ? undefined : tryParseIp(target);
  const lastAnswering = [...list].reverse().find((h) => h.answered);
  return {
    ...(target === undefined ? {} : { target }),
    ...(targetIp ? { targetIp } : {}),
    result,
    timingsMs: list.flatMap((h) => h.timingsMs),
    ...(lastAnswering?.address ? { replyFrom: lastAnswering.address } : {}),
    hops: list.map(toHop),
    resultSource,
  };
}

function noHops(cmd: CommandLine, tool: string, example: string, diagnostics: Diagnostic[]) {
  const ref: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  noResult(
    diagnostics,
    ref,
    `${tool} output has no hop lines and no error; expected e.g. "${example}"`,
  );
  return ref;
}

/**
 * iputils tracepath: ` 1?: [LOCALHOST]  pmtu 1500`, ` 1:  10.8.0.1  0.071ms`, ` 2:  no reply`,
 * `reached` on the target's line, `!N`/`!H`/`!P` for ICMP errors; a hop may be printed twice.
 */
export function readTracepath(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const target = positional(cmd.args, TRACEPATH_WITH_VALUE)[0];
  const hops = new Map<number, HopBuild>();
  let reached: OutputLine | undefined;
  let unreachable: OutputLine | undefined;
  let name: { result: ProbeResult; line: OutputLine } | undefined;
  let hopLimit: OutputLine | undefined;
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    if (on.test(/^(\d+)\??:\s+(.*)$/)) {
      const rest = on.g(2);
      if (/^\[LOCALHOST\]/.test(rest)) continue;
      const n = Number(on.g(1));
      const h = hops.get(n) ?? { hop: n, timingsMs: [], answered: false, line: l };
      hops.set(n, h);
      if (/^no reply\b/.test(rest)) continue;
      const addr = /^(\S+)(?:\s+\(([^)]+)\))?/.exec(rest);
      const ip = tryParseIp(addr?.[2] ?? addr?.[1] ?? "");
      if (ip) h.address ??= ip;
      const ms = /(\d+(?:\.\d+)?)ms/.exec(rest);
      if (ms) h.timingsMs.push(Number(ms[1]));
      if (!h.answered) h.line = l;
      h.answered = true;
      if (/\breached\b/.test(rest)) reached ??= l;
      if (/![HNPXS]/.test(rest)) unreachable ??= l;
      continue;
    }
    if (/^Too many hops/.test(t)) hopLimit ??= l;
    const nf = /^tracepath\d?: /.test(t) ? nameFailure(t) : undefined;
    if (nf) name ??= { result: nf, line: l };
  }
  const list = [...hops.values()].sort((a, b) => a.hop - b.hop);
  const lastAnswering = [...list].reverse().find((h) => h.answered);
  let result: ProbeResult;
  let decided: OutputLine | undefined;
  if (reached) {
    result = "replies";
    decided = reached;
  } else if (unreachable) {
    result = "unreachable";
    decided = unreachable;
  } else if (name) {
    result = name.result;
    decided = name.line;
  } else if (list.length > 0 && !list.at(-1)!.answered) {
    result = "timeout";
    decided = list[lastAnswering ? list.indexOf(lastAnswering) + 1 : 0]!.line;
  } else {
    result = "error";
    if (list.length > 0) {
      noResult(
        diagnostics,
        outputRef(cmd.file, hopLimit ?? list.at(-1)!.line),
        hopLimit
          ? "tracepath stopped at its hop limit (-m) before reaching the target; the path beyond is not shown"
          : "tracepath output neither reaches the target nor ends in silence or an ICMP error",
      );
    }
  }
  const resultSource = decided
    ? outputRef(cmd.file, decided)
    : list.length === 0
      ? noHops(cmd, "tracepath", " 1:  10.8.0.1  0.071ms reached", diagnostics)
      : outputRef(cmd.file, hopLimit ?? list.at(-1)!.line);
  return traceReading(target, result, list, resultSource);
}

const MTR_WITH_VALUE = new Set([
  "-c",
  "--report-cycles",
  "-i",
  "--interval",
  "-m",
  "--max-ttl",
  "-f",
  "--first-ttl",
  "-s",
  "--psize",
  "-B",
  "--bitpattern",
  "-P",
  "--port",
  "-L",
  "--localport",
  "-Q",
  "--tos",
  "-a",
  "--address",
  "-I",
  "--interface",
  "-G",
  "--gracetime",
  "-Z",
  "--timeout",
  "-o",
  "--order",
  "-M",
  "--mark",
  "-y",
  "--ipinfo",
  "-F",
  "--filename",
]);

// `  1.|-- 10.8.0.1   0.0%   3   0.2   0.2   0.1   0.3   0.1`, `  2.|-- ???  100.0   3 …`,
// with -b `  1.|-- gw.lan (10.8.0.1)  0.0% …`, with -z `  1. AS???    10.8.0.1 …`
const MTR_HOP =
  /^\s*(\d+)\.\s*(?:\|--|\|`-|AS\S+)\s+(\S+)(?:\s+\(([^)]+)\))?\s+(\d+(?:\.\d+)?)%?\s+(\d+)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)/;

/**
 * `mtr --report`: one line per hop with its loss and times. The target reached (loss under
 * 100 %) means replies; `???` or 100 % loss at the end means silence; a list that ends at another
 * address that answered means that router answered for the target (an ICMP error: mtr's report
 * does not say which).
 */
export function readMtr(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const target = positional(cmd.args, MTR_WITH_VALUE)[0];
  const targetIp = target === undefined ? undefined : tryParseIp(target);
  const list: HopBuild[] = [];
  let header: OutputLine | undefined;
  let name: { result: ProbeResult; line: OutputLine } | undefined;
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(l.text);
    if (on.test(MTR_HOP)) {
      const hop = Number(on.g(1));
      const shown = on.g(2);
      const ip = tryParseIp(on.g(3) || shown);
      const loss = Number(on.g(4));
      const answered = shown !== "???" && loss < 100;
      list.push({
        hop,
        ...(ip ? { address: ip } : {}),
        timingsMs: answered ? [Number(on.g(7))] : [],
        answered,
        line: l,
        ...(on.g(3) ? { name: shown } : {}),
      });
      continue;
    }
    if (/^HOST:\s/.test(t)) header ??= l;
    const nf = /^mtr: /.test(t) ? nameFailure(t) : undefined;
    if (nf) name ??= { result: nf, line: l };
  }
  const lastAnswering = [...list].reverse().find((h) => h.answered);
  const reached = list.find(
    (h) =>
      h.answered &&
      (targetIp !== undefined
        ? h.address?.value === targetIp.value
        : h.name !== undefined && h.name.replace(/\.$/, "") === target?.replace(/\.$/, "")),
  );
  let result: ProbeResult;
  let decided: OutputLine | undefined;
  if (reached) {
    result = "replies";
    decided = reached.line;
  } else if (name) {
    result = name.result;
    decided = name.line;
  } else if (list.length > 0 && !list.at(-1)!.answered) {
    result = "timeout";
    decided = list[lastAnswering ? list.indexOf(lastAnswering) + 1 : 0]!.line;
  } else if (list.length > 0 && targetIp !== undefined) {
    result = "unreachable";
    decided = list.at(-1)!.line;
    diagnostics.push({
      code: "PROBE_AMBIGUOUS",
      severity: "info",
      message:
        "mtr's hop list ends at a router that answered in the target's place (an ICMP error); its report does not say which error: ping or traceroute the target to see it",
      source: outputRef(cmd.file, decided),
    });
  } else if (list.length === 0 && header && !name) {
    // the header and no hop at all: not even the first hop answered within the cycles
    result = "timeout";
    decided = header;
  } else {
    result = "error";
    if (list.length > 0) {
      decided = list.at(-1)!.line;
      noResult(
        diagnostics,
        outputRef(cmd.file, decided),
        `mtr was given a name (${target ?? "?"}) and its report shows addresses: whether the last hop is the target is not shown; run it with -b (names and addresses)`,
      );
    }
  }
  const resultSource = decided
    ? outputRef(cmd.file, decided)
    : noHops(cmd, "mtr", "  1.|-- 10.8.0.1  0.0%  3  0.2  0.2  0.1  0.3  0.1", diagnostics);
  return traceReading(target, result, list, resultSource);
}
