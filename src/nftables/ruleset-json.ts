/**
 * @module nftables/ruleset-json — `nft -j list ruleset` (libnftables' JSON schema) read into the
 * same {@link NftRuleset} as the text listing: each rule's JSON statements are written back in
 * nft's own syntax (also the text a report cites) and read by the same rule reader, so both forms
 * mean the same. JSON statements podpath does not read (iptables-nft's `xt` matches and targets)
 * become `unknown` statements, named.
 */

import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import type { NftChain, NftFamily, NftRuleset, NftSet, NftTable } from "./model.ts";
import { parseElementList, parseNftRuleText, valueTypes } from "./rule-text.ts";
import { priorityOf } from "./ruleset-text.ts";
import { tokenizeNft } from "./tokens.ts";

type J = unknown;

const isObj = (v: J): v is Record<string, J> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The one key of a `{ "kind": body }` object. */
function only(v: J): [string, J] | undefined {
  if (!isObj(v)) return undefined;
  const keys = Object.keys(v);
  return keys.length === 1 ? [keys[0]!, v[keys[0]!]] : undefined;
}

/** A JSON expression written as nft prints it; undefined when it has no text form here. */
export function exprText(e: J): string | undefined {
  if (typeof e === "string")
    return e.startsWith("@") ? e : /[\s{},"]/.test(e) ? JSON.stringify(e) : e;
  if (typeof e === "number") return String(e);
  if (Array.isArray(e)) {
    const parts = e.map(exprText);
    return parts.every((p) => p !== undefined) ? parts.join(",") : undefined;
  }
  const kv = only(e);
  if (!kv) return undefined;
  const [k, b] = kv;
  const o = isObj(b) ? b : {};
  switch (k) {
    case "payload":
      return typeof o["protocol"] === "string" && typeof o["field"] === "string"
        ? `${o["protocol"]} ${o["field"]}`
        : undefined;
    case "meta":
      return typeof o["key"] === "string" ? `meta ${o["key"]}` : undefined;
    case "ct":
      return typeof o["key"] === "string" && o["dir"] === undefined ? `ct ${o["key"]}` : undefined;
    case "fib": {
      const flags = Array.isArray(o["flags"]) ? o["flags"] : [];
      return o["result"] === "type" && flags.length === 1
        ? `fib ${String(flags[0])} type`
        : undefined;
    }
    case "numgen":
      return o["mode"] === "random" && typeof o["mod"] === "number" && !o["offset"]
        ? `numgen random mod ${o["mod"]}`
        : undefined;
    case "concat":
    case "set": {
      if (!Array.isArray(b)) return undefined;
      const parts = b.map((x) => (k === "set" && Array.isArray(x) ? mapEntryText(x) : exprText(x)));
      if (parts.some((p) => p === undefined)) return undefined;
      return k === "concat" ? parts.join(" . ") : `{ ${parts.join(", ")} }`;
    }
    case "prefix":
      return `${exprText(o["addr"])}/${o["len"]}`;
    case "range":
      return Array.isArray(b) && b.length === 2 ? `${exprText(b[0])}-${exprText(b[1])}` : undefined;
    case "&":
    case "|":
    case "^": {
      if (!Array.isArray(b) || b.length !== 2) return undefined;
      const l = exprText(b[0]);
      const r = exprText(b[1]);
      return l && r ? `${l} ${k} ${r}` : undefined;
    }
    case "accept":
    case "drop":
    case "return":
    case "continue":
      return k;
    case "jump":
    case "goto":
      return typeof o["target"] === "string" ? `${k} ${quoteName(o["target"])}` : undefined;
    default:
      return undefined;
  }
}

function quoteName(n: string): string {
  return /[\s{},"]/.test(n) ? JSON.stringify(n) : n;
}

function mapEntryText(pair: J[]): string | undefined {
  const k = exprText(elemValue(pair[0]));
  const d = exprText(pair[1]);
  return k && d ? `${k} : ${d}` : undefined;
}

/** One JSON statement written as nft prints it; `xt ...` and unknown kinds keep their name. */
function statementText(s: J): string {
  const kv = only(s);
  if (!kv) return "unreadable-statement";
  const [k, b] = kv;
  const o = isObj(b) ? b : {};
  const flags = (): string => {
    const f = o["flags"];
    return Array.isArray(f) ? ` ${f.join(" ")}` : typeof f === "string" ? ` ${f}` : "";
  };
  switch (k) {
    case "match": {
      const l = exprText(o["left"]);
      const r = exprText(o["right"]);
      const op = o["op"] === "in" || o["op"] === "==" ? "" : ` ${String(o["op"])}`;
      return l && r ? `${l}${op} ${r}` : `match-expression ${JSON.stringify(b)}`;
    }
    case "vmap": {
      const key = exprText(o["key"]);
      const data = exprText(o["data"]);
      return key && data ? `${key} vmap ${data}` : `vmap-expression ${JSON.stringify(b)}`;
    }
    case "counter":
      return "counter";
    case "log":
      return "log";
    case "notrack":
      return "notrack";
    case "reject": {
      if (!isObj(b)) return "reject";
      const t = o["type"];
      const x = o["expr"];
      return `reject with ${String(t)}${x !== undefined ? ` ${String(x)}` : ""}`;
    }
    case "masquerade":
    case "snat":
    case "dnat":
    case "redirect": {
      const fam = typeof o["family"] === "string" ? ` ${o["family"]}` : "";
      const addr = o["addr"];
      let to = "";
      const m = only(addr);
      if (m && m[0] === "map" && isObj(m[1])) {
        const key = exprText(m[1]["key"]);
        const data = exprText(m[1]["data"]);
        to = ` to ${key} map ${data}`;
      } else if (addr !== undefined) {
        const a = exprText(addr) ?? "?";
        const shown = a.includes(":") ? `[${a}]` : a;
        to = ` to ${shown}${o["port"] !== undefined ? `:${exprText(o["port"])}` : ""}`;
      } else if (o["port"] !== undefined) {
        to = ` to :${exprText(o["port"])}`;
      }
      return `${k}${to ? fam : ""}${to}${flags()}`;
    }
    case "mangle": {
      const key = exprText(o["key"]);
      const value = exprText(o["value"]);
      return key === "meta mark" && value
        ? `meta mark set ${value}`
        : `mangle ${JSON.stringify(b)}`;
    }
    case "xt":
      return `xt ${String(o["type"])} ${JSON.stringify(String(o["name"]))}`;
    case "set": {
      // { "set": { "op": "update", "elem": { "payload": ... }, "set": "@name" } }
      const elem = exprText(o["elem"]);
      return elem && typeof o["set"] === "string"
        ? `${String(o["op"])} ${o["set"]} { ${elem} }`
        : `set ${JSON.stringify(b)}`;
    }
    default: {
      const t = exprText(s);
      return t ?? `${k} ${JSON.stringify(b)}`;
    }
  }
}

/**
 * Reads `nft -j list ruleset` (or `nft -j list table ...`). Rules are cited by the line their
 * object starts on (line 1 for nft's one-line output) with their text in nft's syntax.
 */
export function parseNftJson(text: string, file: string): Parsed<NftRuleset> {
  const diagnostics: Diagnostic[] = [];
  const tables: NftTable[] = [];
  let doc: J;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    const m = /position (\d+)/.exec((e as Error).message);
    const line = m ? text.slice(0, Number(m[1])).split("\n").length : 1;
    diagnostics.push({
      code: "NFT_JSON",
      severity: "error",
      message: `not valid JSON (${(e as Error).message}); expected the output of nft -j list ruleset`,
      source: { file, line },
    });
    return { value: { file, format: "json", tables }, diagnostics };
  }
  const list = isObj(doc) && Array.isArray(doc["nftables"]) ? doc["nftables"] : undefined;
  if (!list) {
    diagnostics.push({
      code: "NFT_JSON",
      severity: "error",
      message: 'expected an object {"nftables": [...]} as nft -j list ruleset prints',
      source: { file, line: 1 },
    });
    return { value: { file, format: "json", tables }, diagnostics };
  }
  // the line each top-level object starts on, for pretty-printed files
  const starts = objectLines(text);
  const tableKey = (f: J, n: J) => `${String(f)} ${String(n)}`;
  const byKey = new Map<string, NftTable>();
  const at = (i: number, t: string): SourceRef => ({
    file,
    line: starts[i] ?? 1,
    text: t.length > 300 ? `${t.slice(0, 297)}...` : t,
  });
  const problem = (i: number, code: string, message: string, t = "") =>
    diagnostics.push({ code, severity: "warning", message, source: at(i, t) });
  const readItem = (item: J, i: number): void => {
    const kv = only(item);
    if (!kv || !isObj(kv[1])) return;
    const [kind, o] = kv;
    const table = byKey.get(tableKey(o["family"], o["table"]));
    switch (kind) {
      case "table": {
        const t: NftTable = {
          family: String(o["family"]) as NftFamily,
          name: String(o["name"]),
          source: at(i, `table ${o["family"]} ${o["name"]}`),
          chains: new Map(),
          sets: new Map(),
          iptablesNft: false,
        };
        tables.push(t);
        byKey.set(tableKey(o["family"], o["name"]), t);
        return;
      }
      case "chain": {
        if (!table) {
          problem(i, "NFT_JSON", `chain ${o["name"]} of a table not listed`);
          return;
        }
        const name = String(o["name"]);
        const chain: NftChain = { name, source: at(i, `chain ${name}`), rules: [] };
        if (typeof o["hook"] === "string") {
          const prio =
            typeof o["prio"] === "number"
              ? o["prio"]
              : priorityOf([String(o["prio"])], table.family);
          (chain as { base?: NftChain["base"] }).base = {
            type: String(o["type"]),
            hook: o["hook"],
            priority: prio ?? 0,
            policy: o["policy"] === "drop" ? "drop" : "accept",
          };
        }
        table.chains.set(name, chain);
        return;
      }
      case "set":
      case "map": {
        if (!table) {
          problem(i, "NFT_JSON", `set ${o["name"]} of a table not listed`);
          return;
        }
        const keyTypes = Array.isArray(o["type"]) ? o["type"].map(String) : [String(o["type"])];
        const dataType =
          kind === "map"
            ? Array.isArray(o["map"])
              ? o["map"].join(" . ")
              : String(o["map"])
            : undefined;
        const set: NftSet = {
          name: String(o["name"]),
          source: at(i, `${kind} ${o["name"]}`),
          keyTypes,
          ...(dataType ? { dataType, data: [] } : {}),
          flags: Array.isArray(o["flags"]) ? o["flags"].map(String) : [],
          elements: [],
        };
        table.sets.set(set.name, set);
        const elems = Array.isArray(o["elem"]) ? o["elem"] : [];
        const words = tokenizeNft(
          elems
            .map((e) =>
              kind === "map" && Array.isArray(e) ? mapEntryText(e) : exprText(elemValue(e)),
            )
            .map((t) => t ?? "?")
            .join(", "),
        );
        if (words.length === 0) return;
        const r = parseElementList(
          words,
          valueTypes(keyTypes),
          dataType === undefined
            ? undefined
            : dataType === "verdict"
              ? "verdict"
              : valueTypes(dataType.split(" . ")),
        );
        set.elements.push(...r.elements);
        if (r.data) (set as { data?: unknown[] }).data = r.data;
        if (r.problem) problem(i, "NFT_JSON", `${kind} ${set.name}: ${r.problem}`);
        return;
      }
      case "rule": {
        const chain = table?.chains.get(String(o["chain"]));
        if (!table || !chain) {
          problem(i, "NFT_JSON", `a rule of chain ${o["chain"]} not listed`);
          return;
        }
        const exprs = Array.isArray(o["expr"]) ? o["expr"] : [];
        const t = exprs.map(statementText).join(" ");
        const comment =
          typeof o["comment"] === "string" ? ` comment ${JSON.stringify(o["comment"])}` : "";
        const parsed = parseNftRuleText(tokenizeNft(t + comment), {
          setTypes: (n) => table.sets.get(n)?.keyTypes,
        });
        const handle = typeof o["handle"] === "number" ? o["handle"] : undefined;
        chain.rules.push({
          statements: parsed.statements,
          source: at(i, t + comment),
          ...(handle !== undefined ? { handle } : {}),
          ...(parsed.comment !== undefined ? { comment: parsed.comment } : {}),
        });
        if (parsed.problem) {
          problem(
            i,
            "NFT_UNKNOWN_EXPRESSION",
            `${parsed.problem}: a flow reaching this rule (handle ${handle}) of chain ${chain.name} is undecided`,
            t,
          );
        }
        return;
      }
      default:
        return;
    }
  };
  list.forEach(readItem);
  // iptables-nft marks its tables only in its own rules' xt expressions and chain names
  for (const t of tables) {
    const xt = [...t.chains.values()].some((c) =>
      c.rules.some((r) => r.source.text?.includes("xt ")),
    );
    if (xt) (t as { iptablesNft: boolean }).iptablesNft = true;
  }
  return { value: { file, format: "json", tables }, diagnostics };
}

/** A set element as JSON shows it: a value, or `{ "elem": { "val": v, "comment": ... } }`. */
function elemValue(e: J): J {
  const kv = only(e);
  if (kv && kv[0] === "elem" && isObj(kv[1])) return kv[1]["val"];
  return e;
}

/** For each element of the top-level array, the 1-based line it starts on. */
function objectLines(text: string): number[] {
  const out: number[] = [];
  let depth = 0;
  let line = 1;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\n") line++;
    if (quoted) {
      if (c === "\\") i++;
      else if (c === '"') quoted = false;
      continue;
    }
    if (c === '"') quoted = true;
    else if (c === "{" || c === "[") {
      depth++;
      if (depth === 3 && c === "{") out.push(line);
    } else if (c === "}" || c === "]") depth--;
  }
  return out;
}
