/**
 * @module agents/strongswan/selectors — traffic selectors and virtual-IP pools as strongSwan and
 * libreswan write them: `10.0.0.0/8`, `10.1.0.0/16[tcp/443]`, ranges `10.9.0.1-10.9.0.100`, and
 * the `%config`/`%dynamic`/`%any` words that stand for an address decided at run time.
 */

import { type Cidr, rangeToCidrs, tryParseCidr, tryParseIp } from "../../net/cidr.ts";

/** One traffic selector: a block, with the protocol/port restriction kept as written. */
export interface TrafficSelector {
  readonly cidr: Cidr;
  /** `[tcp/443]` in strongSwan's syntax, without brackets, when the selector has one. */
  readonly protoPort?: string;
}

/**
 * A value of `leftsourceip`/`rightsourceip` (ipsec.conf) or `pools`' `addrs` (swanctl.conf):
 * addresses handed to clients (`pool`), asked for from the peer (`config`), or named elsewhere.
 */
export type SourceIp =
  | { readonly kind: "pool"; readonly cidrs: readonly Cidr[] }
  | { readonly kind: "config" }
  /** `%poolname` (ipsec.conf) or a pool name of swanctl.conf's `pools` section. */
  | { readonly kind: "named"; readonly name: string }
  /** `%dhcp`, `%radius`, … : handed out by another component. */
  | { readonly kind: "external"; readonly how: string };

/** `10.0.0.0/8`, `10.1.2.3`, `10.1.0.0/16[tcp/443]`: one selector, or why not. */
export function parseSelector(text: string): TrafficSelector | { readonly error: string } {
  const m = /^([^[\]]+?)(?:\[([^\]]*)\])?$/.exec(text.trim());
  if (!m?.[1]) return { error: `${JSON.stringify(text)} is not a subnet` };
  const range = parseRange(m[1]);
  if (range && range.length === 1) return selector(range[0]!, m[2]);
  const r = tryParseCidr(m[1]);
  if ("error" in r) return { error: r.error };
  return selector(r.cidr, m[2]);
}

function selector(cidr: Cidr, protoPort: string | undefined): TrafficSelector {
  return protoPort ? { cidr, protoPort } : { cidr };
}

/** `10.9.0.1-10.9.0.100` as blocks; undefined when it is not a range. */
export function parseRange(text: string): Cidr[] | undefined {
  const dash = text.indexOf("-");
  if (dash < 0) return undefined;
  const a = tryParseIp(text.slice(0, dash).trim());
  const b = tryParseIp(text.slice(dash + 1).trim());
  if (!a || !b || a.family !== b.family || a.value > b.value) return undefined;
  return rangeToCidrs(a.family, a.value, b.value);
}

/**
 * A comma (strongSwan) or space (libreswan `{…}` lists) separated list of selectors. Words
 * (`%dynamic`, `dynamic`) that stand for the peer's own address are skipped, not errors.
 */
export function parseSelectorList(text: string): {
  selectors: TrafficSelector[];
  errors: string[];
  dynamic: boolean;
} {
  const selectors: TrafficSelector[] = [];
  const errors: string[] = [];
  let dynamic = false;
  const inner = text.trim().replace(/^\{(.*)\}$/s, "$1");
  for (const part of inner.split(/[,\s]+/)) {
    if (part === "") continue;
    if (/^%?dynamic$/.test(part) || part === "%any" || part === "%any4" || part === "%any6") {
      dynamic = true;
      continue;
    }
    const s = parseSelector(part);
    if ("error" in s) errors.push(s.error);
    else selectors.push(s);
  }
  return { selectors, errors, dynamic };
}

/** A `rightsourceip` value: `%config`, `%poolname`, a CIDR, a range, or a list of them. */
export function parseSourceIp(text: string): SourceIp | { readonly error: string } {
  const t = text.trim();
  if (/^%(config|cfg|modeconfig|modecfg)[46]?$/.test(t)) return { kind: "config" };
  if (/^%(dhcp|radius)$/.test(t)) return { kind: "external", how: t.slice(1) };
  if (/^%[A-Za-z0-9_.-]+$/.test(t)) return { kind: "named", name: t.slice(1) };
  const cidrs: Cidr[] = [];
  for (const part of t.split(/\s*,\s*/)) {
    if (part === "") continue;
    const range = parseRange(part);
    if (range) {
      cidrs.push(...range);
      continue;
    }
    const r = tryParseCidr(part);
    if ("error" in r) return { error: `${JSON.stringify(part)}: ${r.error}` };
    cidrs.push(r.cidr);
  }
  if (cidrs.length === 0) return { error: "no address, range or %config" };
  return { kind: "pool", cidrs };
}
