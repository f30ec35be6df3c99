/**
 * @module agents/strongswan/ipsec-conf — `ipsec.conf` as strongSwan's starter (and libreswan's
 * pluto) reads it: `config setup`, `conn` sections with `%default` and `also=` resolved, each
 * side's host, subnets (the traffic selectors), virtual-IP pool and updown script, with lines.
 */

import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import {
  parseSelectorList,
  parseSourceIp,
  type SourceIp,
  type TrafficSelector,
} from "./selectors.ts";

/** One end of a connection as written (`left…` or `right…` parameters). */
export interface IpsecSide {
  /** `left=`: an address, a name, `%any`, `%defaultroute`. */
  readonly host?: Located<string>;
  /** `leftsubnet=` (comma list) or libreswan's `leftsubnets={a b}`: this side's selectors. */
  readonly subnets: readonly Located<TrafficSelector>[];
  /** The subnet list names `%dynamic` (the side's own address) or no subnet is written. */
  readonly dynamic: boolean;
  /** `leftsourceip=`: `%config` asks the peer for an address; a pool hands them out. */
  readonly sourceIp?: Located<SourceIp>;
  /** `leftupdown=`: the script run when a CHILD SA comes up or goes down. */
  readonly updown?: Located<string>;
  /** `leftfirewall=yes`: the default updown script inserts iptables rules. */
  readonly firewall?: Located<boolean>;
  readonly id?: Located<string>;
}

export type IpsecAuto = "ignore" | "add" | "route" | "start" | "ondemand" | "keep" | "up";

/** One `conn` section with `%default` and `also=` applied. */
export interface IpsecConn {
  readonly name: string;
  /** The `conn NAME` line. */
  readonly source: SourceRef;
  readonly left: IpsecSide;
  readonly right: IpsecSide;
  readonly auto?: Located<IpsecAuto>;
  /** `type=tunnel|transport|passthrough|drop|reject|pass`. */
  readonly type?: Located<string>;
  /** Every parameter after resolution, by name (last one wins). */
  readonly params: ReadonlyMap<string, Located<string>>;
}

export interface IpsecConf {
  readonly file: string;
  /** `conn` sections other than `%default`, in file order. */
  readonly conns: readonly IpsecConn[];
  /** Parameters of `config setup`. */
  readonly setup: ReadonlyMap<string, Located<string>>;
}

const AUTO = ["ignore", "add", "route", "start", "ondemand", "keep", "up"] as const;

interface RawSection {
  kind: "setup" | "conn" | "ca" | "other";
  name: string;
  source: SourceRef;
  params: Map<string, Located<string>>;
  also: Located<string>[];
}

const cite = (file: string, line: number, t: string): SourceRef =>
  t.length > 500 ? { file, line } : { file, line, text: t };

/** `key=value`: the value without its quotes and without a trailing `# comment`. */
function splitParam(t: string): { key: string; value: string } | { error: string } {
  const eq = t.indexOf("=");
  if (eq <= 0) return { error: "key=value" };
  const key = t.slice(0, eq).trim();
  if (!/^[A-Za-z0-9_-]+$/.test(key))
    return { error: "a parameter name of letters, digits, - or _" };
  let rest = t.slice(eq + 1).trim();
  if (rest.startsWith('"')) {
    const end = rest.indexOf('"', 1);
    if (end < 0) return { error: 'a closing " for the quoted value' };
    return { key, value: rest.slice(1, end) };
  }
  if (rest.startsWith("{")) {
    const end = rest.indexOf("}");
    if (end < 0) return { error: "a closing } for the {…} list" };
    return { key, value: rest.slice(0, end + 1) };
  }
  const hash = rest.indexOf("#");
  if (hash >= 0) rest = rest.slice(0, hash).trim();
  return { key, value: rest };
}

/**
 * Reads an `ipsec.conf`. Parameters of `conn %default` apply to every conn; `also=NAME` brings in
 * another section's parameters; a conn's own parameters override both (ipsec.conf(5)). Includes
 * are not followed (reported as info). Bad values become diagnostics; the rest is kept.
 *
 * @example parseIpsecConf("conn rw\n  leftsubnet=10.0.0.0/8\n", "ipsec.conf").value.conns[0].name
 */
export function parseIpsecConf(text: string, file: string, lineOffset = 0): Parsed<IpsecConf> {
  const diagnostics: Diagnostic[] = [];
  const sections: RawSection[] = [];
  let current: RawSection | undefined;
  const warn = (source: SourceRef, message: string, code = "IPSEC_CONF_SYNTAX") =>
    diagnostics.push({ code, severity: "warning", message, source });
  text.split(/\r?\n/).forEach((raw, idx) => {
    const line = idx + 1 + lineOffset;
    const t = raw.trim();
    if (t === "" || t.startsWith("#")) return;
    const source = cite(file, line, t);
    const indented = /^\s/.test(raw);
    if (!indented) {
      const words = t.replace(/#.*$/, "").trim().split(/\s+/);
      const [head, name] = words;
      if (head === "config" && name === "setup") {
        current = { kind: "setup", name: "setup", source, params: new Map(), also: [] };
      } else if ((head === "conn" || head === "ca") && name) {
        current = { kind: head, name, source, params: new Map(), also: [] };
      } else if (head === "include" || head === "version") {
        if (head === "include")
          diagnostics.push({
            code: "IPSEC_CONF_INCLUDE",
            severity: "info",
            message: `"${t}": included files are not read; put their text in the snapshot beside this one`,
            source,
          });
        current = undefined;
        return;
      } else {
        warn(
          source,
          `"${source.text ?? ""}": expected a section (config setup, conn NAME, ca NAME)`,
        );
        current = undefined;
        return;
      }
      sections.push(current);
      return;
    }
    if (!current) {
      warn(source, "a parameter outside any section: expected it under config setup or conn NAME");
      return;
    }
    const p = splitParam(t);
    if ("error" in p) {
      warn(source, `"${source.text ?? ""}": expected ${p.error}`);
      return;
    }
    if (p.key === "also") current.also.push({ value: p.value, source });
    else current.params.set(p.key, { value: p.value, source });
  });

  const setup = sections.find((s) => s.kind === "setup")?.params ?? new Map();
  const connSections = sections.filter((s) => s.kind === "conn");
  const defaults = connSections.filter((s) => s.name === "%default");
  const byName = new Map(connSections.map((s) => [s.name, s] as const));

  /** Parameters of `also=` sections, depth first; loops and unknown names are reported. */
  const alsoParams = (s: RawSection, seen: Set<string>): Map<string, Located<string>> => {
    const out = new Map<string, Located<string>>();
    for (const a of s.also) {
      const target = byName.get(a.value);
      if (!target) {
        warn(a.source, `also=${a.value}: expected the name of a conn section of this file`);
        continue;
      }
      if (seen.has(a.value)) {
        warn(a.source, `also=${a.value} includes itself through also=: expected no loop`);
        continue;
      }
      const nested = alsoParams(target, new Set([...seen, a.value]));
      for (const [k, v] of nested) out.set(k, v);
      for (const [k, v] of target.params) out.set(k, v);
    }
    return out;
  };

  const conns: IpsecConn[] = [];
  for (const s of connSections) {
    if (s.name === "%default") continue;
    const params = new Map<string, Located<string>>();
    for (const d of defaults) for (const [k, v] of d.params) params.set(k, v);
    for (const [k, v] of alsoParams(s, new Set([s.name]))) params.set(k, v);
    for (const [k, v] of s.params) params.set(k, v);
    conns.push(resolveConn(s, params, warn));
  }
  return { value: { file, conns, setup }, diagnostics };
}

function resolveConn(
  s: RawSection,
  params: Map<string, Located<string>>,
  warn: (source: SourceRef, message: string) => void,
): IpsecConn {
  const side = (p: "left" | "right"): IpsecSide => {
    const subnets: Located<TrafficSelector>[] = [];
    let dynamic = true;
    // libreswan: `leftsubnets` and `leftsubnet` exclude each other; the list form wins.
    const keys = params.has(`${p}subnets`) ? [`${p}subnets`] : [`${p}subnet`];
    for (const key of keys) {
      const v = params.get(key);
      if (!v || v.value === "") continue;
      const list = parseSelectorList(v.value);
      for (const e of list.errors)
        warn(v.source, `${key}: ${e}; expected a CIDR, an address or a range`);
      for (const sel of list.selectors) subnets.push({ value: sel, source: v.source });
      dynamic = list.dynamic || (list.selectors.length === 0 && list.errors.length === 0);
    }
    const out: {
      -readonly [K in keyof IpsecSide]: IpsecSide[K];
    } = { subnets, dynamic };
    const host = params.get(p);
    if (host && host.value !== "") out.host = host;
    const id = params.get(`${p}id`);
    if (id && id.value !== "") out.id = id;
    const src = params.get(`${p}sourceip`);
    if (src && src.value !== "") {
      const r = parseSourceIp(src.value);
      if ("error" in r)
        warn(src.source, `${p}sourceip: ${r.error}; expected %config, a CIDR pool or a range`);
      else out.sourceIp = { value: r, source: src.source };
    }
    const updown = params.get(`${p}updown`);
    if (updown && updown.value !== "") out.updown = updown;
    const fw = params.get(`${p}firewall`);
    if (fw) out.firewall = { value: fw.value === "yes", source: fw.source };
    return out;
  };
  const conn: { -readonly [K in keyof IpsecConn]: IpsecConn[K] } = {
    name: s.name,
    source: s.source,
    left: side("left"),
    right: side("right"),
    params,
  };
  const auto = params.get("auto");
  if (auto) {
    const v = AUTO.find((a) => a === auto.value);
    if (v) conn.auto = { value: v, source: auto.source };
    else warn(auto.source, `auto=${auto.value}: expected one of ${AUTO.join(", ")}`);
  }
  const type = params.get("type");
  if (type) conn.type = type;
  return conn;
}

/** Whether a conn is loaded at all (`auto=ignore` leaves it out). */
export function isLoaded(c: IpsecConn): boolean {
  return c.auto?.value !== "ignore";
}
