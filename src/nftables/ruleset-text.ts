/**
 * @module nftables/ruleset-text — `nft list ruleset` and `nft list table <family> <name>` (with or
 * without `-a`, `-n`, `-nn`, `-s`) read into an {@link NftRuleset}: the blocks of tables, chains,
 * sets and maps, each rule with its line. Goes on after a bad line; what it skips is a diagnostic
 * with file and line.
 */

import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import type {
  NftBaseChain,
  NftChain,
  NftFamily,
  NftRule,
  NftRuleset,
  NftSet,
  NftTable,
} from "./model.ts";
import { parseElementList, parseNftRuleText, valueTypes } from "./rule-text.ts";
import { braceDepth, splitHandle, tokenizeNft } from "./tokens.ts";

const FAMILIES = new Set<string>(["ip", "ip6", "inet", "arp", "bridge", "netdev"]);

// nft's priority names (nft(8), CHAINS): per family, bridge has its own
const PRIORITY: Record<string, number> = {
  raw: -300,
  mangle: -150,
  dstnat: -100,
  filter: 0,
  security: 50,
  srcnat: 100,
};
const BRIDGE_PRIORITY: Record<string, number> = {
  dstnat: -300,
  filter: -200,
  out: 100,
  srcnat: 300,
};

/** `dstnat`, `dstnat - 10`, `-110`, `filter + 5` as a number; undefined when not one. */
export function priorityOf(words: readonly string[], family: NftFamily): number | undefined {
  const names = family === "bridge" ? BRIDGE_PRIORITY : PRIORITY;
  const base = (w: string | undefined): number | undefined =>
    w === undefined ? undefined : /^-?\d+$/.test(w) ? Number(w) : names[w];
  const b = base(words[0]);
  if (b === undefined) return undefined;
  if (words.length === 1) return b;
  const n = Number(words[2]);
  if (words.length !== 3 || !Number.isInteger(n)) return undefined;
  if (words[1] === "+") return b + n;
  if (words[1] === "-") return b - n;
  return undefined;
}

interface Block {
  kind: "table" | "chain" | "set" | "skip";
  table?: NftTable;
  chain?: NftChain;
  set?: { set: NftSet; keyWords: string[]; dataWords?: string[]; elementWords?: string[] };
  elementsLine?: SourceRef;
}

/**
 * Reads nft's text listing. `# Warning: table ip nat is managed by iptables-nft` lines (nft's
 * stderr, often pasted with the listing) mark those tables as iptables-nft's.
 *
 * @example
 * const { value } = parseNftText(text, "nodes/n1/nft-ruleset.txt");
 * value.tables.find((t) => t.name === "kube-proxy")?.chains.get("services")?.rules[1]?.source.line
 */
export function parseNftText(text: string, file: string): Parsed<NftRuleset> {
  const diagnostics: Diagnostic[] = [];
  const tables: NftTable[] = [];
  const managed = new Set<string>();
  const stack: Block[] = [];
  const lines = text.split("\n");
  // a line is cited with its text, cut to 300 characters (a set's elements can run long)
  const at = (line: number, t: string): SourceRef => ({ file, line, text: cut(t.trim()) });
  const problem = (
    code: string,
    severity: "error" | "warning",
    line: number,
    t: string,
    message: string,
  ) => diagnostics.push({ code, severity, message, source: at(line, t) });

  for (let i = 0; i < lines.length; i++) {
    let raw = lines[i]!;
    const lineNo = i + 1;
    const trimmed = raw.trim();
    if (trimmed === "") continue;
    const warn = /^# Warning: table (\S+) (\S+) is managed by iptables-nft/.exec(trimmed);
    if (warn) {
      managed.add(`${warn[1]} ${warn[2]}`);
      continue;
    }
    if (trimmed.startsWith("#")) continue;
    // a line whose braces do not close continues on the next (set elements, long rules)
    // (at most 100,000 lines: nft prints a set's elements a few per line)
    let depth = braceDepth(raw);
    const first = i;
    if (depth > 0 && !/\{\s*(#.*)?$/.test(raw.trim())) {
      const parts = [raw];
      while (depth > 0 && i + 1 < lines.length && i - first < 100_000) {
        const next = lines[++i]!.trim();
        parts.push(next);
        depth += braceDepth(next);
      }
      raw = parts.join(" ");
    }
    const { body } = splitHandle(raw);
    const handle = splitHandle(raw).handle;
    const words = tokenizeNft(body);
    const top = stack.at(-1);
    if (words.length === 1 && words[0] === "}") {
      if (!top) {
        problem("NFT_SYNTAX", "error", lineNo, raw, "a closing } without an open block");
        continue;
      }
      stack.pop();
      if (top.kind === "set" && top.set && top.table) finishSet(top, diagnostics, file);
      continue;
    }
    if (!top) {
      if (
        words[0] === "table" &&
        words.at(-1) === "{" &&
        words.length === 4 &&
        FAMILIES.has(words[1]!)
      ) {
        const family = words[1] as NftFamily;
        const name = words[2]!;
        const table: NftTable = {
          family,
          name,
          source: at(lineNo, raw),
          chains: new Map(),
          sets: new Map(),
          iptablesNft: managed.has(`${family} ${name}`),
        };
        tables.push(table);
        stack.push({ kind: "table", table });
      } else {
        problem(
          "NFT_SYNTAX",
          "error",
          lineNo,
          raw,
          `expected "table <family> <name> {" (family ip, ip6, inet, arp, bridge or netdev), found "${trimmed.slice(0, 60)}"`,
        );
      }
      continue;
    }
    if (top.kind === "skip") {
      if (words.at(-1) === "{") stack.push({ kind: "skip" });
      continue;
    }
    if (top.kind === "table") {
      const table = top.table!;
      if (
        (words[0] === "chain" || words[0] === "set" || words[0] === "map") &&
        words.at(-1) === "{"
      ) {
        const name = words.slice(1, -1).map(unquote).join(" ");
        if (words[0] === "chain") {
          const chain: NftChain = { name, source: at(lineNo, raw), rules: [] };
          table.chains.set(name, chain);
          stack.push({ kind: "chain", table, chain });
        } else {
          const set: NftSet = {
            name,
            source: at(lineNo, raw),
            keyTypes: [],
            flags: [],
            elements: [],
            ...(words[0] === "map" ? { data: [] } : {}),
          };
          table.sets.set(name, set);
          stack.push({ kind: "set", table, set: { set, keyWords: [] } });
        }
      } else if (words[0] === "comment" || words[0] === "flags") {
        // the table's comment, dormant flag
      } else if (words.at(-1) === "{") {
        problem(
          "NFT_UNKNOWN_BLOCK",
          "warning",
          lineNo,
          raw,
          `"${words[0]}" blocks (flowtables, counters, quotas, ct helpers) are not read`,
        );
        stack.push({ kind: "skip" });
      } else {
        problem(
          "NFT_SYNTAX",
          "error",
          lineNo,
          raw,
          `expected a chain, set or map in table ${table.name}`,
        );
      }
      continue;
    }
    if (top.kind === "set") {
      readSetLine(top, words, at(lineNo, raw), diagnostics);
      continue;
    }
    // a chain: its declaration or a rule
    const chain = top.chain!;
    if (words[0] === "type" && words.includes("hook")) {
      const base = baseChainOf(words, top.table!.family);
      if (base) (chain as { base?: NftBaseChain }).base = base;
      else
        problem(
          "NFT_SYNTAX",
          "error",
          lineNo,
          raw,
          "expected type <t> hook <h> priority <p>; policy <accept|drop>;",
        );
      continue;
    }
    if (words[0] === "policy") {
      const p = words[1];
      if (chain.base && (p === "accept" || p === "drop")) {
        (chain as { base?: NftBaseChain }).base = { ...chain.base, policy: p };
      }
      continue;
    }
    if (words[0] === "comment" && words.length === 2) continue;
    const sets = top.table!.sets;
    const parsed = parseNftRuleText(words, { setTypes: (n) => sets.get(n)?.keyTypes });
    const rule: NftRule = {
      statements: parsed.statements,
      source: at(lineNo, raw),
      ...(handle !== undefined ? { handle } : {}),
      ...(parsed.comment !== undefined ? { comment: parsed.comment } : {}),
    };
    chain.rules.push(rule);
    if (parsed.problem) {
      problem(
        "NFT_UNKNOWN_EXPRESSION",
        "warning",
        lineNo,
        raw,
        `${parsed.problem}: a flow reaching this rule of chain ${chain.name} is undecided`,
      );
    }
  }
  if (stack.length > 0) {
    problem(
      "NFT_TRUNCATED",
      "error",
      lines.length,
      lines.at(-1) ?? "",
      `the listing ends inside ${stack.length} open block(s): what follows is not shown`,
    );
    for (const b of stack) if (b.kind === "set") finishSet(b, diagnostics, file);
  }
  return { value: { file, format: "text", tables }, diagnostics };
}

function cut(t: string): string {
  return t.length > 300 ? `${t.slice(0, 297)}...` : t;
}

function unquote(w: string): string {
  return w.startsWith('"') && w.endsWith('"') ? w.slice(1, -1) : w;
}

function baseChainOf(words: readonly string[], family: NftFamily): NftBaseChain | undefined {
  // type nat hook prerouting priority dstnat ; policy accept ;  (device eth0 ; for netdev)
  const type = words[1];
  const hook = words[words.indexOf("hook") + 1];
  const pi = words.indexOf("priority");
  if (!type || !hook || pi < 0) return undefined;
  const end = words.indexOf(";", pi);
  const priority = priorityOf(words.slice(pi + 1, end < 0 ? undefined : end), family);
  if (priority === undefined) return undefined;
  const po = words.indexOf("policy");
  const policy = po >= 0 ? words[po + 1] : "accept";
  if (policy !== "accept" && policy !== "drop") return undefined;
  return { type, hook, priority, policy };
}

function readSetLine(
  b: Block,
  words: readonly string[],
  src: SourceRef,
  diagnostics: Diagnostic[],
): void {
  const s = b.set!;
  const set = s.set as unknown as { keyTypes: string[]; flags: string[]; dataType?: string };
  if (words[0] === "type" || words[0] === "typeof") {
    const colon = words.indexOf(":");
    const key = words.slice(1, colon < 0 ? undefined : colon).filter((w) => w !== ".");
    if (words[0] === "typeof") {
      diagnostics.push({
        code: "NFT_UNKNOWN_EXPRESSION",
        severity: "warning",
        message: `set ${s.set.name} is declared with typeof: its elements are not read`,
        source: src,
      });
      return;
    }
    set.keyTypes.push(...key);
    if (colon >= 0) set.dataType = words.slice(colon + 1).join(" ");
    return;
  }
  if (words[0] === "flags") {
    set.flags.push(...words.slice(1).filter((w) => w !== ","));
    return;
  }
  if (words[0] === "elements" && words[1] === "=") {
    const open = words.indexOf("{");
    const close = words.lastIndexOf("}");
    s.elementWords = [...(s.elementWords ?? []), ...words.slice(open + 1, close)];
    b.elementsLine = src;
  }
  // comment, size, timeout, gc-interval, policy, counter, auto-merge: not used
}

function finishSet(b: Block, diagnostics: Diagnostic[], _file: string): void {
  const s = b.set!;
  if (!s.elementWords || s.elementWords.length === 0) return;
  if (s.set.keyTypes.length === 0) return;
  const data = s.set.dataType;
  const r = parseElementList(
    s.elementWords,
    valueTypes(s.set.keyTypes),
    data === undefined
      ? undefined
      : data === "verdict"
        ? "verdict"
        : valueTypes(data.split(" ").filter((w) => w !== ".")),
  );
  s.set.elements.push(...r.elements);
  if (r.data) (s.set as { data?: unknown[] }).data = r.data;
  if (r.problem) {
    diagnostics.push({
      code: "NFT_SYNTAX",
      severity: "error",
      message: `set ${s.set.name}: ${r.problem}; ${r.elements.length} element(s) before it are kept`,
      ...(b.elementsLine ? { source: b.elementsLine } : {}),
    });
  }
}
