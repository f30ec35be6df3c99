/**
 * @module iptables/rule-args — reads the arguments of one rule (everything after `-A CHAIN`) into
 * its parts: base matches (-s -d -i -o -p -f), match modules, target. Options are given to the
 * module or target that owns them, the way iptables does, so the ip-masq-agent's
 * `-j MASQUERADE --random-fully -p tcp -m statistic ... --to-ports N` form reads correctly.
 */
import type { Family } from "../net/cidr.ts";
import type {
  AddrMatch,
  Counters,
  IfaceMatch,
  Match,
  ModuleOption,
  ProtoMatch,
  Target,
} from "./dump.ts";
import { interpretMatch, MODULE_OPTIONS, OPTION_ALIASES } from "./match-spec.ts";
import { interpretTarget, TARGET_OPTIONS } from "./target-spec.ts";
import { parseAddr } from "./values.ts";

export interface RuleParts {
  protocol?: ProtoMatch;
  src?: AddrMatch;
  dst?: AddrMatch;
  inIface?: IfaceMatch;
  outIface?: IfaceMatch;
  fragment?: { readonly negated: boolean };
  matches: Match[];
  target?: Target;
  /** `-c PKTS BYTES` inside the rule (`iptables -S -v`). */
  counters?: Counters;
}

/** IANA numbers to the names iptables-save prints (from /etc/protocols). */
export const PROTO_NAMES: Readonly<Record<string, string>> = {
  "1": "icmp",
  "2": "igmp",
  "4": "ipencap",
  "6": "tcp",
  "17": "udp",
  "33": "dccp",
  "41": "ipv6",
  "47": "gre",
  "50": "esp",
  "51": "ah",
  "58": "ipv6-icmp",
  "132": "sctp",
  "136": "udplite",
};

/** The implicit match module a protocol brings (`-p tcp --dport 80` loads `-m tcp`). */
const PROTO_MODULE: Readonly<Record<string, string>> = {
  tcp: "tcp",
  udp: "udp",
  udplite: "udplite",
  sctp: "sctp",
  dccp: "dccp",
  icmp: "icmp",
  "ipv6-icmp": "icmp6",
  icmpv6: "icmp6",
};

/**
 * Could `-p PROTO` give this option to its implicit module (`--dport`, `--syn`, `--icmp-type`...)?
 * Then where it lands depends on the rest of the rule, not only on the module it follows.
 */
export function isProtocolOption(name: string): boolean {
  if (name === "--syn") return true;
  for (const m of Object.values(PROTO_MODULE)) if (MODULE_OPTIONS[m]?.includes(name)) return true;
  return false;
}

const BASE: Readonly<Record<string, string>> = {
  "-s": "s",
  "--source": "s",
  "--src": "s",
  "-d": "d",
  "--destination": "d",
  "--dst": "d",
  "-i": "i",
  "--in-interface": "i",
  "-o": "o",
  "--out-interface": "o",
  "-p": "p",
  "--protocol": "p",
  "-f": "f",
  "--fragment": "f",
  "-m": "m",
  "--match": "m",
  "-j": "j",
  "--jump": "j",
  "-g": "g",
  "--goto": "g",
  "-c": "c",
  "--set-counters": "c",
  "-4": "4",
  "--ipv4": "4",
  "-6": "6",
  "--ipv6": "6",
};

interface Ctx {
  module: string;
  options: ModuleOption[];
  isTarget: boolean;
  isGoto: boolean;
  /** Loaded by `-p PROTO` and a port option, without `-m`. */
  implicit?: boolean;
}

function knows(ctx: Ctx, opt: string): boolean {
  const table = ctx.isTarget ? TARGET_OPTIONS[ctx.module] : MODULE_OPTIONS[ctx.module];
  if (!table) return false;
  return table.includes(opt) || (ctx.module === "tcp" && opt === "--syn");
}

function isKnownCtx(ctx: Ctx): boolean {
  return ctx.isTarget
    ? TARGET_OPTIONS[ctx.module] !== undefined
    : MODULE_OPTIONS[ctx.module] !== undefined;
}

export function parseIface(text: string, negated: boolean): IfaceMatch | string {
  if (text.length === 0 || text.length > 16)
    return `interface name ${JSON.stringify(text)} is not 1-15 characters`;
  const wildcard = text.endsWith("+");
  return { name: wildcard ? text.slice(0, -1) : text, wildcard, negated };
}

/** Options with required arguments, by count (the rest are read by shape). */
const ARITY: Readonly<Record<string, number>> = {
  "--comment": 1,
  "--log-prefix": 1,
  "--nflog-prefix": 1,
  "--log-level": 1,
  "--sport": 1,
  "--dport": 1,
  "--sports": 1,
  "--dports": 1,
  "--ports": 1,
  "--icmp-type": 1,
  "--icmpv6-type": 1,
  "--tcp-flags": 2,
  "--tcp-option": 1,
  "--mark": 1,
  "--ctstate": 1,
  "--state": 1,
  "--ctstatus": 1,
  "--ctproto": 1,
  "--ctorigsrc": 1,
  "--ctorigdst": 1,
  "--ctreplsrc": 1,
  "--ctrepldst": 1,
  "--ctdir": 1,
  "--mode": 1,
  "--probability": 1,
  "--every": 1,
  "--packet": 1,
  "--src-type": 1,
  "--dst-type": 1,
  "--match-set": 2,
  "--to-ports": 1,
  "--to-source": 1,
  "--to-destination": 1,
  "--to": 1,
  "--set-xmark": 1,
  "--set-mark": 1,
  "--or-mark": 1,
  "--and-mark": 1,
  "--xor-mark": 1,
  "--nfmask": 1,
  "--ctmask": 1,
  "--reject-with": 1,
};

function isQuotedAt(quoted: readonly number[], i: number): boolean {
  return quoted.length > 0 && quoted.includes(i);
}

function isValueAt(tokens: readonly string[], quoted: readonly number[], i: number): boolean {
  const t = tokens[i]!;
  return isQuotedAt(quoted, i) || (t !== "!" && !(t.length > 1 && t.charCodeAt(0) === 45));
}

function interpretCtx(c: Ctx, family: Family, problems: string[]): Match | Target {
  if (c.isTarget) {
    const r = interpretTarget(c.module, c.isGoto, c.options, family);
    for (const p of r.problems) problems.push(p);
    return r.target;
  }
  const r = interpretMatch(c.module, c.options, family);
  for (const p of r.problems) problems.push(p);
  return r.match;
}

/** One rule's arguments being read: what has been read so far. */
interface ArgsReading {
  readonly tokens: readonly string[];
  readonly quoted: readonly number[];
  readonly family: Family;
  readonly problems: string[];
  readonly parts: RuleParts;
  /** The `-m` modules, in order (and the protocol's implicit module when one is needed). */
  readonly contexts: Ctx[];
  target: Ctx | undefined;
  /** The module or target named last: its options come next. */
  lastCtx: Ctx | undefined;
}

/**
 * Reads rule arguments `tokens[from..]`. `quoted` marks arguments that were in quotes (always
 * values). Problems are appended to `problems` as text; the caller attaches file and line.
 */
export function parseRuleArgs(
  tokens: readonly string[],
  quoted: readonly number[],
  from: number,
  family: Family,
  problems: string[],
): RuleParts {
  const r: ArgsReading = {
    tokens,
    quoted,
    family,
    problems,
    parts: { matches: [] },
    contexts: [],
    target: undefined,
    lastCtx: undefined,
  };
  let negate = false;
  const n = tokens.length;

  let i = from;
  while (i < n) {
    const tok = tokens[i]!;
    const q = isQuotedAt(quoted, i);
    if (tok === "!" && !q) {
      if (negate) problems.push('"!" twice in a row');
      negate = true;
      i++;
      continue;
    }
    const base = q ? undefined : BASE[tok];
    if (base !== undefined) {
      const neg = negate;
      negate = false;
      i = readBaseOption(r, i, base, neg);
      if (i < 0) break;
      continue;
    }
    if (!q && tok.startsWith("--")) {
      const neg = negate;
      negate = false;
      i = readLongOption(r, i, neg);
      continue;
    }
    problems.push(`unexpected argument ${JSON.stringify(tok)}`);
    i++;
  }
  if (negate) problems.push('"!" at the end of the rule negates nothing');

  const parts = r.parts;
  for (const c of r.contexts) parts.matches.push(interpretCtx(c, family, problems) as Match);
  if (r.target) parts.target = interpretCtx(r.target, family, problems) as Target;
  return parts;
}

/**
 * The base option at `tokens[i]` (`-s`, `-p`, `-m`, `-j`, `-f`, `-c`, …) with its value: where
 * reading goes on, or -1 when the value is missing (reading stops).
 */
function readBaseOption(r: ArgsReading, i: number, base: string, neg: boolean): number {
  const { tokens, quoted, problems, parts } = r;
  const tok = tokens[i]!;
  if (base === "f") {
    parts.fragment = { negated: neg };
    return i + 1;
  }
  if (base === "4" || base === "6") return i + 1;
  // old syntax: `-s ! 10.0.0.0/8`
  let j = i + 1;
  let neg2 = neg;
  if (tokens[j] === "!" && !isQuotedAt(quoted, j) && base !== "m" && base !== "j" && base !== "g") {
    neg2 = !neg2;
    j++;
  }
  const value = tokens[j];
  if (value === undefined) {
    problems.push(`${tok} needs a value`);
    return -1;
  }
  if (base === "c") {
    const pk = tokens[j];
    const by = tokens[j + 1];
    if (pk === undefined || by === undefined || !/^[0-9]+$/.test(pk) || !/^[0-9]+$/.test(by)) {
      problems.push(`${tok} needs two counters (packets bytes)`);
      return j + 1;
    }
    parts.counters = { packets: BigInt(pk), bytes: BigInt(by) };
    return j + 2;
  }
  applyBaseOption(r, tok, base, value, neg2);
  return j + 1;
}

/** `-s/-d`, `-i/-o`, `-p`, `-m`, `-j/-g` with its value (negated when `neg`). */
function applyBaseOption(
  r: ArgsReading,
  tok: string,
  base: string,
  value: string,
  neg: boolean,
): void {
  const { problems, parts } = r;
  switch (base) {
    case "s":
    case "d": {
      if (value.includes(",")) {
        problems.push(
          `${tok} ${value}: address lists are expanded into several rules by iptables; save output never has them`,
        );
      }
      const a = parseAddr(value, r.family);
      if (!a.ok) problems.push(`${tok}: ${a.error}`);
      else if (a.value.prefix === 0 && !neg) {
        // matches every address: iptables stores no address test and prints none
      } else if (base === "s") parts.src = { cidr: a.value, negated: neg };
      else parts.dst = { cidr: a.value, negated: neg };
      break;
    }
    case "i":
    case "o": {
      const f = parseIface(value, neg);
      if (typeof f === "string") problems.push(`${tok}: ${f}`);
      else if (base === "i") parts.inIface = f;
      else parts.outIface = f;
      break;
    }
    case "p": {
      const lower = value.toLowerCase();
      const name = PROTO_NAMES[lower] ?? (lower === "icmpv6" ? "ipv6-icmp" : lower);
      if (name === "all" || name === "0") {
        if (neg) problems.push("! -p all matches nothing");
      } else parts.protocol = protoMatch(name, neg);
      break;
    }
    case "m": {
      const ctx: Ctx = {
        module: value.toLowerCase(),
        options: [],
        isTarget: false,
        isGoto: false,
      };
      r.contexts.push(ctx);
      r.lastCtx = ctx;
      break;
    }
    case "j":
    case "g": {
      if (r.target) problems.push(`second ${tok} ${value}: a rule has one target`);
      r.target = { module: value, options: [], isTarget: true, isGoto: base === "g" };
      r.lastCtx = r.target;
      break;
    }
  }
}

/** The `--option` at `tokens[i]` with its values, given to its module or target: where reading goes on. */
function readLongOption(r: ArgsReading, i: number, neg: boolean): number {
  const { tokens, quoted, problems } = r;
  const n = tokens.length;
  const tok = tokens[i]!;
  const name = OPTION_ALIASES[tok] ?? tok;
  let j = i + 1;
  let postNeg = false;
  // old syntax: `--dport ! 80`
  if (
    tokens[j] === "!" &&
    !isQuotedAt(quoted, j) &&
    j + 1 < n &&
    isValueAt(tokens, quoted, j + 1)
  ) {
    postNeg = true;
    j++;
  }
  const values: string[] = [];
  // getopt gives an option its required arguments even when they look like options
  // (`--comment -A`); unknown options take what follows until the next option
  const arity = ARITY[name];
  if (arity !== undefined) {
    for (let k = 0; k < arity && j < n; k++) values.push(tokens[j++]!);
    if (values.length < arity) {
      // as iptables-restore refuses it: `option "--comment" requires an argument`
      problems.push(`option ${tok} requires ${arity === 1 ? "an argument" : `${arity} arguments`}`);
    }
  } else {
    while (j < n && isValueAt(tokens, quoted, j)) values.push(tokens[j++]!);
  }
  const owner = optionOwner(r, name);
  if (!owner) {
    problems.push(`option ${tok} belongs to no match or target on this rule`);
    return j;
  }
  owner.options.push({ name, negated: neg !== postNeg, values });
  return j;
}

/**
 * Who owns option `name`: the latest module/target if it knows it, else the other, else the
 * protocol's implicit module (added when first needed), else whoever came last (unknown
 * extensions take anything).
 */
function optionOwner(r: ArgsReading, name: string): Ctx | undefined {
  const { contexts, target, parts } = r;
  const lastMatch = contexts.length > 0 ? contexts[contexts.length - 1] : undefined;
  const first = r.lastCtx === target ? target : lastMatch;
  const second = r.lastCtx === target ? lastMatch : target;
  let owner: Ctx | undefined;
  if (first !== undefined && knows(first, name)) owner = first;
  else if (second !== undefined && knows(second, name)) owner = second;
  if (!owner && parts.protocol) {
    const implicit = PROTO_MODULE[parts.protocol.name];
    if (
      implicit &&
      (MODULE_OPTIONS[implicit]!.includes(name) || (implicit === "tcp" && name === "--syn"))
    ) {
      owner = contexts.find((c) => c.module === implicit);
      if (!owner) {
        owner = {
          module: implicit,
          options: [],
          isTarget: false,
          isGoto: false,
          implicit: true,
        };
        contexts.push(owner);
      }
    }
  }
  if (!owner) {
    if (first !== undefined && !isKnownCtx(first)) owner = first;
    else if (second !== undefined && !isKnownCtx(second)) owner = second;
  }
  return owner;
}

const protoCache = new Map<string, ProtoMatch>();
export function protoMatch(name: string, negated: boolean): ProtoMatch {
  const key = negated ? `!${name}` : name;
  let p = protoCache.get(key);
  if (!p) {
    p = { name, negated };
    protoCache.set(key, p);
  }
  return p;
}
