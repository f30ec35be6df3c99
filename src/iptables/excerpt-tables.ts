/**
 * @module iptables/excerpt-tables — the table of each line of a headless excerpt (`iptables-save |
 * grep KUBE`: no `*table` lines, its lines from several tables). A line's table is what its chain
 * and its target allow together: KUBE-SVC-*, KUBE-SEP-*, KUBE-MARK-MASQ and NAT targets are nat's;
 * KUBE-FORWARD, KUBE-FIREWALL and REJECT are filter's; KUBE-SERVICES and KUBE-NODEPORTS are in both,
 * PREROUTING in raw, mangle and nat. iptables-save prints each table in one block, its chain
 * declarations first: a grep keeps that order, so a `:CHAIN` line after rule lines starts the next
 * table, and a block whose certain lines all name one table is that table (when the text starts
 * with a declaration, as a dump's grep does: sorted text has lost the order). A line that could be in
 * more than one table, and whose block does not say, is left out and named.
 */
import type { TableName } from "./dump.ts";

const ALL: readonly TableName[] = ["raw", "mangle", "nat", "filter", "security"];

const BUILTIN: Readonly<Record<string, readonly TableName[]>> = {
  PREROUTING: ["raw", "mangle", "nat"],
  INPUT: ["mangle", "nat", "filter", "security"],
  FORWARD: ["mangle", "filter", "security"],
  OUTPUT: ALL,
  POSTROUTING: ["mangle", "nat"],
};

/** kube-proxy's and kubelet's chains, by the tables they create them in. */
const KUBE: Readonly<Record<string, readonly TableName[]>> = {
  "KUBE-SERVICES": ["nat", "filter"],
  "KUBE-NODEPORTS": ["nat", "filter"],
  "KUBE-MARK-MASQ": ["nat"],
  "KUBE-MARK-DROP": ["nat"],
  "KUBE-POSTROUTING": ["nat"],
  "KUBE-LOAD-BALANCER": ["nat"],
  "KUBE-LOOP-BACK": ["nat"],
  "KUBE-NODE-PORT": ["nat"],
  "KUBE-FORWARD": ["filter"],
  "KUBE-FIREWALL": ["filter"],
  "KUBE-EXTERNAL-SERVICES": ["filter"],
  "KUBE-PROXY-FIREWALL": ["filter"],
  "KUBE-SOURCE-RANGES-FIREWALL": ["filter"],
  "KUBE-IPVS-FILTER": ["filter"],
  "KUBE-IPVS-OUT-FILTER": ["filter"],
  "KUBE-PROXY-CANARY": ["mangle", "nat", "filter"],
  "KUBE-KUBELET-CANARY": ["mangle", "nat", "filter"],
};

/** The tables a chain of this name can be in; undefined when its name does not say. */
function chainTables(name: string): readonly TableName[] | undefined {
  return (
    BUILTIN[name] ??
    KUBE[name] ??
    (/^KUBE-(SVC|SVL|SEP|FW|XLB|EXT)-/.test(name) ? ["nat"] : undefined)
  );
}

/** The tables a target is valid in; undefined for one valid everywhere (or not known). */
function targetTables(target: string): readonly TableName[] | undefined {
  if (/^(DNAT|SNAT|MASQUERADE|REDIRECT|NETMAP)$/.test(target)) return ["nat"];
  // REJECT: only at INPUT, FORWARD and OUTPUT (never in raw or nat)
  if (target === "REJECT") return ["mangle", "filter", "security"];
  if (target === "CT" || target === "NOTRACK") return ["raw"];
  if (target === "TPROXY") return ["mangle"];
  // a jump stays in its table
  return chainTables(target);
}

const meet = (a: readonly TableName[] | undefined, b: readonly TableName[] | undefined) =>
  a === undefined ? b : b === undefined ? a : a.filter((t) => b.includes(t));

/** The tables one `-A`/`-I`/`:` line can be in (every table when nothing says). */
export function lineTables(line: string): readonly TableName[] {
  const decl = /^:(\S+)/.exec(line);
  if (decl) return chainTables(decl[1]!) ?? ALL;
  const m = /^-[AI] (\S+)/.exec(line);
  if (!m) return ALL;
  const target = / -[jg] (\S+)/.exec(line)?.[1];
  return meet(chainTables(m[1]!), target ? targetTables(target) : undefined) ?? ALL;
}

/** How a headless excerpt's lines fall into tables. */
export interface ExcerptTables {
  /** Per table, the lines (0-based indexes) read as that table. */
  readonly tables: ReadonlyMap<TableName, readonly number[]>;
  /** Lines whose table could be more than one: left out, with the tables they could be in. */
  readonly unplaced: readonly { readonly line: number; readonly tables: readonly TableName[] }[];
  /** Lines placed only by the block they are in (their own chain and target allow more). */
  readonly byBlock: number;
}

/**
 * Places the lines `at` (0-based indexes into `lines`, in order) of a headless excerpt; undefined
 * when they do not mix tables (every certain line names the same table, or none does), which the
 * caller reads as one table as before.
 */
export function placeExcerptLines(
  lines: readonly string[],
  at: readonly number[],
): ExcerptTables | undefined {
  const cands = new Map(at.map((i) => [i, lineTables(lines[i]!)] as const));
  const certain = new Set<TableName>();
  for (const c of cands.values()) if (c.length === 1) certain.add(c[0]!);
  if (certain.size < 2) return undefined;
  // blocks: a declaration after a rule line, of a chain the block already declares, or out of
  // order (iptables-save sorts a table's chains by name) opens the next table's block. A split
  // too many only places fewer lines by their block, never one wrongly
  const blocks: number[][] = [];
  let ruleSeen = true;
  let declared = new Set<string>();
  let lastDecl = "";
  for (const i of at) {
    const decl = /^:(\S+)/.exec(lines[i]!)?.[1];
    const opens =
      decl !== undefined && (ruleSeen || declared.has(decl) || decl.localeCompare(lastDecl) < 0);
    if (blocks.length === 0 || opens) {
      blocks.push([]);
      ruleSeen = false;
      declared = new Set();
      lastDecl = "";
    }
    if (decl === undefined) ruleSeen = true;
    else {
      declared.add(decl);
      lastDecl = decl;
    }
    blocks[blocks.length - 1]!.push(i);
  }
  const tables = new Map<TableName, number[]>();
  const unplaced: { line: number; tables: readonly TableName[] }[] = [];
  let byBlock = 0;
  const put = (t: TableName, i: number) => {
    const l = tables.get(t);
    if (l) l.push(i);
    else tables.set(t, [i]);
  };
  // a dump's order starts with a table's declarations: text that does not (sorted, reordered) has
  // lost it, and no block says anything
  const ordered = at.length > 0 && lines[at[0]!]!.startsWith(":");
  for (const b of blocks) {
    const named = new Set(
      b.flatMap((i) => (cands.get(i)!.length === 1 ? [cands.get(i)![0]!] : [])),
    );
    const only = named.size === 1 ? [...named][0]! : undefined;
    const fits = ordered && only !== undefined && b.every((i) => cands.get(i)!.includes(only));
    for (const i of b) {
      const c = cands.get(i)!;
      if (c.length === 1) put(c[0]!, i);
      else if (fits) {
        put(only, i);
        byBlock++;
      } else unplaced.push({ line: i, tables: c });
    }
  }
  return { tables, unplaced, byBlock };
}
