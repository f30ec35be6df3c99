/**
 * @module agents/strongswan/sa-status — what charon says is up: `ipsec statusall` (stroke) and
 * `swanctl --list-sas` (vici) output as strongSwan 5.x prints it. IKE SAs with their state and
 * peers; CHILD SAs with their state, traffic selectors and byte counters: is the tunnel up, and
 * which addresses does it carry?
 */

import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import { type Ip, tryParseIp } from "../../net/cidr.ts";
import { parseSelector, type TrafficSelector } from "./selectors.ts";

export interface IkeSa {
  /** The connection's name (`rw`). */
  readonly conn: string;
  readonly id: number;
  /** `ESTABLISHED`, `CONNECTING`, `REKEYING`, `DELETING` … as printed. */
  readonly state: string;
  readonly localHost?: string;
  readonly remoteHost?: string;
  /** The virtual IP handed to the remote peer (`[10.9.0.1]` in list-sas). */
  readonly remoteVip?: Ip;
  readonly localVip?: Ip;
  readonly source: SourceRef;
}

export interface ChildSa {
  readonly name: string;
  readonly id: number;
  /** `INSTALLED`, `REKEYED`, `ROUTED` … as printed. */
  readonly state: string;
  readonly mode?: string;
  readonly localTs: readonly Located<TrafficSelector>[];
  readonly remoteTs: readonly Located<TrafficSelector>[];
  readonly bytesIn?: number;
  readonly bytesOut?: number;
  readonly packetsIn?: number;
  readonly packetsOut?: number;
  readonly source: SourceRef;
}

/** A configured child as `statusall` lists it under Connections (`child:  A B === C TUNNEL`). */
export interface ConfiguredChild {
  readonly conn: string;
  readonly localTs: readonly TrafficSelector[];
  readonly remoteTs: readonly TrafficSelector[];
  readonly source: SourceRef;
}

export interface SaStatus {
  readonly file: string;
  readonly format: "statusall" | "list-sas" | "unknown";
  readonly ikeSas: readonly IkeSa[];
  readonly childSas: readonly ChildSa[];
  readonly configured: readonly ConfiguredChild[];
  /** `Virtual IP pools (size/online/offline):` entries of statusall. */
  readonly pools: readonly Located<string>[];
  /**
   * Whether the listing shows its SA list: statusall's `Security Associations (…)` heading, or
   * any SA of list-sas. Without it an absent SA says nothing (an excerpt may have cut it off).
   */
  readonly sasListed: boolean;
}

const cite = (file: string, line: number, t: string): SourceRef =>
  t.length > 500 ? { file, line } : { file, line, text: t };

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function selectorsOf(
  text: string,
  source: SourceRef,
  bad: (m: string) => void,
): Located<TrafficSelector>[] {
  const out: Located<TrafficSelector>[] = [];
  for (const w of text.trim().split(/\s+/)) {
    if (w === "" || w === "dynamic") continue;
    const s = parseSelector(w);
    if ("error" in s) bad(`${s.error}; expected a traffic selector such as 10.0.0.0/8`);
    else out.push({ value: s, source });
  }
  return out;
}

const hostOf = (t: string | undefined) => t?.replace(/\[[^\]]*\]$/, "");

/**
 * Reads `ipsec statusall` or `swanctl --list-sas` output (the format is recognised from the
 * lines). Lines of neither shape are skipped; malformed selectors and counters are diagnostics.
 */
export function parseSaStatus(text: string, file: string): Parsed<SaStatus> {
  const diagnostics: Diagnostic[] = [];
  const ikeSas: IkeSa[] = [];
  const children: Mutable<ChildSa>[] = [];
  const configured: ConfiguredChild[] = [];
  const pools: Located<string>[] = [];
  let format: SaStatus["format"] = "unknown";
  let sasHeading = false;
  let section: "pools" | "sas" | "other" = "other";
  let child: Mutable<ChildSa> | undefined;
  let ike: Mutable<IkeSa> | undefined;
  text.split(/\r?\n/).forEach((raw, idx) => {
    const line = idx + 1;
    const t = raw.trim();
    if (t === "") return;
    const source = cite(file, line, t);
    const bad = (m: string) =>
      diagnostics.push({ code: "IPSEC_STATUS_SYNTAX", severity: "warning", message: m, source });
    if (/^Status of IKE charon daemon/.test(t)) format = "statusall";
    if (/^Virtual IP pools/.test(t)) section = "pools";
    else if (/^Security Associations/.test(t)) {
      section = "sas";
      sasHeading = true;
    } else if (/^[A-Z][A-Za-z ]+:/.test(raw) && !/^\S+: #\d+,/.test(raw)) section = "other";
    if (section === "pools" && /^\s+\S+: \d+\/\d+\/\d+$/.test(raw)) {
      pools.push({ value: t.slice(0, t.lastIndexOf(":")), source });
      return;
    }
    // statusall, Connections:   rw:   child:  10.244.0.0/16 === dynamic TUNNEL
    const conf = /^\s*(\S+?):\s+child:\s+(.*?)\s+===\s+(.*?)\s+[A-Z_]+(?:,.*)?$/.exec(raw);
    if (conf?.[1] && conf[2] !== undefined && conf[3] !== undefined) {
      configured.push({
        conn: conf[1],
        localTs: selectorsOf(conf[2], source, bad).map((s) => s.value),
        remoteTs: selectorsOf(conf[3], source, bad).map((s) => s.value),
        source,
      });
      return;
    }
    // statusall IKE SA: rw[1]: ESTABLISHED 11 seconds ago, A[id]...B[id]
    const sIke = /^\s*(\S+?)\[(\d+)\]:\s+([A-Z_]+)\b(?:.*?,\s*(\S+)\.\.\.(\S+))?/.exec(raw);
    if (sIke?.[1] && sIke[2] && sIke[3] && section === "sas") {
      ikeSas.push({
        conn: sIke[1],
        id: Number(sIke[2]),
        state: sIke[3],
        ...(sIke[4] ? { localHost: hostOf(sIke[4])! } : {}),
        ...(sIke[5] ? { remoteHost: hostOf(sIke[5])! } : {}),
        source,
      });
      return;
    }
    // statusall CHILD SA lines: rw{1}:  INSTALLED, TUNNEL, …  /  counters  /  A === B
    const sChild = /^\s*(\S+?)\{(\d+)\}:\s+(.*)$/.exec(raw);
    if (sChild?.[1] && sChild[2] && sChild[3] !== undefined && section === "sas") {
      const body = sChild[3];
      const id = Number(sChild[2]);
      let c = children.find((x) => x.name === sChild[1] && x.id === id);
      const state = /^([A-Z_]+),\s*([A-Z_]+)/.exec(body);
      if (!c) {
        c = {
          name: sChild[1],
          id,
          state: state?.[1] ?? "UNKNOWN",
          localTs: [],
          remoteTs: [],
          source,
        };
        children.push(c);
      }
      if (state?.[2]) c.mode = state[2];
      const bi = /(\d+) bytes_i(?: \((\d+) pkts?)?/.exec(body);
      const bo = /(\d+) bytes_o(?: \((\d+) pkts?)?/.exec(body);
      if (bi?.[1]) c.bytesIn = Number(bi[1]);
      if (bi?.[2]) c.packetsIn = Number(bi[2]);
      if (bo?.[1]) c.bytesOut = Number(bo[1]);
      if (bo?.[2]) c.packetsOut = Number(bo[2]);
      const ts = /^(.*?)\s+===\s+(.*)$/.exec(body);
      if (ts?.[1] !== undefined && ts[2] !== undefined && !bi && !state) {
        c.localTs = [...c.localTs, ...selectorsOf(ts[1], source, bad)];
        c.remoteTs = [...c.remoteTs, ...selectorsOf(ts[2], source, bad)];
      }
      return;
    }
    // list-sas IKE SA: rw: #1, ESTABLISHED, IKEv2, …
    const lIke = /^(\S+?): #(\d+), ([A-Z_]+)/.exec(raw);
    if (lIke?.[1] && lIke[2] && lIke[3]) {
      format = "list-sas";
      ike = { conn: lIke[1], id: Number(lIke[2]), state: lIke[3], source };
      ikeSas.push(ike);
      child = undefined;
      return;
    }
    // list-sas CHILD SA: "  rw: #1, reqid 1, INSTALLED, TUNNEL-in-UDP, ESP:…"
    const lChild = /^ {2}(\S+?): #(\d+),(?: reqid \d+,)? ([A-Z_]+)(?:, ([A-Za-z_-]+))?/.exec(raw);
    if (lChild?.[1] && lChild[2] && lChild[3]) {
      child = {
        name: lChild[1],
        id: Number(lChild[2]),
        state: lChild[3],
        ...(lChild[4] ? { mode: lChild[4] } : {}),
        localTs: [],
        remoteTs: [],
        source,
      };
      children.push(child);
      return;
    }
    const lEnd = /^ {2}(local|remote)\s+'[^']*' @ (\S+)(?: \[([^\]]+)\])?/.exec(raw);
    if (lEnd?.[1] && ike) {
      const host = hostOf(lEnd[2]);
      const vip = lEnd[3] ? tryParseIp(lEnd[3]) : undefined;
      if (lEnd[1] === "local") {
        if (host) ike.localHost = host;
        if (vip) ike.localVip = vip;
      } else {
        if (host) ike.remoteHost = host;
        if (vip) ike.remoteVip = vip;
      }
      return;
    }
    if (child && /^ {4}/.test(raw)) {
      const ts = /^(local|remote)\s+(.*)$/.exec(t);
      if (ts?.[1] && ts[2] !== undefined) {
        const list = selectorsOf(ts[2], source, bad);
        if (ts[1] === "local") child.localTs = [...child.localTs, ...list];
        else child.remoteTs = [...child.remoteTs, ...list];
        return;
      }
      const counter = /^(in|out)\s+\S+?,\s+(\d+) bytes,\s+(\d+) packets/.exec(t);
      if (counter?.[1]) {
        if (counter[1] === "in") {
          child.bytesIn = Number(counter[2]);
          child.packetsIn = Number(counter[3]);
        } else {
          child.bytesOut = Number(counter[2]);
          child.packetsOut = Number(counter[3]);
        }
      }
    }
  });
  const sasListed =
    sasHeading || ((format as SaStatus["format"]) === "list-sas" && ikeSas.length > 0);
  return {
    value: { file, format, ikeSas, childSas: children, configured, pools, sasListed },
    diagnostics,
  };
}

/** IKE SAs that are up (`ESTABLISHED`). */
export function establishedIkeSas(s: SaStatus): IkeSa[] {
  return s.ikeSas.filter((i) => i.state === "ESTABLISHED");
}

/** CHILD SAs whose keys are in the kernel or libipsec (`INSTALLED`). */
export function installedChildSas(s: SaStatus): ChildSa[] {
  return s.childSas.filter((c) => c.state === "INSTALLED");
}
