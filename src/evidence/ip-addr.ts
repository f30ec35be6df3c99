/**
 * @module evidence/ip-addr — interfaces and their addresses as iproute2 prints them (`ip addr`,
 * `ip -o addr`, `ip -br addr`, `ip -j addr`), and the address MASQUERADE would pick.
 */

import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import {
  type Cidr,
  contains,
  type Family,
  type Ip,
  parseCidr,
  tryParseCidr,
  tryParseIp,
} from "../net/cidr.ts";
import { jsonErrorOffset, lineColAt } from "./json-error.ts";
import { type Line, lineRef, quote, splitLines, tokens } from "./text-lines.ts";

export interface InterfaceAddress {
  readonly family: Family;
  /** The on-link prefix: `10.244.1.5/24`'s block, or the peer's block on point-to-point links. */
  readonly cidr: Cidr;
  /** The interface's own address. */
  readonly local: Ip;
  /** The remote end on point-to-point links (`inet 10.8.0.1 peer 10.8.0.2/32`). */
  readonly peer?: Ip;
  readonly scope?: string;
  /** A further address in a prefix the interface already has (IPv4): never MASQUERADE's choice. */
  readonly secondary: boolean;
  /** IPv4 label (`eth0`, `lo:vip`). */
  readonly label?: string;
  /** Other bare words: `dynamic`, `noprefixroute`, `nodad`, `tentative`, `deprecated`... */
  readonly flags: readonly string[];
  readonly source: SourceRef;
}

export interface NetInterface {
  readonly index?: number;
  readonly name: string;
  /** The part after `@`: the peer of a veth (`if5`, an ifindex in another namespace) or the lower device. */
  readonly peer?: string;
  /** The peer's ifindex when `peer` is `if<N>`: matches a host-side veth's index. */
  readonly peerIndex?: number;
  readonly flags: readonly string[];
  readonly mtu?: number;
  readonly state?: string;
  /** `ether`, `loopback`, `none` (tun)... */
  readonly linkType?: string;
  readonly mac?: string;
  readonly addresses: readonly InterfaceAddress[];
  readonly source: SourceRef;
}

const ADDRESS_FLAGS = new Set([
  "secondary",
  "temporary",
  "dynamic",
  "noprefixroute",
  "nodad",
  "optimistic",
  "tentative",
  "dadfailed",
  "deprecated",
  "home",
  "mngtmpaddr",
  "stable-privacy",
  "autojoin",
  "permanent",
  "primary",
]);

interface Builder {
  index?: number;
  name: string;
  peer?: string;
  peerIndex?: number;
  flags: string[];
  mtu?: number;
  state?: string;
  linkType?: string;
  mac?: string;
  addresses: InterfaceAddress[];
  source: SourceRef;
}

/**
 * Reads `ip addr` output in the plain, `-o`, `-br` or `-j` form (detected from the text). Lines
 * that cannot be read become diagnostics naming what was expected; reading goes on.
 */
export function readIpAddr(text: string, file: string): Parsed<NetInterface[]> {
  const trimmed = text.trimStart();
  if (trimmed.startsWith("[")) return readJson(text, file);
  const diagnostics: Diagnostic[] = [];
  const byKey = new Map<string, Builder>();
  const order: Builder[] = [];
  let current: Builder | undefined;
  const intern = (b: Builder): Builder => {
    const key = `${b.index ?? ""}:${b.name}`;
    const had = byKey.get(key);
    if (had) return had;
    byKey.set(key, b);
    order.push(b);
    return b;
  };
  for (const l of splitLines(text)) {
    if (l.text.trim() === "") continue;
    const source = lineRef(file, l);
    const warn = (message: string) =>
      diagnostics.push({ code: "ADDR_SYNTAX", severity: "warning", message, source });
    const header = /^(\d+):\s+([^\s:]+?)(?:@([^\s:]+))?:?\s+(.*)$/.exec(l.text);
    if (header) {
      const [, idx, name, peer, rest] = header as unknown as [
        string,
        string,
        string,
        string | undefined,
        string,
      ];
      const b = intern(newBuilder(Number(idx), name, peer, source));
      current = b;
      // `ip -o` joins a link's lines with `\` + spaces: `2: eth0    inet 10.0.0.1/24 ... \   valid_lft ...`
      const pieces = rest.split(/\\(?=\s)/);
      if (rest.startsWith("<")) readLinkHeader(pieces.shift() ?? "", b, warn);
      for (const piece of pieces) readDetail(tokens(piece), b, source, warn);
      continue;
    }
    if (/^\s/.test(l.text)) {
      if (!current) {
        warn(`expected an interface line ("N: name: <FLAGS> ...") before ${quote(l.text.trim())}`);
        continue;
      }
      readDetail(tokens(l.text), current, source, warn);
      continue;
    }
    const br = readBrief(l, file);
    if (br) {
      current = intern(br);
      continue;
    }
    warn(
      `expected "N: name: <FLAGS> mtu ..." (ip addr), "N: name inet ..." (ip -o addr) or "name STATE addr..." (ip -br addr), found ${quote(l.text)}`,
    );
  }
  return { value: order.map(freeze), diagnostics };
}

function newBuilder(
  index: number | undefined,
  name: string,
  peer: string | undefined,
  source: SourceRef,
): Builder {
  const b: Builder = { name, flags: [], addresses: [], source };
  if (index !== undefined) b.index = index;
  if (peer !== undefined) {
    b.peer = peer;
    const m = /^if(\d+)$/.exec(peer);
    if (m) b.peerIndex = Number(m[1]);
  }
  return b;
}

function readLinkHeader(rest: string, b: Builder, warn: (m: string) => void): void {
  const m = /^<([^>]*)>\s*(.*)$/.exec(rest);
  if (!m) {
    warn(`expected "<FLAGS>" after the interface name, found ${quote(rest)}`);
    return;
  }
  b.flags = m[1]!.split(",").filter((f) => f !== "");
  const t = tokens(m[2]!);
  for (let i = 0; i < t.length; i += 2) {
    const k = t[i]!;
    const v = t[i + 1];
    if (k === "mtu" && v !== undefined && /^\d+$/.test(v)) b.mtu = Number(v);
    else if (k === "state" && v !== undefined) b.state = v;
  }
}

function readDetail(t: string[], b: Builder, source: SourceRef, warn: (m: string) => void): void {
  const first = t[0];
  if (first === undefined) return;
  if (first.startsWith("link/")) {
    b.linkType = first.slice(5);
    const mac = t[1];
    if (mac !== undefined && /^[0-9a-f]{2}(:[0-9a-f]{2})+$/i.test(mac)) b.mac = mac.toLowerCase();
    return;
  }
  if (first === "inet" || first === "inet6") {
    const a = readAddressTokens(t, source);
    if ("error" in a) warn(a.error);
    else b.addresses.push(a.address);
  }
  // valid_lft, altname, `ip -d` details (veth, promiscuity...) carry nothing podpath uses.
}

function readAddressTokens(
  t: string[],
  source: SourceRef,
): { address: InterfaceAddress } | { error: string } {
  const family: Family = t[0] === "inet" ? 4 : 6;
  const text = t[1];
  if (text === undefined) return { error: `expected an address after ${quote(t[0]!)}` };
  const slash = text.indexOf("/");
  const local = tryParseIp(slash < 0 ? text : text.slice(0, slash));
  const own = tryParseCidr(text);
  if (!local || "error" in own || local.family !== family) {
    return {
      error: `expected an ${family === 4 ? "IPv4" : "IPv6"} address/prefix after ${quote(t[0]!)}, found ${quote(text)}`,
    };
  }
  let cidr = own.cidr;
  let peer: Ip | undefined;
  let scope: string | undefined;
  let label: string | undefined;
  const flags: string[] = [];
  for (let i = 2; i < t.length; i++) {
    const k = t[i]!;
    const v = t[i + 1];
    if (k === "peer" && v !== undefined) {
      const p = tryParseCidr(v);
      if ("error" in p || p.cidr.family !== family)
        return { error: `expected a peer address after "peer", found ${quote(v)}` };
      cidr = p.cidr;
      peer = tryParseIp(v.split("/")[0]!);
      i++;
    } else if (k === "scope" && v !== undefined) {
      scope = v;
      i++;
    } else if (
      (k === "brd" ||
        k === "metric" ||
        k === "valid_lft" ||
        k === "preferred_lft" ||
        k === "any") &&
      v !== undefined
    ) {
      i++;
    } else if (ADDRESS_FLAGS.has(k)) {
      flags.push(k);
    } else if (family === 4 && i === t.length - 1) {
      label = k; // the IPv4 label ends the line
    }
  }
  return {
    address: {
      family,
      cidr,
      local,
      ...(peer ? { peer } : {}),
      ...(scope !== undefined ? { scope } : {}),
      secondary: flags.includes("secondary"),
      ...(label !== undefined ? { label } : {}),
      flags: flags.filter((f) => f !== "secondary"),
      source,
    },
  };
}

/** `ip -br addr`: `eth0@if5   UP   10.244.1.5/24 fe80::1/64` */
function readBrief(l: Line, file: string): Builder | undefined {
  const t = tokens(l.text);
  const nameTok = t[0];
  const state = t[1];
  if (nameTok === undefined || state === undefined || !/^[A-Z]+$/.test(state)) return undefined;
  const at = nameTok.indexOf("@");
  const source = lineRef(file, l);
  const b = newBuilder(
    undefined,
    at < 0 ? nameTok : nameTok.slice(0, at),
    at < 0 ? undefined : nameTok.slice(at + 1),
    source,
  );
  b.state = state;
  const rest = t.slice(2);
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    const ip = tryParseIp(a.split("/")[0]!);
    // point-to-point: `10.8.0.1 peer 10.8.0.2/32`
    const peerText = rest[i + 1] === "peer" ? rest[i + 2] : undefined;
    const c = tryParseCidr(peerText ?? a);
    const peer = peerText === undefined ? undefined : tryParseIp(peerText.split("/")[0]!);
    if ("error" in c || !ip || (peerText !== undefined && !peer)) return undefined;
    b.addresses.push({
      family: ip.family,
      cidr: c.cidr,
      local: ip,
      ...(peer ? { peer } : {}),
      secondary: false,
      flags: [],
      source,
    });
    if (peerText !== undefined) i += 2;
  }
  return b;
}

function freeze(b: Builder): NetInterface {
  return {
    ...(b.index !== undefined ? { index: b.index } : {}),
    name: b.name,
    ...(b.peer !== undefined ? { peer: b.peer } : {}),
    ...(b.peerIndex !== undefined ? { peerIndex: b.peerIndex } : {}),
    flags: b.flags,
    ...(b.mtu !== undefined ? { mtu: b.mtu } : {}),
    ...(b.state !== undefined ? { state: b.state } : {}),
    ...(b.linkType !== undefined ? { linkType: b.linkType } : {}),
    ...(b.mac !== undefined ? { mac: b.mac } : {}),
    addresses: b.addresses,
    source: b.source,
  };
}

type JsonObj = Record<string, unknown>;
const isObj = (v: unknown): v is JsonObj =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** One `addr_info` entry of `ip -j addr`; undefined (with a warning) when it lacks family, local or prefixlen. */
function jsonAddress(
  a: JsonObj,
  ifname: string,
  source: SourceRef,
  diagnostics: Diagnostic[],
): InterfaceAddress | undefined {
  const family: Family | undefined = a.family === "inet" ? 4 : a.family === "inet6" ? 6 : undefined;
  const local = typeof a.local === "string" ? tryParseIp(a.local) : undefined;
  const prefixlen = typeof a.prefixlen === "number" ? a.prefixlen : undefined;
  const peerText = typeof a.address === "string" && a.address !== a.local ? a.address : undefined;
  const own =
    local && prefixlen !== undefined
      ? tryParseCidr(`${peerText ?? a.local}/${prefixlen}`)
      : undefined;
  if (!family || !local || local.family !== family || !own || "error" in own) {
    diagnostics.push({
      code: "ADDR_SYNTAX",
      severity: "warning",
      message: `${ifname}: expected addr_info with family, local and prefixlen, found ${quote(JSON.stringify(a))}`,
      source,
    });
    return undefined;
  }
  const peer = peerText === undefined ? undefined : tryParseIp(peerText);
  const flags: string[] = [];
  for (const f of ADDRESS_FLAGS) if (a[f] === true) flags.push(f);
  return {
    family,
    cidr: own.cidr,
    local,
    ...(peer ? { peer } : {}),
    ...(typeof a.scope === "string" ? { scope: a.scope } : {}),
    secondary: a.secondary === true,
    ...(typeof a.label === "string" ? { label: a.label } : {}),
    flags: flags.filter((f) => f !== "secondary"),
    source,
  };
}

/** `ip -j addr`: an array of links with `addr_info`. Positions are found by scanning for each `ifindex`. */
function readJson(text: string, file: string): Parsed<NetInterface[]> {
  const diagnostics: Diagnostic[] = [];
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    const at = lineColAt(text, jsonErrorOffset(text) ?? 0);
    const where: SourceRef = { file, line: at.line, col: at.col };
    diagnostics.push({
      code: "ADDR_SYNTAX",
      severity: "error",
      message: `expected the JSON array "ip -j addr" prints: ${e instanceof Error ? e.message : String(e)}`,
      source: where,
    });
    return { value: [], diagnostics };
  }
  if (!Array.isArray(data)) {
    diagnostics.push({
      code: "ADDR_SYNTAX",
      severity: "error",
      message: "expected a JSON array of interfaces",
      source: { file, line: 1 },
    });
    return { value: [], diagnostics };
  }
  const lines = splitLines(text);
  const lineOfIndex = (ifindex: unknown): SourceRef => {
    // ip -j prints one line; pretty-printed (-p) output has one `"ifindex": N` line per link.
    const needle = new RegExp(`"ifindex"\\s*:\\s*${Number(ifindex)}\\b`);
    const l = lines.find((x) => needle.test(x.text));
    if (!l) return { file, line: 1 };
    const col = l.text.search(needle) + 1;
    return lineRef(file, l, col);
  };
  const out: NetInterface[] = [];
  data.forEach((link, n) => {
    if (!isObj(link) || typeof link.ifname !== "string") {
      diagnostics.push({
        code: "ADDR_SYNTAX",
        severity: "warning",
        message: `element ${n}: expected an object with "ifname"`,
        source: { file, line: 1 },
      });
      return;
    }
    const source = lineOfIndex(link.ifindex);
    const b = newBuilder(
      typeof link.ifindex === "number" ? link.ifindex : undefined,
      link.ifname,
      undefined,
      source,
    );
    if (typeof link.link_index === "number" && link.link_netnsid !== undefined) {
      b.peer = `if${link.link_index}`;
      b.peerIndex = link.link_index;
    } else if (typeof link.link === "string") b.peer = link.link;
    if (Array.isArray(link.flags))
      b.flags = link.flags.filter((f): f is string => typeof f === "string");
    if (typeof link.mtu === "number") b.mtu = link.mtu;
    if (typeof link.operstate === "string") b.state = link.operstate;
    if (typeof link.link_type === "string") b.linkType = link.link_type;
    if (typeof link.address === "string") b.mac = link.address.toLowerCase();
    const infos = Array.isArray(link.addr_info) ? link.addr_info : [];
    for (const a of infos) {
      if (!isObj(a) || Object.keys(a).length === 0) continue;
      const address = jsonAddress(a, link.ifname, source, diagnostics);
      if (address) b.addresses.push(address);
    }
    out.push(freeze(b));
  });
  return { value: out, diagnostics };
}

/**
 * The address MASQUERADE (and the kernel's source selection on a plain route) takes for the
 * interface: the first global, primary address of the family. Secondary, tentative, deprecated
 * and DAD-failed addresses are passed over.
 */
export function primaryAddress(iface: NetInterface, family: Family): InterfaceAddress | undefined {
  return iface.addresses.find(
    (a) =>
      a.family === family &&
      !a.secondary &&
      (a.scope ?? impliedScope(a.local)) === "global" &&
      !a.flags.some((f) => f === "tentative" || f === "dadfailed" || f === "deprecated"),
  );
}

const LOOPBACK = [parseCidr("127.0.0.0/8"), parseCidr("::1/128")];
const LINK_LOCAL = [parseCidr("169.254.0.0/16"), parseCidr("fe80::/10")];

/** The scope the kernel gives an address by default, for output that does not print one (`ip -br`). */
function impliedScope(ip: Ip): string {
  if (LOOPBACK.some((c) => contains(c, ip))) return "host";
  if (LINK_LOCAL.some((c) => contains(c, ip))) return "link";
  return "global";
}
