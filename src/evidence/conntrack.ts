/**
 * @module evidence/conntrack — connection tracking entries as `conntrack -L` (plain and
 * `-o extended`) and `/proc/net/nf_conntrack` print them, and the translations they reveal.
 */

import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { type Family, formatIp, type Ip, tryParseIp } from "../net/cidr.ts";
import { lineRef, quote, splitLines, tokens } from "./text-lines.ts";

/** One direction of a connection as conntrack prints it. */
export interface ConntrackTuple {
  readonly src: Ip;
  readonly dst: Ip;
  readonly sport?: number;
  readonly dport?: number;
  /** ICMP type, code and id. */
  readonly type?: number;
  readonly code?: number;
  readonly id?: number;
}

export interface ConntrackEntry {
  readonly l3: Family;
  /** `tcp`, `udp`, `icmp`, `icmpv6`, `sctp`, `gre`, `unknown`... */
  readonly proto: string;
  readonly protoNumber: number;
  /** Seconds until the entry expires. */
  readonly timeout: number;
  /** TCP/SCTP/DCCP state (`ESTABLISHED`, `SYN_SENT`, `TIME_WAIT`...). */
  readonly state?: string;
  /** The packet as first seen. */
  readonly orig: ConntrackTuple;
  /** The reply as expected after NAT: its destination is the translated source. */
  readonly reply: ConntrackTuple;
  /** `UNREPLIED`, `ASSURED`, `OFFLOAD`, `HW_OFFLOAD`... */
  readonly flags: readonly string[];
  readonly mark?: number;
  readonly zone?: number;
  /** Other `key=value` fields (`use`, `secctx`, `helper`, `labels`...). */
  readonly extra: Readonly<Record<string, string>>;
  readonly source: SourceRef;
}

const TUPLE_KEYS = new Set(["src", "dst", "sport", "dport", "type", "code", "id"]);
const L3: Record<string, Family> = { ipv4: 4, ipv6: 6 };
const TRAILER = /^conntrack v[\d.]+ \(conntrack-tools\): (\d+) flow entries have been shown\.$/;

/**
 * Reads conntrack listings. The `conntrack v1.4.7 (conntrack-tools): N flow entries have been
 * shown.` trailer is recognised and its count checked against what was read (a shorter read means
 * the file was cut). Unreadable lines become diagnostics; reading goes on.
 */
export function readConntrack(text: string, file: string): Parsed<ConntrackEntry[]> {
  const entries: ConntrackEntry[] = [];
  const diagnostics: Diagnostic[] = [];
  for (const l of splitLines(text)) {
    const t = l.text.trim();
    if (t === "") continue;
    const source = lineRef(file, l);
    const trailer = TRAILER.exec(t);
    if (trailer) {
      const shown = Number(trailer[1]);
      if (shown !== entries.length) {
        diagnostics.push({
          code: "CONNTRACK_COUNT",
          severity: "warning",
          message: `conntrack says ${shown} entries were shown, ${entries.length} were read; the listing is incomplete or other lines were mixed in`,
          source,
        });
      }
      continue;
    }
    const r = readEntry(tokens(t), source);
    if ("error" in r)
      diagnostics.push({ code: "CONNTRACK_SYNTAX", severity: "warning", message: r.error, source });
    else entries.push(r.entry);
  }
  return { value: entries, diagnostics };
}

function readEntry(t: string[], source: SourceRef): { entry: ConntrackEntry } | { error: string } {
  let i = 0;
  let l3: Family | undefined;
  // `-o extended` and /proc/net/nf_conntrack start with `ipv4     2`
  if (t[0] !== undefined && t[0] in L3) {
    l3 = L3[t[0]];
    if (!/^\d+$/.test(t[1] ?? ""))
      return { error: `expected the L3 protocol number after ${quote(t[0])}` };
    i = 2;
  }
  const proto = t[i];
  const protoNumber = Number(t[i + 1]);
  const timeout = Number(t[i + 2]);
  if (
    proto === undefined ||
    !/^[a-z][a-z0-9-]*$/.test(proto) ||
    !/^\d+$/.test(t[i + 1] ?? "") ||
    !/^\d+$/.test(t[i + 2] ?? "")
  ) {
    return {
      error: `expected "PROTO NUMBER TIMEOUT" (e.g. "tcp 6 431999") at the start of a conntrack entry, found ${quote(t.slice(0, 3).join(" "))}`,
    };
  }
  i += 3;
  let state: string | undefined;
  if (/^[A-Z][A-Z0-9_]*$/.test(t[i] ?? "")) state = t[i++];
  const tuples: Record<string, string>[] = [{}];
  const flags: string[] = [];
  const extra: Record<string, string> = {};
  for (; i < t.length; i++) {
    const tok = t[i]!;
    const flag = /^\[([A-Z_]+)\]$/.exec(tok);
    if (flag) {
      flags.push(flag[1]!);
      continue;
    }
    const eq = tok.indexOf("=");
    if (eq <= 0) return { error: `expected key=value or [FLAG], found ${quote(tok)}` };
    const k = tok.slice(0, eq);
    const v = tok.slice(eq + 1);
    if (TUPLE_KEYS.has(k)) {
      let cur = tuples[tuples.length - 1]!;
      // A key seen again starts the reply tuple.
      if (k in cur) {
        if (tuples.length === 2)
          return { error: `expected two tuples (original, reply), found a third at ${quote(tok)}` };
        cur = {};
        tuples.push(cur);
      }
      cur[k] = v;
    } else {
      extra[k] = v;
    }
  }
  if (tuples.length !== 2)
    return { error: "expected an original and a reply tuple (src=... dst=... twice)" };
  const orig = readTuple(tuples[0]!);
  if ("error" in orig) return { error: `original tuple: ${orig.error}` };
  const reply = readTuple(tuples[1]!);
  if ("error" in reply) return { error: `reply tuple: ${reply.error}` };
  const family = orig.tuple.src.family;
  if (l3 !== undefined && l3 !== family)
    return { error: `addresses are IPv${family} but the line says IPv${l3}` };
  const mark = numberField(extra, "mark");
  const zone = numberField(extra, "zone");
  return {
    entry: {
      l3: family,
      proto,
      protoNumber,
      timeout,
      ...(state !== undefined ? { state } : {}),
      orig: orig.tuple,
      reply: reply.tuple,
      flags,
      ...(mark !== undefined ? { mark } : {}),
      ...(zone !== undefined ? { zone } : {}),
      extra,
      source,
    },
  };
}

function numberField(extra: Record<string, string>, key: string): number | undefined {
  const v = extra[key];
  if (v === undefined || !/^(0x[0-9a-f]+|\d+)$/i.test(v)) return undefined;
  delete extra[key];
  return Number(v);
}

function readTuple(f: Record<string, string>): { tuple: ConntrackTuple } | { error: string } {
  const src = f.src === undefined ? undefined : tryParseIp(f.src);
  const dst = f.dst === undefined ? undefined : tryParseIp(f.dst);
  if (!src || !dst)
    return {
      error: `expected src= and dst= addresses, found src=${f.src ?? "?"} dst=${f.dst ?? "?"}`,
    };
  if (src.family !== dst.family) return { error: "src and dst are of different families" };
  const out: { -readonly [K in keyof ConntrackTuple]: ConntrackTuple[K] } = { src, dst };
  for (const k of ["sport", "dport", "type", "code", "id"] as const) {
    const v = f[k];
    if (v === undefined) continue;
    if (!/^\d{1,10}$/.test(v)) return { error: `expected a number after ${k}=, found ${quote(v)}` };
    out[k] = Number(v);
  }
  return { tuple: out };
}

/**
 * The address the source was rewritten to (SNAT or MASQUERADE): the reply's destination when it
 * differs from the original source. Undefined when the source was kept.
 *
 * @example
 *   // icmp 1 29 src=10.244.1.6 dst=10.20.30.40 ... src=10.20.30.40 dst=10.20.30.1 ...
 *   translatedSource(entry) // 10.20.30.1: the node's address, the pod's packet was masqueraded
 */
export function translatedSource(entry: ConntrackEntry): Ip | undefined {
  return entry.reply.dst.value === entry.orig.src.value ? undefined : entry.reply.dst;
}

/** The address the destination was rewritten to (DNAT, e.g. a Service VIP to a pod): the reply's source when it differs. */
export function translatedDestination(entry: ConntrackEntry): Ip | undefined {
  return entry.reply.src.value === entry.orig.dst.value ? undefined : entry.reply.src;
}

/** `src -> dst` of the original direction, for messages. */
export function describeConntrack(entry: ConntrackEntry): string {
  const o = entry.orig;
  const port = (p?: number) => (p === undefined ? "" : `:${p}`);
  return `${entry.proto} ${formatIp(o.src)}${port(o.sport)} -> ${formatIp(o.dst)}${port(o.dport)}`;
}
