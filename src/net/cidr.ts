/**
 * @module net/cidr — IPv4/IPv6 addresses and CIDR blocks as bigint ranges: strict parsing,
 * containment, overlap, merge and exclude.
 *
 * Written here rather than taken from npm: the libraries with set operations accept garbage
 * (`10.0.0.300/8`, `/33`) without a word, which is fatal in a diagnosis tool, and the iptables
 * evaluator needs parsed ranges rather than strings re-parsed on every call. Validation of the
 * address text itself is delegated to `node:net` (rejects octal-looking octets, short forms).
 */
import { isIPv4, isIPv6 } from "node:net";

export type Family = 4 | 6;

/** One address. `value` is the address as an unsigned integer of 32 or 128 bits. */
export interface Ip {
  readonly family: Family;
  readonly value: bigint;
}

/** A CIDR block: `start` is the network address, `end` the last address, both inclusive. */
export interface Cidr {
  readonly family: Family;
  readonly start: bigint;
  readonly end: bigint;
  readonly prefix: number;
}

/** Thrown for text that is not an address or CIDR. `code` is stable for tests. */
export class CidrError extends Error {
  override readonly name = "CidrError";
  readonly code = "ERR_INVALID_CIDR";
  readonly input: string;
  constructor(input: string, reason: string) {
    super(`invalid address or CIDR ${JSON.stringify(input)}: ${reason}`);
    this.input = input;
  }
}

const BITS: Record<Family, number> = { 4: 32, 6: 128 };
const ALL: Record<Family, bigint> = { 4: (1n << 32n) - 1n, 6: (1n << 128n) - 1n };

export function bitsOf(family: Family): number {
  return BITS[family];
}

function v4ToBigint(s: string): bigint {
  // Summed as a double (exact below 2^53) and converted once: BigInt arithmetic per octet is slow.
  let v = 0;
  for (const part of s.split(".")) v = v * 256 + Number(part);
  return BigInt(v);
}

function v6ToBigint(s: string): bigint {
  let text = s;
  // A trailing dotted quad (::ffff:10.0.0.1) stands for the last two groups.
  const lastColon = text.lastIndexOf(":");
  const tail = text.slice(lastColon + 1);
  let tailGroups: number[] = [];
  if (tail.includes(".")) {
    const v = Number(v4ToBigint(tail));
    tailGroups = [v >>> 16, v & 0xffff];
    text = text.slice(0, lastColon + 1) + "0:0";
  }
  const [head, rest] = text.includes("::") ? text.split("::") : [text, undefined];
  const headGroups = head ? head.split(":") : [];
  const restGroups = rest ? rest.split(":") : [];
  const fill = rest === undefined ? 0 : 8 - headGroups.length - restGroups.length;
  const groups = [...headGroups, ...Array(fill).fill("0"), ...restGroups].map((g) =>
    Number.parseInt(g, 16),
  );
  if (tailGroups.length === 2) {
    groups[6] = tailGroups[0]!;
    groups[7] = tailGroups[1]!;
  }
  // One BigInt parse of the 32 hex digits instead of eight shifts.
  return BigInt(`0x${groups.map((g) => g.toString(16).padStart(4, "0")).join("")}`);
}

/** Parses an address strictly; undefined when it is not one. Zone ids (`%eth0`) are refused. */
export function tryParseIp(text: string): Ip | undefined {
  if (isIPv4(text)) return { family: 4, value: v4ToBigint(text) };
  if (isIPv6(text) && !text.includes("%")) return { family: 6, value: v6ToBigint(text) };
  return undefined;
}

/** Parses an address strictly, throwing {@link CidrError} when it is not one. */
export function parseIp(text: string): Ip {
  const ip = tryParseIp(text);
  if (!ip) throw new CidrError(text, "not an IPv4 or IPv6 address");
  return ip;
}

function maskOf(family: Family, prefix: number): bigint {
  const host = BigInt(BITS[family] - prefix);
  return ALL[family] ^ ((1n << host) - 1n);
}

export interface ParseCidrOptions {
  /** Refuse host bits below the prefix (`10.0.0.1/8`). Default false: they are cleared, as Go's net.ParseCIDR and iptables do. */
  readonly strictHostBits?: boolean;
  /** Accept a bare address as a /32 or /128. Default true (iptables `-s 10.0.0.1`). */
  readonly allowBareAddress?: boolean;
}

/** Returns why `text` is not a CIDR, or the parsed block. Never throws. */
export function tryParseCidr(
  text: string,
  options: ParseCidrOptions = {},
): { cidr: Cidr } | { error: string } {
  const slash = text.indexOf("/");
  const addr = slash < 0 ? text : text.slice(0, slash);
  const ip = tryParseIp(addr);
  if (!ip) return { error: `${JSON.stringify(addr)} is not an IPv4 or IPv6 address` };
  let prefix = BITS[ip.family];
  if (slash < 0) {
    if (options.allowBareAddress === false) return { error: "missing /prefix" };
  } else {
    const p = text.slice(slash + 1);
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p))
      return { error: `prefix ${JSON.stringify(p)} is not a number` };
    prefix = Number(p);
    if (prefix > BITS[ip.family]) {
      return { error: `prefix /${prefix} is longer than ${BITS[ip.family]} bits` };
    }
  }
  const mask = maskOf(ip.family, prefix);
  const start = ip.value & mask;
  if (options.strictHostBits && start !== ip.value) {
    return { error: `host bits set below /${prefix}` };
  }
  return { cidr: { family: ip.family, start, end: start | (ALL[ip.family] ^ mask), prefix } };
}

/** Parses a CIDR (or a bare address as a host block), throwing {@link CidrError} when it is not one. */
export function parseCidr(text: string, options: ParseCidrOptions = {}): Cidr {
  const r = tryParseCidr(text, options);
  if ("error" in r) throw new CidrError(text, r.error);
  return r.cidr;
}

/** Renders an address: dotted quad, or RFC 5952 compressed IPv6. */
/** The same address: the same family and value. */
export function sameIp(a: Ip, b: Ip): boolean {
  return a.family === b.family && a.value === b.value;
}

export function formatIp(ip: Ip): string {
  if (ip.family === 4) {
    const v = ip.value;
    return [24n, 16n, 8n, 0n].map((s) => String((v >> s) & 255n)).join(".");
  }
  // RFC 5952 §5: an IPv4-mapped address (::ffff:0:0/96) keeps its dotted quad, as inet_ntop and
  // `ip` print it.
  if (ip.value >> 32n === 0xffffn) {
    return `::ffff:${formatIp({ family: 4, value: ip.value & 0xffffffffn })}`;
  }
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((ip.value >> BigInt(i * 16)) & 0xffffn));
  // RFC 5952 §4.2: compress the longest run of two or more zero groups, the first if tied.
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}

export function formatCidr(c: Cidr): string {
  return `${formatIp({ family: c.family, value: c.start })}/${c.prefix}`;
}

/** Does the block contain the address or the whole other block? */
export function contains(c: Cidr, x: Ip | Cidr): boolean {
  if (c.family !== x.family) return false;
  if ("value" in x) return x.value >= c.start && x.value <= c.end;
  return x.start >= c.start && x.end <= c.end;
}

export function overlaps(a: Cidr, b: Cidr): boolean {
  return a.family === b.family && a.start <= b.end && b.start <= a.end;
}

/** Splits an inclusive range into the fewest CIDR blocks, in order. */
export function rangeToCidrs(family: Family, start: bigint, end: bigint): Cidr[] {
  const out: Cidr[] = [];
  const bits = BITS[family];
  let cur = start;
  while (cur <= end) {
    let size = bits;
    // grow the block while it stays aligned and inside the range
    while (size > 0) {
      const next = size - 1;
      const hostBits = BigInt(bits - next);
      const blockMask = (1n << hostBits) - 1n;
      if ((cur & blockMask) !== 0n || cur + blockMask > end) break;
      size = next;
    }
    const last = cur + ((1n << BigInt(bits - size)) - 1n);
    out.push({ family, start: cur, end: last, prefix: size });
    cur = last + 1n;
  }
  return out;
}

function byStart(a: Cidr, b: Cidr): number {
  if (a.family !== b.family) return a.family - b.family;
  return a.start < b.start
    ? -1
    : a.start > b.start
      ? 1
      : a.end < b.end
        ? 1
        : a.end > b.end
          ? -1
          : 0;
}

/** Coalesces blocks into the fewest blocks covering exactly the same addresses, sorted. */
export function mergeCidrs(blocks: readonly Cidr[]): Cidr[] {
  const sorted = [...blocks].sort(byStart);
  const ranges: { family: Family; start: bigint; end: bigint }[] = [];
  for (const c of sorted) {
    const last = ranges.at(-1);
    if (last && last.family === c.family && c.start <= last.end + 1n) {
      if (c.end > last.end) last.end = c.end;
    } else {
      ranges.push({ family: c.family, start: c.start, end: c.end });
    }
  }
  return ranges.flatMap((r) => rangeToCidrs(r.family, r.start, r.end));
}

/** The addresses of `blocks` that are in none of `remove`, as the fewest blocks, sorted. */
export function excludeCidrs(blocks: readonly Cidr[], remove: readonly Cidr[]): Cidr[] {
  const out: Cidr[] = [];
  const cuts = mergeCidrs(remove);
  for (const b of mergeCidrs(blocks)) {
    let start = b.start;
    for (const r of cuts) {
      if (r.family !== b.family || r.end < start || r.start > b.end) continue;
      if (r.start > start) out.push(...rangeToCidrs(b.family, start, r.start - 1n));
      start = r.end + 1n;
      if (start > b.end) break;
    }
    if (start <= b.end) out.push(...rangeToCidrs(b.family, start, b.end));
  }
  return mergeCidrs(out);
}
