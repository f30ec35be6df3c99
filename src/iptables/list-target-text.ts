/**
 * @module iptables/list-target-text — reads what a target prints at the end of an `iptables -L`
 * line back into the options iptables-save would print, for the targets podpath reasons about:
 * MASQUERADE (`masq ports: 1024-2048 random-fully`), SNAT/DNAT (`to:1.2.3.4:80 random persistent`),
 * REDIRECT (`redir ports 80`), NETMAP (`to:10.0.0.0/8`), MARK (`MARK or 0x4000`, `MARK xset 0x1/0xff`),
 * CONNMARK (`CONNMARK save mask 0xff`), LOG (`LOG flags 0 level 4 prefix "x"`) and REJECT
 * (`reject-with tcp-reset`). Verdicts and chains print nothing.
 */
import type { ModuleOption } from "./dump.ts";
import { LOG_LEVELS } from "./list-names.ts";
import type { Word } from "./list-words.ts";
import { hex } from "./values.ts";

/** Targets that print nothing after the matches. */
const SILENT = new Set(["ACCEPT", "DROP", "RETURN", "QUEUE", "TRACE"]);

/** Targets this module reads the print of. */
const READABLE = new Set([
  "MASQUERADE",
  "SNAT",
  "DNAT",
  "REDIRECT",
  "NETMAP",
  "MARK",
  "CONNMARK",
  "LOG",
  "REJECT",
]);

/** Is the print of this target (an extension name, or a chain) read here? */
export function isReadableTarget(name: string, isChain: boolean): boolean {
  return isChain || SILENT.has(name) || READABLE.has(name);
}

const opt = (name: string, ...values: string[]): ModuleOption => ({
  name,
  negated: false,
  values,
});

const HEX = /^0x[0-9a-f]{1,8}$/i;
const num = (s: string | undefined): number | undefined =>
  s !== undefined && HEX.test(s) ? Number.parseInt(s.slice(2), 16) : undefined;

/** MARK/CONNMARK `and|or|xor|set V`, `xset V/M` as the `--set-xmark V/M` they stand for. */
function markOp(op: string | undefined, v: string | undefined): string | undefined {
  if (op === "xset") {
    const slash = v?.indexOf("/") ?? -1;
    if (v === undefined || slash < 0) return undefined;
    const a = num(v.slice(0, slash));
    const b = num(v.slice(slash + 1));
    return a === undefined || b === undefined ? undefined : `${hex(a)}/${hex(b)}`;
  }
  const x = num(v);
  if (x === undefined) return undefined;
  // libxt_MARK / libxt_CONNMARK print (mark, mask) as the simplest of these
  switch (op) {
    case "and":
      return `0x0/${hex(~x >>> 0)}`;
    case "or":
      return `${hex(x)}/${hex(x)}`;
    case "xor":
      return `${hex(x)}/0x0`;
    case "set":
      return `${hex(x)}/0xffffffff`;
    default:
      return undefined;
  }
}

/**
 * The options of target `name` from its print, `words[i..]` to the end of the line (`line` for
 * quoted text); undefined when the words are not that target's print.
 */
export function readTargetText(
  name: string,
  isChain: boolean,
  line: string,
  words: readonly Word[],
  i: number,
): ModuleOption[] | undefined {
  const n = words.length;
  const w = (k: number) => words[k]?.text;
  if (isChain || SILENT.has(name)) return i === n ? [] : undefined;
  const out: ModuleOption[] = [];
  let k = i;
  switch (name) {
    case "MASQUERADE":
    case "REDIRECT": {
      if (name === "MASQUERADE" && w(k) === "masq" && w(k + 1) === "ports:" && w(k + 2)) {
        out.push(opt("--to-ports", w(k + 2)!));
        k += 3;
      } else if (name === "REDIRECT" && w(k) === "redir" && w(k + 1) === "ports" && w(k + 2)) {
        out.push(opt("--to-ports", w(k + 2)!));
        k += 3;
      }
      if (w(k) === "random") {
        out.push(opt("--random"));
        k++;
      }
      if (name === "MASQUERADE" && w(k) === "random-fully") {
        out.push(opt("--random-fully"));
        k++;
      }
      return k === n ? out : undefined;
    }
    case "SNAT":
    case "DNAT": {
      while (w(k)?.startsWith("to:")) {
        out.push(opt(name === "SNAT" ? "--to-source" : "--to-destination", w(k)!.slice(3)));
        k++;
      }
      for (const f of ["random", "random-fully", "persistent"]) {
        if (w(k) === f) {
          out.push(opt(`--${f}`));
          k++;
        }
      }
      return k === n && out.length > 0 ? out : undefined;
    }
    case "NETMAP":
      return w(k)?.startsWith("to:") && k + 1 === n ? [opt("--to", w(k)!.slice(3))] : undefined;
    case "MARK": {
      if (w(k) !== "MARK" || k + 3 !== n) return undefined;
      const v = markOp(w(k + 1), w(k + 2));
      return v === undefined ? undefined : [opt("--set-xmark", v)];
    }
    case "CONNMARK":
      return w(k) === "CONNMARK" ? connmark(words, k + 1) : undefined;
    case "LOG":
      return w(k) === "LOG" ? log(line, words, k + 1) : undefined;
    case "REJECT":
      return w(k) === "reject-with" && w(k + 1) && k + 2 === n
        ? [opt("--reject-with", w(k + 1)!)]
        : undefined;
    default:
      return undefined;
  }
}

/** libxt_CONNMARK rev 1: `save`, `save mask M`, `save nfmask X ctmask ~Y`, `restore ...`, set ops. */
function connmark(words: readonly Word[], k: number): ModuleOption[] | undefined {
  const w = (j: number) => words[j]?.text;
  const n = words.length;
  const mode = w(k);
  if (mode === "save" || mode === "restore") {
    const flag = opt(mode === "save" ? "--save-mark" : "--restore-mark");
    const all = "0xffffffff";
    if (k + 1 === n) return [flag, opt("--nfmask", all), opt("--ctmask", all)];
    if (w(k + 1) === "mask" && k + 3 === n) {
      const m = num(w(k + 2));
      return m === undefined ? undefined : [flag, opt("--nfmask", hex(m)), opt("--ctmask", hex(m))];
    }
    // save: `nfmask X ctmask ~Y`; restore: `ctmask X nfmask ~Y`
    const first = mode === "save" ? "nfmask" : "ctmask";
    const second = mode === "save" ? "ctmask" : "nfmask";
    if (w(k + 1) === first && w(k + 3) === second && k + 5 === n) {
      const a = num(w(k + 2));
      const b = num(w(k + 4)?.replace(/^~/, ""));
      if (a === undefined || b === undefined) return undefined;
      const nf = mode === "save" ? a : b;
      const ct = mode === "save" ? b : a;
      return [flag, opt("--nfmask", hex(nf)), opt("--ctmask", hex(ct))];
    }
    return undefined;
  }
  if (k + 2 !== n) return undefined;
  const v = markOp(mode, w(k + 1));
  return v === undefined ? undefined : [opt("--set-xmark", v)];
}

const LOG_FLAG_WORDS: readonly (readonly [string, number, string])[] = [
  ["tcp-sequence", 0x01, "--log-tcp-sequence"],
  ["tcp-options", 0x02, "--log-tcp-options"],
  ["ip-options", 0x04, "--log-ip-options"],
  ["uid", 0x08, "--log-uid"],
  ["macdecode", 0x20, "--log-macdecode"],
];

/**
 * libxt_LOG: `flags N level L` with -n, `level NAME [tcp-sequence ...]` without; then
 * `prefix "..."` (the prefix as is, up to the last quote of the line).
 */
function log(line: string, words: readonly Word[], k: number): ModuleOption[] | undefined {
  const w = (j: number) => words[j]?.text;
  let flags = 0;
  if (w(k) === "flags") {
    if (!/^[0-9]+$/.test(w(k + 1) ?? "")) return undefined;
    flags = Number(w(k + 1));
    k += 2;
  }
  if (w(k) !== "level" || w(k + 1) === undefined) return undefined;
  const lv = w(k + 1)!;
  const level = /^[0-9]$/.test(lv) ? Number(lv) : LOG_LEVELS.get(lv);
  if (level === undefined) return undefined;
  k += 2;
  for (;;) {
    const f = LOG_FLAG_WORDS.find(([word]) => word === w(k));
    if (!f) break;
    flags |= f[1];
    k++;
  }
  let prefix: string | undefined;
  if (w(k) === "prefix") {
    const open = words[k]!.end + 1;
    const close = line.trimEnd().length - 1;
    if (line[open] !== '"' || close <= open || line[close] !== '"') return undefined;
    prefix = line.slice(open + 1, close);
    k = words.length;
  }
  if (k !== words.length || flags & ~0x2f) return undefined;
  // libxt_LOG's save order: prefix, level unless the default 4, then the flags
  const out: ModuleOption[] = [];
  if (prefix !== undefined && prefix !== "") out.push(opt("--log-prefix", prefix));
  if (level !== 4) out.push(opt("--log-level", String(level)));
  for (const [, bit, name] of LOG_FLAG_WORDS) if (flags & bit) out.push(opt(name));
  return out;
}
