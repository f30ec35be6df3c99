/**
 * @module agents/strongswan/xfrm — the kernel's IPsec tables as `ip xfrm policy` and `ip xfrm
 * state` print them (iproute2): policies with their selector (src/dst, proto, ports), direction
 * (in/out/fwd, or a socket policy), action and templates; states with their endpoints, protocol,
 * SPI, mode and selector. Policies decide which packets enter a tunnel at all.
 */

import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import { type Cidr, type Ip, tryParseCidr, tryParseIp } from "../../net/cidr.ts";

export interface XfrmTemplate {
  readonly src?: Ip;
  readonly dst?: Ip;
  readonly proto?: string;
  readonly mode?: string;
  readonly reqid?: number;
}

export interface XfrmPolicy {
  readonly src: Cidr;
  readonly dst: Cidr;
  /** `proto tcp` etc. of the selector, when it has one. */
  readonly proto?: string;
  readonly sport?: number;
  readonly dport?: number;
  /** `in`, `out`, `fwd`; socket policies (per-socket bypass of charon's IKE sockets) are `socket`. */
  readonly dir?: "in" | "out" | "fwd" | "socket";
  readonly action: "allow" | "block";
  readonly priority?: number;
  readonly templates: readonly XfrmTemplate[];
  /** The `src … dst …` line. */
  readonly source: SourceRef;
}

export interface XfrmState {
  readonly src: Ip;
  readonly dst: Ip;
  readonly proto?: string;
  readonly spi?: string;
  readonly reqid?: number;
  readonly mode?: string;
  /** `encap type espinudp sport 4500 dport 4500`: ESP in UDP (NAT traversal). */
  readonly encap?: string;
  readonly selector?: { readonly src: Cidr; readonly dst: Cidr };
  readonly source: SourceRef;
}

const cite = (file: string, line: number, t: string): SourceRef =>
  t.length > 500 ? { file, line } : { file, line, text: t };

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Value after `key` in a word list. */
function after(words: readonly string[], key: string): string | undefined {
  const i = words.indexOf(key);
  return i >= 0 ? words[i + 1] : undefined;
}

const cidrOf = (t: string | undefined): Cidr | undefined => {
  if (t === undefined) return undefined;
  const r = tryParseCidr(t);
  return "cidr" in r ? r.cidr : undefined;
};

const num = (t: string | undefined): number | undefined =>
  t !== undefined && /^\d+$/.test(t) ? Number(t) : undefined;

/** Blocks of `ip xfrm` output: a header line at column 0 and its indented lines. */
function blocks(
  text: string,
): { head: string; line: number; body: { t: string; line: number }[] }[] {
  const out: { head: string; line: number; body: { t: string; line: number }[] }[] = [];
  text.split(/\r?\n/).forEach((raw, idx) => {
    if (raw.trim() === "") return;
    if (/^\s/.test(raw) && out.length > 0) out.at(-1)?.body.push({ t: raw.trim(), line: idx + 1 });
    else out.push({ head: raw.trim(), line: idx + 1, body: [] });
  });
  return out;
}

/**
 * Reads `ip xfrm policy` (or `ip xfrm policy list`) output. A block whose header is not
 * `src CIDR dst CIDR` is a diagnostic; the other blocks are kept.
 *
 * @example parseXfrmPolicy("src 10.9.0.0/24 dst 10.0.0.0/8 \n\tdir in priority 0\n", "x").value[0].dir
 */
export function parseXfrmPolicy(text: string, file: string): Parsed<XfrmPolicy[]> {
  const diagnostics: Diagnostic[] = [];
  const out: XfrmPolicy[] = [];
  for (const b of blocks(text)) {
    const source = cite(file, b.line, b.head);
    const w = b.head.split(/\s+/);
    const src = cidrOf(after(w, "src"));
    const dst = cidrOf(after(w, "dst"));
    if (w[0] !== "src" || !src || !dst) {
      diagnostics.push({
        code: "XFRM_SYNTAX",
        severity: "warning",
        message: `"${b.head.slice(0, 120)}": expected a policy header "src CIDR dst CIDR"`,
        source,
      });
      continue;
    }
    const p: Mutable<XfrmPolicy> = { src, dst, action: "allow", templates: [], source };
    const proto = after(w, "proto");
    if (proto) p.proto = proto;
    const sport = num(after(w, "sport"));
    const dport = num(after(w, "dport"));
    if (sport !== undefined) p.sport = sport;
    if (dport !== undefined) p.dport = dport;
    const templates: Mutable<XfrmTemplate>[] = [];
    for (const { t } of b.body) {
      const bw = t.split(/\s+/);
      if (bw[0] === "dir") {
        const d = bw[1];
        if (d === "in" || d === "out" || d === "fwd") p.dir = d;
        if (after(bw, "action") === "block") p.action = "block";
        const prio = num(after(bw, "priority"));
        if (prio !== undefined) p.priority = prio;
      } else if (bw[0] === "socket") {
        p.dir = "socket";
      } else if (bw[0] === "tmpl") {
        const tm: Mutable<XfrmTemplate> = {};
        const s = tryParseIp(after(bw, "src") ?? "");
        const d = tryParseIp(after(bw, "dst") ?? "");
        if (s) tm.src = s;
        if (d) tm.dst = d;
        templates.push(tm);
      } else if (bw[0] === "proto" && templates.length > 0) {
        const tm = templates.at(-1)!;
        const pr = bw[1];
        if (pr) tm.proto = pr;
        const mode = after(bw, "mode");
        if (mode) tm.mode = mode;
        const reqid = num(after(bw, "reqid"));
        if (reqid !== undefined) tm.reqid = reqid;
      }
    }
    p.templates = templates;
    out.push(p);
  }
  return { value: out, diagnostics };
}

/** Reads `ip xfrm state` output: one block per SA, `src IP dst IP` then its lines. */
export function parseXfrmState(text: string, file: string): Parsed<XfrmState[]> {
  const diagnostics: Diagnostic[] = [];
  const out: XfrmState[] = [];
  for (const b of blocks(text)) {
    const source = cite(file, b.line, b.head);
    const w = b.head.split(/\s+/);
    const src = tryParseIp(after(w, "src") ?? "");
    const dst = tryParseIp(after(w, "dst") ?? "");
    if (w[0] !== "src" || !src || !dst) {
      diagnostics.push({
        code: "XFRM_SYNTAX",
        severity: "warning",
        message: `"${b.head.slice(0, 120)}": expected a state header "src ADDRESS dst ADDRESS"`,
        source,
      });
      continue;
    }
    const s: Mutable<XfrmState> = { src, dst, source };
    for (const { t } of b.body) {
      const bw = t.split(/\s+/);
      if (bw[0] === "proto") {
        if (bw[1]) s.proto = bw[1];
        const spi = after(bw, "spi");
        if (spi) s.spi = spi;
        const reqid = num(after(bw, "reqid"));
        if (reqid !== undefined) s.reqid = reqid;
        const mode = after(bw, "mode");
        if (mode) s.mode = mode;
      } else if (bw[0] === "encap") {
        s.encap = after(bw, "type") ?? "udp";
      } else if (bw[0] === "sel") {
        const ss = cidrOf(after(bw, "src"));
        const sd = cidrOf(after(bw, "dst"));
        if (ss && sd) s.selector = { src: ss, dst: sd };
      }
    }
    out.push(s);
  }
  return { value: out, diagnostics };
}

/** Tunnel policies (not socket bypasses, not blocks): the kernel's traffic selectors. */
export function tunnelPolicies(ps: readonly XfrmPolicy[]): Located<XfrmPolicy>[] {
  return ps
    .filter((p) => p.dir !== "socket" && p.action === "allow" && p.templates.length > 0)
    .map((p) => ({ value: p, source: p.source }));
}
