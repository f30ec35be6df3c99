/**
 * @module iptables/values — the small value syntaxes inside iptables arguments (ports, marks,
 * addresses with masks, NAT ranges, statistic probabilities) and their canonical printed forms.
 */
import { type Cidr, type Family, type Ip, tryParseCidr, tryParseIp } from "../net/cidr.ts";
import type { Counters, NatRange, PortRange } from "./dump.ts";

export type Result<T> = { ok: true; value: T } | { ok: false; error: string };

const ok = <T>(value: T): Result<T> => ({ ok: true, value });
const fail = <T>(error: string): Result<T> => ({ ok: false, error });

/** `[0:0]`, which every chain of a dump without counters shows: one shared object. */
export const NO_COUNTERS: Counters = Object.freeze({ packets: 0n, bytes: 0n });

/** Packet and byte counters as iptables-save prints them, `[123:4567]`; undefined if not that. */
export function parseCounters(s: string): Counters | undefined {
  if (s === "[0:0]") return NO_COUNTERS;
  if (s.length < 5 || s.charCodeAt(0) !== 91 || s.charCodeAt(s.length - 1) !== 93) return undefined;
  const colon = s.indexOf(":");
  if (colon < 0) return undefined;
  const p = s.slice(1, colon);
  const b = s.slice(colon + 1, -1);
  if (!/^[0-9]+$/.test(p) || !/^[0-9]+$/.test(b)) return undefined;
  return { packets: BigInt(p), bytes: BigInt(b) };
}

function parsePort(text: string): number | undefined {
  const n = portIn(text, 0, text.length);
  return n < 0 ? undefined : n;
}

/** `80`, `1024:65535`, `:1023`, `1024:` (and `a-b` where iptables takes it, e.g. `--to-ports`). */
export function parsePortRange(text: string, sep: ":" | "-" = ":"): Result<PortRange> {
  const at = text.indexOf(sep);
  if (at < 0) {
    const p = parsePort(text);
    return p === undefined
      ? fail(`port ${JSON.stringify(text)} is not a number 0-65535`)
      : ok({ from: p, to: p });
  }
  const a = at === 0 ? 0 : parsePort(text.slice(0, at));
  const b = at === text.length - 1 ? 65535 : parsePort(text.slice(at + 1));
  if (a === undefined || b === undefined) {
    return fail(`port range ${JSON.stringify(text)} is not two numbers 0-65535 joined by "${sep}"`);
  }
  if (a > b) return fail(`port range ${JSON.stringify(text)} is inverted`);
  return ok({ from: a, to: b });
}

export function formatPortRange(r: PortRange, sep: ":" | "-" = ":"): string {
  return r.from === r.to ? String(r.from) : `${r.from}${sep}${r.to}`;
}

/** A comma list of ports and ranges (multiport). */
export function parsePortList(text: string): Result<PortRange[]> {
  const out: PortRange[] = [];
  for (const part of text.split(",")) {
    const r = parsePortRange(part);
    if (!r.ok) return r;
    out.push(r.value);
  }
  return ok(out);
}

/** A 32-bit number as iptables reads it (decimal, 0x hex, or 0 octal via strtoul base 0). */
export function parseU32(text: string): number | undefined {
  let n: number;
  if (/^0[xX][0-9a-fA-F]{1,8}$/.test(text)) n = Number.parseInt(text.slice(2), 16);
  else if (/^0[0-7]+$/.test(text)) n = Number.parseInt(text.slice(1), 8);
  else if (/^[0-9]{1,10}$/.test(text)) n = Number(text);
  else return undefined;
  return n <= 0xffffffff ? n : undefined;
}

export const hex = (n: number): string => `0x${(n >>> 0).toString(16)}`;

/** `value[/mask]`; mask defaults to all ones. */
export function parseMarkMask(text: string): Result<{ value: number; mask?: number }> {
  const slash = text.indexOf("/");
  const v = parseU32(slash < 0 ? text : text.slice(0, slash));
  if (v === undefined) return fail(`mark ${JSON.stringify(text)} is not a 32-bit number`);
  if (slash < 0) return ok({ value: v });
  const m = parseU32(text.slice(slash + 1));
  if (m === undefined) return fail(`mask in ${JSON.stringify(text)} is not a 32-bit number`);
  return ok({ value: v, mask: m });
}

/** Mask in dotted form (`255.255.0.0`) to a prefix length, if contiguous. */
function maskToPrefix(mask: Ip): number | undefined {
  const bits = mask.family === 4 ? 32 : 128;
  let prefix = 0;
  for (let i = bits - 1; i >= 0; i--) {
    if ((mask.value >> BigInt(i)) & 1n) prefix++;
    else break;
  }
  const full = (1n << BigInt(bits)) - 1n;
  const expect = full ^ ((1n << BigInt(bits - prefix)) - 1n);
  return mask.value === expect ? prefix : undefined;
}

/**
 * An address as `-s`/`-d` take it: `a.b.c.d`, `a.b.c.d/len` or `a.b.c.d/dotted.mask`, host bits
 * cleared (iptables does the same).
 */
export function parseAddr(text: string, family: Family): Result<Cidr> {
  return parseAddrUncached(text, family);
}

/**
 * Strict dotted quad (no leading zeros, octets 0-255) in `text[start, end)` as a number, or -1.
 * Without node:net or a regular expression: dumps hold hundreds of thousands of addresses.
 */
export function dottedQuad(text: string, start: number, end: number): number {
  let v = 0;
  let octets = 0;
  let i = start;
  while (i < end) {
    let o = 0;
    let digits = 0;
    const first = text.charCodeAt(i);
    while (i < end) {
      const c = text.charCodeAt(i);
      if (c < 48 || c > 57) break;
      o = o * 10 + (c - 48);
      digits++;
      i++;
    }
    if (digits === 0 || digits > 3 || o > 255 || (digits > 1 && first === 48)) return -1;
    v = v * 256 + o;
    octets++;
    if (i === end) break;
    if (text.charCodeAt(i) !== 46 || octets === 4) return -1;
    i++;
    if (i === end) return -1;
  }
  return octets === 4 ? v : -1;
}

function fastV4(text: string, start: number, end: number): bigint | undefined {
  const v = dottedQuad(text, start, end);
  return v < 0 ? undefined : BigInt(v);
}

/** The first `code` in `text[start, end)`, or -1 (indexOf would look past `end`). */
function indexIn(text: string, code: number, start: number, end: number): number {
  for (let i = start; i < end; i++) if (text.charCodeAt(i) === code) return i;
  return -1;
}

/** `text[start, end)` as a port (1-5 digits, at most 65535), or -1. */
function portIn(text: string, start: number, end: number): number {
  if (end <= start || end - start > 5) return -1;
  let n = 0;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return -1;
    n = n * 10 + (c - 48);
  }
  return n <= 65535 ? n : -1;
}

/**
 * Does {@link parseAddr} accept `text[start, end)` as an IPv4 `a.b.c.d` or `a.b.c.d/len`, and is
 * its prefix other than 0? Checked without building the block. False means "not this simple form",
 * not "invalid".
 */
export function isPlainCidrV4(text: string, start: number, end: number): boolean {
  const slash = indexIn(text, 47 /* / */, start, end);
  if (slash < 0) return dottedQuad(text, start, end) >= 0;
  return prefixLength(text, slash + 1, end) > 0 && dottedQuad(text, start, slash) >= 0;
}

/**
 * Does {@link parseNatRange} accept `text[start, end)` as one IPv4 address with an optional single
 * port (`a.b.c.d` or `a.b.c.d:port`)? Checked without building the range; false means "not this
 * simple form", not "invalid".
 */
export function isPlainHostPortV4(text: string, start: number, end: number): boolean {
  const colon = indexIn(text, 58 /* : */, start, end);
  if (colon < 0) return dottedQuad(text, start, end) >= 0;
  return portIn(text, colon + 1, end) >= 0 && dottedQuad(text, start, colon) >= 0;
}

/** `text[from, end)` as an IPv4 prefix length `0`-`32` (no leading zero), or -1. */
function prefixLength(text: string, from: number, end: number): number {
  const n = end - from;
  const a = text.charCodeAt(from) - 48;
  if (n === 1) return a >= 0 && a <= 9 ? a : -1;
  if (n !== 2 || a < 1 || a > 3) return -1;
  const b = text.charCodeAt(from + 1) - 48;
  if (b < 0 || b > 9 || (a === 3 && b > 2)) return -1;
  return a * 10 + b;
}

/** An IPv4 or IPv6 address; the IPv4 case without regular expressions. */
export function parseIpText(text: string): Ip | undefined {
  const v = fastV4(text, 0, text.length);
  if (v !== undefined) return { family: 4, value: v };
  return tryParseIp(text);
}

function parseAddrUncached(text: string, family: Family): Result<Cidr> {
  if (family === 4) {
    const slash = text.indexOf("/");
    const v = dottedQuad(text, 0, slash < 0 ? text.length : slash);
    const prefix = slash < 0 ? 32 : prefixLength(text, slash + 1, text.length);
    if (v >= 0 && prefix >= 0) {
      // in doubles (exact below 2^53), then one bigint per end: dumps hold hundreds of thousands
      if (prefix === 32) {
        const host = BigInt(v);
        return ok({ family: 4, start: host, end: host, prefix });
      }
      const size = 2 ** (32 - prefix);
      const start = v - (v % size);
      return ok({ family: 4, start: BigInt(start), end: BigInt(start + size - 1), prefix });
    }
  }
  let t = text;
  const slash = t.indexOf("/");
  if (slash >= 0) {
    const maskText = t.slice(slash + 1);
    if (maskText.includes(".") || maskText.includes(":")) {
      const m = tryParseIp(maskText);
      const p = m ? maskToPrefix(m) : undefined;
      if (p === undefined)
        return fail(`mask ${JSON.stringify(maskText)} is not a contiguous netmask`);
      t = `${t.slice(0, slash)}/${p}`;
    }
  }
  const r = tryParseCidr(t);
  if ("error" in r) return fail(`address ${JSON.stringify(text)}: ${r.error}`);
  if (r.cidr.family !== family) {
    return fail(`address ${JSON.stringify(text)} is IPv${r.cidr.family} in an IPv${family} dump`);
  }
  return ok(r.cidr);
}

/** `1.2.3.4`, `1.2.3.4-1.2.3.9`, either with `:p` or `:p1-p2`; IPv6 as `[addr]:port`. */
export function parseNatRange(text: string, family: Family): Result<NatRange> {
  let addrPart = text;
  let portPart: string | undefined;
  if (family === 6) {
    if (text.startsWith("[")) {
      const close = text.indexOf("]");
      if (close < 0) return fail(`${JSON.stringify(text)}: "[" without "]"`);
      addrPart = text.slice(1, close);
      const rest = text.slice(close + 1);
      if (rest.startsWith(":")) portPart = rest.slice(1);
      else if (rest !== "") return fail(`${JSON.stringify(text)}: unexpected text after "]"`);
    }
  } else {
    const colon = text.indexOf(":");
    if (colon >= 0) {
      addrPart = text.slice(0, colon);
      portPart = text.slice(colon + 1);
    }
  }
  let ports: PortRange | undefined;
  if (portPart !== undefined) {
    const p = parsePortRange(portPart, "-");
    if (!p.ok) return p;
    ports = p.value;
  }
  if (addrPart === "") return ok(ports ? { ports } : {});
  const dash = family === 4 ? addrPart.indexOf("-") : addrPart.indexOf("-");
  const fromText = dash < 0 ? addrPart : addrPart.slice(0, dash);
  const toText = dash < 0 ? addrPart : addrPart.slice(dash + 1);
  const from = parseIpText(fromText);
  const to = dash < 0 ? from : parseIpText(toText);
  if (!from || from.family !== family) {
    return fail(`${JSON.stringify(fromText)} is not an IPv${family} address`);
  }
  if (!to || to.family !== family)
    return fail(`${JSON.stringify(toText)} is not an IPv${family} address`);
  if (to.value < from.value) return fail(`address range ${JSON.stringify(addrPart)} is inverted`);
  return ok(ports ? { from, to, ports } : { from, to });
}

/**
 * libxt_statistic stores `lround(p * 2^31)` and iptables-save prints that over 2^31 with `%.11f`
 * (round half to even on exact ties, like glibc printf). Returns the stored numerator.
 */
export function quantiseProbability(p: number): number {
  return Math.round(p * 0x80000000);
}

export function formatProbability(numerator: number): string {
  const scaled = BigInt(numerator) * 10n ** 11n;
  const den = 0x80000000n;
  let q = scaled / den;
  const r2 = (scaled % den) * 2n;
  if (r2 > den || (r2 === den && q % 2n === 1n)) q += 1n;
  const s = q.toString().padStart(12, "0");
  return `${s.slice(0, -11)}.${s.slice(-11)}`;
}
