/**
 * @module lab/flow-spec — parses the `--flow SRC->DST[:PORT]` argument of `lab replay` into a
 * typed flow (addresses as bigint, strings only here at the edge). Pure.
 */
import { formatIp, type Ip, tryParseIp } from "../net/cidr.ts";

export type FlowProto = "tcp" | "udp" | "icmp";

export interface FlowSpec {
  readonly proto: FlowProto;
  readonly src: Ip;
  readonly dst: Ip;
  readonly sport?: number;
  readonly dport?: number;
}

function parsePort(text: string, what: string): number | string {
  if (!/^[0-9]{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65535) {
    return `${what} ${JSON.stringify(text)} is not a port (1-65535)`;
  }
  return Number(text);
}

/** `[v6]:port`, `v4:port`, or a bare address. */
function parseEndpoint(text: string, what: string): { ip: Ip; port?: number } | string {
  let addr = text;
  let port: string | undefined;
  const bracket = /^\[([^\]]+)\](?::(.*))?$/.exec(text);
  if (bracket) {
    addr = bracket[1] ?? "";
    port = bracket[2];
  } else if ((text.match(/:/g) ?? []).length === 1) {
    [addr = "", port] = text.split(":");
  }
  const ip = tryParseIp(addr);
  if (!ip) return `${what} ${JSON.stringify(addr)} is not an IP address`;
  if (port === undefined) return { ip };
  const p = parsePort(port, `${what} port`);
  return typeof p === "string" ? p : { ip, port: p };
}

/**
 * Parses `SRC->DST[:PORT]` (also `SRC:SPORT->DST:PORT`). The protocol defaults to tcp when a
 * port is given and icmp otherwise. Returns an error string naming what was expected.
 * @example parseFlowSpec("10.4.0.5->10.20.30.40:5432") // tcp from 10.4.0.5 to 10.20.30.40:5432
 */
export function parseFlowSpec(text: string, proto?: string): FlowSpec | { error: string } {
  // `SRC,DST[:PORT]` is the same flow in a form the shell leaves alone unquoted (`>` redirects)
  const parts = text.includes("->") ? text.split("->") : text.split(",");
  if (parts.length !== 2)
    return {
      error: `flow ${JSON.stringify(text)}: expected SRC->DST[:PORT] (quoted) or SRC,DST[:PORT]`,
    };
  const src = parseEndpoint(parts[0]!.trim(), "source");
  if (typeof src === "string") return { error: `flow ${JSON.stringify(text)}: ${src}` };
  const dst = parseEndpoint(parts[1]!.trim(), "destination");
  if (typeof dst === "string") return { error: `flow ${JSON.stringify(text)}: ${dst}` };
  if (src.ip.family !== dst.ip.family) {
    return {
      error: `flow ${JSON.stringify(text)}: source and destination are different IP families`,
    };
  }
  const p = proto ?? (dst.port === undefined ? "icmp" : "tcp");
  if (p !== "tcp" && p !== "udp" && p !== "icmp") {
    return { error: `protocol ${JSON.stringify(p)}: expected tcp, udp or icmp` };
  }
  if (p !== "icmp" && dst.port === undefined) {
    return { error: `flow ${JSON.stringify(text)}: ${p} needs a destination port (DST:PORT)` };
  }
  if (p === "icmp" && (dst.port !== undefined || src.port !== undefined)) {
    return { error: `flow ${JSON.stringify(text)}: icmp has no ports` };
  }
  return {
    proto: p,
    src: src.ip,
    dst: dst.ip,
    ...(src.port === undefined ? {} : { sport: src.port }),
    ...(dst.port === undefined ? {} : { dport: dst.port }),
  };
}

/** Renders a flow back to `proto SRC[:SPORT]->DST[:PORT]`. */
export function formatFlowSpec(f: FlowSpec): string {
  const ep = (ip: Ip, port?: number) => {
    const a = formatIp(ip);
    if (port === undefined) return a;
    return ip.family === 6 ? `[${a}]:${port}` : `${a}:${port}`;
  };
  return `${f.proto} ${ep(f.src, f.sport)}->${ep(f.dst, f.dport)}`;
}
