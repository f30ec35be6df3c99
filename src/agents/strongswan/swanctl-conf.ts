/**
 * @module agents/strongswan/swanctl-conf — `swanctl.conf` (strongSwan's settings syntax, read by
 * `swanctl --load-all`): `connections { NAME { local_addrs remote_addrs pools children { CHILD {
 * local_ts remote_ts updown } } } }` and `pools { NAME { addrs } }`, with the line of each value.
 */

import type { Diagnostic, Located, Parsed, SourceRef } from "../../model/types.ts";
import {
  parseSelectorList,
  parseSourceIp,
  type SourceIp,
  type TrafficSelector,
} from "./selectors.ts";

/** A node of the settings tree: a section with values and subsections, each with its line. */
interface Section {
  readonly name: string;
  readonly source: SourceRef;
  readonly values: Map<string, Located<string>>;
  readonly sections: Section[];
}

export interface SwanctlChild {
  readonly name: string;
  readonly source: SourceRef;
  /** `local_ts`: what this end puts into the tunnel (default: its own address, `dynamic`). */
  readonly localTs: readonly Located<TrafficSelector>[];
  readonly localDynamic: boolean;
  readonly remoteTs: readonly Located<TrafficSelector>[];
  readonly remoteDynamic: boolean;
  readonly updown?: Located<string>;
  readonly startAction?: Located<string>;
}

export interface SwanctlConnection {
  readonly name: string;
  readonly source: SourceRef;
  readonly localAddrs?: Located<string>;
  readonly remoteAddrs?: Located<string>;
  /** `pools = a, b`: names of `pools` sections handing virtual IPs to peers. */
  readonly pools: readonly Located<string>[];
  /** `vips = 0.0.0.0`: this end asks the peer for an address. */
  readonly vips?: Located<string>;
  readonly children: readonly SwanctlChild[];
}

export interface SwanctlPool {
  readonly name: string;
  readonly source: SourceRef;
  readonly addrs?: Located<SourceIp>;
}

export interface SwanctlConf {
  readonly file: string;
  readonly connections: readonly SwanctlConnection[];
  readonly pools: readonly SwanctlPool[];
}

const cite = (file: string, line: number, t: string): SourceRef =>
  t.length > 500 ? { file, line } : { file, line, text: t };

/** The settings tree; unbalanced braces and stray lines become diagnostics. */
function readTree(text: string, file: string, lineOffset: number, diagnostics: Diagnostic[]) {
  const root: Section = { name: "", source: { file, line: 1 }, values: new Map(), sections: [] };
  const stack: Section[] = [root];
  const warn = (source: SourceRef, message: string) =>
    diagnostics.push({ code: "SWANCTL_CONF_SYNTAX", severity: "warning", message, source });
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, idx) => {
    const line = idx + 1 + lineOffset;
    const full = raw.trim();
    const source = cite(file, line, full);
    let rest = full;
    while (rest !== "") {
      if (rest.startsWith("#")) break;
      const top = stack.at(-1) ?? root;
      if (rest.startsWith("}")) {
        if (stack.length > 1) stack.pop();
        else warn(source, "a } with no open section: expected it to close a NAME { section");
        rest = rest.slice(1).trim();
        continue;
      }
      const open = /^([^\s{}=#]+)\s*\{/.exec(rest);
      if (open?.[1]) {
        const s: Section = { name: open[1], source, values: new Map(), sections: [] };
        top.sections.push(s);
        stack.push(s);
        rest = rest.slice(open[0].length).trim();
        continue;
      }
      const kv = /^([^\s{}=#]+)\s*=\s*/.exec(rest);
      if (kv?.[1]) {
        let after = rest.slice(kv[0].length);
        let value: string;
        if (after.startsWith('"')) {
          const end = after.indexOf('"', 1);
          if (end < 0) {
            warn(source, `${kv[1]}: expected a closing " for the quoted value`);
            value = after.slice(1);
            after = "";
          } else {
            value = after.slice(1, end);
            after = after.slice(end + 1);
          }
        } else {
          const stop = after.search(/[#}]/);
          value = (stop < 0 ? after : after.slice(0, stop)).trim();
          after = stop < 0 ? "" : after.slice(stop);
        }
        top.values.set(kv[1], { value, source });
        rest = after.trim();
        continue;
      }
      if (/^include\s/.test(rest)) {
        diagnostics.push({
          code: "SWANCTL_CONF_INCLUDE",
          severity: "info",
          message: `"${full.slice(0, 200)}": included files are not read; put their text in the snapshot`,
          source,
        });
        break;
      }
      warn(source, `"${rest.slice(0, 80)}": expected NAME {, key = value or }`);
      break;
    }
  });
  if (stack.length > 1) {
    const open = stack.at(-1);
    warn(
      open?.source ?? { file, line: 1 },
      `section ${open?.name ?? ""} is never closed: expected a } before the end of the file`,
    );
  }
  return root;
}

/**
 * Reads a `swanctl.conf`. Sections other than `connections` and `pools` (secrets, authorities)
 * are skipped; bad selectors and pools become diagnostics, the rest is kept.
 *
 * @example parseSwanctlConf("pools {\n rw { addrs = 10.9.0.0/24 }\n}\n", "swanctl.conf").value.pools[0].name
 */
export function parseSwanctlConf(text: string, file: string, lineOffset = 0): Parsed<SwanctlConf> {
  const diagnostics: Diagnostic[] = [];
  const root = readTree(text, file, lineOffset, diagnostics);
  const warn = (source: SourceRef, message: string) =>
    diagnostics.push({ code: "SWANCTL_CONF_VALUE", severity: "warning", message, source });
  const selectors = (v: Located<string> | undefined, key: string) => {
    if (!v) return { list: [] as Located<TrafficSelector>[], dynamic: true };
    const r = parseSelectorList(v.value);
    for (const e of r.errors)
      warn(v.source, `${key}: ${e}; expected a CIDR, an address or a range`);
    return {
      list: r.selectors.map((s) => ({ value: s, source: v.source })),
      dynamic: r.dynamic || (r.selectors.length === 0 && r.errors.length === 0),
    };
  };
  const connections: SwanctlConnection[] = [];
  for (const top of root.sections.filter((s) => s.name === "connections")) {
    for (const c of top.sections) {
      const children: SwanctlChild[] = [];
      for (const ch of c.sections.filter((s) => s.name === "children").flatMap((s) => s.sections)) {
        const l = selectors(ch.values.get("local_ts"), "local_ts");
        const r = selectors(ch.values.get("remote_ts"), "remote_ts");
        const updown = ch.values.get("updown");
        const startAction = ch.values.get("start_action");
        children.push({
          name: ch.name,
          source: ch.source,
          localTs: l.list,
          localDynamic: l.dynamic,
          remoteTs: r.list,
          remoteDynamic: r.dynamic,
          ...(updown && updown.value !== "" ? { updown } : {}),
          ...(startAction ? { startAction } : {}),
        });
      }
      const pools = c.values.get("pools");
      const localAddrs = c.values.get("local_addrs");
      const remoteAddrs = c.values.get("remote_addrs");
      const vips = c.values.get("vips");
      connections.push({
        name: c.name,
        source: c.source,
        pools: pools
          ? pools.value
              .split(/\s*,\s*/)
              .filter((p) => p !== "")
              .map((p) => ({ value: p, source: pools.source }))
          : [],
        children,
        ...(localAddrs ? { localAddrs } : {}),
        ...(remoteAddrs ? { remoteAddrs } : {}),
        ...(vips ? { vips } : {}),
      });
    }
  }
  const pools: SwanctlPool[] = [];
  for (const top of root.sections.filter((s) => s.name === "pools")) {
    for (const p of top.sections) {
      const a = p.values.get("addrs");
      let addrs: Located<SourceIp> | undefined;
      if (a) {
        const r = parseSourceIp(a.value);
        if ("error" in r) warn(a.source, `addrs: ${r.error}; expected a CIDR or a range`);
        else addrs = { value: r, source: a.source };
      }
      pools.push({ name: p.name, source: p.source, ...(addrs ? { addrs } : {}) });
    }
  }
  for (const c of connections) {
    for (const p of c.pools) {
      if (!pools.some((x) => x.name === p.value) && !/^(dhcp|radius)$/.test(p.value))
        warn(p.source, `pools = ${p.value}: expected a section of that name under pools { }`);
    }
  }
  return { value: { file, connections, pools }, diagnostics };
}
