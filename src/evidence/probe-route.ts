/**
 * @module evidence/probe-route — reads traceroute (Linux, macOS) and Windows tracert hop lists, and
 * the client's `ip route` / `ip route get` output pasted into a probe transcript (read by
 * evidence/ip-route).
 */

import type { Diagnostic, SourceRef } from "../model/types.ts";
import { formatCidr, formatIp, type Ip, tryParseIp } from "../net/cidr.ts";
import { type Route, readIpRoute } from "./ip-route.ts";
import { noResult } from "./probe-no-result.ts";
import type {
  CommandLine,
  OutputLine,
  ProbeResult,
  RouteLine,
  ToolReading,
  TraceHop,
} from "./probes.ts";
import { lineMatch, outputRef, positional } from "./probes.ts";

const TRACE_WITH_VALUE = new Set([
  "-m",
  "-q",
  "-w",
  "-p",
  "-s",
  "-i",
  "-f",
  "-g",
  "-t",
  "-z",
  "-h",
  "-j",
  "-N",
]);
const ADDR = "[0-9a-fA-F:.]*[0-9a-fA-F]";
const TRACE_HEADER = new RegExp(`^(?:traceroute to|Tracing route to) \\S+ [([](${ADDR})[)\\]]`);

export function readTraceroute(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  const target = positional(cmd.args, TRACE_WITH_VALUE)[0];
  let targetIp = target === undefined ? undefined : tryParseIp(target);
  const hops: TraceHop[] = [];
  let unreachable: OutputLine | undefined;
  const hopLines: OutputLine[] = [];
  for (const l of output) {
    const t = l.text.trim();
    const on = lineMatch(t);
    if (on.test(TRACE_HEADER)) {
      targetIp ??= tryParseIp(on.g(1));
      continue;
    }
    if (!on.test(/^(\d+)\s+(.*)$/)) continue;
    const hop = Number(on.g(1));
    const rest = on.g(2);
    const timingsMs = [...rest.matchAll(/<?(\d+(?:\.\d+)?)\s*ms/g)].map((x) => Number(x[1]));
    const addrs = [
      ...rest.matchAll(new RegExp(String.raw`(?:^|[\s(\[])(${ADDR})(?=[\s)\]]|$)`, "g")),
    ]
      .map((x) => tryParseIp(x[1]!))
      .filter((x): x is Ip => x !== undefined);
    const silent = timingsMs.length === 0 && /\*/.test(rest);
    if (/![HNPXS]/.test(rest) || /Destination (?:host|net) unreachable/i.test(rest))
      unreachable ??= l;
    const address = addrs[0];
    hops.push({ hop, ...(address ? { address } : {}), timingsMs, silent });
    hopLines.push(l);
  }
  let result: ProbeResult;
  let decided: OutputLine | undefined;
  const last = hops.at(-1);
  const reached = targetIp !== undefined && hops.some((h) => h.address?.value === targetIp.value);
  const lastAnswering = [...hops].reverse().find((h) => h.address !== undefined);
  if (reached) {
    result = "replies";
    decided = hopLines[hops.findIndex((h) => h.address?.value === targetIp?.value)];
  } else if (unreachable) {
    result = "unreachable";
    decided = unreachable;
  } else if (last?.silent) {
    result = "timeout";
    // the first silent hop after the last one that answered
    const idx = lastAnswering ? hops.indexOf(lastAnswering) + 1 : 0;
    decided = hopLines[idx];
  } else {
    result = noResult(
      diagnostics,
      commandRef,
      'traceroute output has no hop lines; expected e.g. " 1  10.8.0.1  1.234 ms ..."',
    );
  }
  return {
    ...(target === undefined ? {} : { target }),
    ...(targetIp ? { targetIp } : {}),
    result,
    timingsMs: hops.flatMap((h) => h.timingsMs),
    ...(lastAnswering?.address ? { replyFrom: lastAnswering.address } : {}),
    hops,
    resultSource: decided ? outputRef(cmd.file, decided) : commandRef,
  };
}

/** A route's destination as iproute2 prints it: host routes without their /32 or /128. */
function printedDestination(r: Route): string {
  const d =
    r.dst === "default"
      ? "default"
      : r.dst.prefix === (r.family === 4 ? 32 : 128)
        ? formatIp({ family: r.family, value: r.dst.start })
        : formatCidr(r.dst);
  return r.type === "unicast" ? d : `${r.type} ${d}`;
}

/**
 * `ip route` / `ip route get` as pasted in a probe transcript: the routes shown (read by the
 * snapshot's own `ip route` reader, evidence/ip-route), or the error iproute2 printed.
 */
export function readIpRouteTranscript(
  cmd: CommandLine,
  output: readonly OutputLine[],
  diagnostics: Diagnostic[],
): ToolReading {
  const commandRef: SourceRef = { file: cmd.file, line: cmd.line, text: cmd.text };
  const isGet = cmd.args[0] === "get" || cmd.args[0] === "g";
  const target = isGet ? cmd.args[1] : undefined;
  let failure: OutputLine | undefined;
  const shown: OutputLine[] = [];
  for (const l of output) {
    if (l.text.trim() === "") continue;
    if (/^(?:RTNETLINK answers|Error):/.test(l.text.trim())) failure ??= l;
    else shown.push(l);
  }
  // the route lines read as `ip route` output, then cited at their lines in the transcript
  const refAt = (line: number): SourceRef => {
    const l = shown[line - 1];
    return l ? outputRef(cmd.file, l) : commandRef;
  };
  const read = readIpRoute(shown.map((l) => l.text).join("\n"), cmd.file, {
    ...(cmd.args.includes("-6") ? { family: 6 as const } : {}),
  });
  for (const d of read.diagnostics) {
    diagnostics.push(d.source ? { ...d, source: refAt(d.source.line) } : d);
  }
  const routes: RouteLine[] = read.value.map((r) => {
    const route: Route = { ...r, source: refAt(r.source.line) };
    return {
      destination: printedDestination(route),
      ...(route.via ? { via: route.via } : {}),
      ...(route.dev === undefined ? {} : { dev: route.dev }),
      route,
      source: route.source,
    };
  });
  if (routes.length === 0 && !failure) {
    diagnostics.push({
      code: "PROBE_NO_RESULT",
      severity: "info",
      message: "ip route printed no routes",
      source: commandRef,
    });
  }
  const targetIp = target === undefined ? undefined : tryParseIp(target);
  const first = routes[0];
  return {
    ...(target === undefined ? {} : { target }),
    ...(targetIp ? { targetIp } : {}),
    result: failure ? (isGet ? "unreachable" : "error") : routes.length > 0 ? "ok" : "error",
    timingsMs: [],
    routes,
    resultSource: failure ? outputRef(cmd.file, failure) : first ? first.source : commandRef,
  };
}
