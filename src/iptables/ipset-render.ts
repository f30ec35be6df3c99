/**
 * @module iptables/ipset-render — IP sets back to `ipset restore` input (`create`/`add` lines),
 * from either form they were read in (an `ipset list` header carries the create options), with
 * extra members added: how a replay puts a node's sets (and a plan's change to them) on a kernel.
 */
import type { IpsetDump } from "./ipset-parser.ts";

/** Options `ipset restore` accepts on `create` but that describe runtime state, not the set. */
const RUNTIME = new Set(["initval", "bucketsize"]);

/**
 * The dump as `ipset restore` input; `extra` are `add NAME ELEMENT` lines (comments after `#`
 * dropped) appended to the sets they name. Members keep their element and `nomatch`.
 *
 * @example
 * ipsetRestoreInput(dump, ["add cali40masq-ipam-pools 10.245.0.0/16   # the plan"]);
 */
export function ipsetRestoreInput(dump: IpsetDump, extra: readonly string[] = []): string {
  const lines: string[] = [];
  const added = new Map<string, string[]>();
  for (const e of extra) {
    const w = e.replace(/#.*$/, "").trim().split(/\s+/);
    if (w[0] !== "add" || w[1] === undefined || w[2] === undefined) continue;
    added.set(w[1], [...(added.get(w[1]) ?? []), w.slice(2).join(" ")]);
  }
  for (const s of dump.sets.values()) {
    if (s.type === "") continue;
    const header: string[] = [];
    for (let i = 0; i < s.header.length; i++) {
      const h = s.header[i] ?? "";
      if (RUNTIME.has(h)) {
        i++;
        continue;
      }
      header.push(h);
    }
    lines.push(["create", s.name, s.type, ...header].join(" "));
    const have = new Set<string>();
    for (const m of s.members ?? []) {
      have.add(m.element);
      lines.push(`add ${s.name} ${m.element}${m.nomatch ? " nomatch" : ""}`);
    }
    for (const a of added.get(s.name) ?? []) {
      if (!have.has(a.split(" ")[0] ?? "")) lines.push(`add ${s.name} ${a}`);
    }
  }
  return `${lines.join("\n")}\n`;
}
