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
import { interpretTarget, KNOWN_TARGETS, TARGET_OPTIONS } from "./target-spec.ts";
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

export interface RuleArgsResult {
  readonly parts: RuleParts;
  readonly problems: string[];
}

/** IANA numbers to the names iptables-save prints (from /etc/protocols). */
const PROTO_NAMES: Readonly<Record<string, string>> = {
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

function parseIface(text: string, negated: boolean): IfaceMatch | string {
  if (text.length === 0 || text.length > 16)
    return `interface name ${JSON.stringify(text)} is not 1-15 characters`;
  const wildcard = text.endsWith("+");
  return { name: wildcard ? text.slice(0, -1) : text, wildcard, negated };
}

/**
 * Reads rule arguments `tokens[from..]`. `quoted` marks arguments that were in quotes (always
 * values). Problems are returned as text; the caller attaches file and line.
 */
export function parseRuleArgs(
  tokens: readonly string[],
  quoted: readonly number[],
  from: number,
  family: Family,
): RuleArgsResult {
  const problems: string[] = [];
  const parts: RuleParts = { matches: [] };
  const contexts: Ctx[] = [];
  let target: Ctx | undefined;
  let lastCtx: Ctx | undefined;
  let negate = false;
  const n = tokens.length;
  const isQuoted = (i: number) => quoted.length > 0 && quoted.includes(i);
  const isValue = (i: number) => {
    const t = tokens[i]!;
    return isQuoted(i) || (t !== "!" && !(t.length > 1 && t.charCodeAt(0) === 45));
  };

  let i = from;
  while (i < n) {
    const tok = tokens[i]!;
    if (tok === "!" && !isQuoted(i)) {
      if (negate) problems.push('"!" twice in a row');
      negate = true;
      i++;
      continue;
    }
    const base = isQuoted(i) ? undefined : BASE[tok];
    if (base !== undefined) {
      const neg = negate;
      negate = false;
      if (base === "f") {
        parts.fragment = { negated: neg };
        i++;
        continue;
      }
      if (base === "4" || base === "6") {
        i++;
        continue;
      }
      // old syntax: `-s ! 10.0.0.0/8`
      let j = i + 1;
      let neg2 = neg;
      if (tokens[j] === "!" && !isQuoted(j) && base !== "m" && base !== "j" && base !== "g") {
        neg2 = !neg2;
        j++;
      }
      const value = tokens[j];
      if (value === undefined) {
        problems.push(`${tok} needs a value`);
        break;
      }
      if (base === "c") {
        const pk = tokens[j];
        const by = tokens[j + 1];
        if (pk === undefined || by === undefined || !/^[0-9]+$/.test(pk) || !/^[0-9]+$/.test(by)) {
          problems.push(`${tok} needs two counters (packets bytes)`);
          i = j + 1;
          continue;
        }
        parts.counters = { packets: BigInt(pk), bytes: BigInt(by) };
        i = j + 2;
        continue;
      }
      i = j + 1;
      switch (base) {
        case "s":
        case "d": {
          if (value.includes(",")) {
            problems.push(
              `${tok} ${value}: address lists are expanded into several rules by iptables; save output never has them`,
            );
          }
          const r = parseAddr(value, family);
          if (!r.ok) problems.push(`${tok}: ${r.error}`);
          else if (base === "s") parts.src = { cidr: r.value, negated: neg2 };
          else parts.dst = { cidr: r.value, negated: neg2 };
          break;
        }
        case "i":
        case "o": {
          const r = parseIface(value, neg2);
          if (typeof r === "string") problems.push(`${tok}: ${r}`);
          else if (base === "i") parts.inIface = r;
          else parts.outIface = r;
          break;
        }
        case "p": {
          const lower = value.toLowerCase();
          const name = PROTO_NAMES[lower] ?? (lower === "icmpv6" ? "ipv6-icmp" : lower);
          if (name === "all" || name === "0") {
            if (neg2) problems.push("! -p all matches nothing");
          } else parts.protocol = { name, negated: neg2 };
          break;
        }
        case "m": {
          const ctx: Ctx = {
            module: value.toLowerCase(),
            options: [],
            isTarget: false,
            isGoto: false,
          };
          contexts.push(ctx);
          lastCtx = ctx;
          break;
        }
        case "j":
        case "g": {
          if (target) problems.push(`second ${tok} ${value}: a rule has one target`);
          target = { module: value, options: [], isTarget: true, isGoto: base === "g" };
          lastCtx = target;
          break;
        }
      }
      continue;
    }
    if (tok.startsWith("--") && !isQuoted(i)) {
      const name = OPTION_ALIASES[tok] ?? tok;
      const neg = negate;
      negate = false;
      let j = i + 1;
      let postNeg = false;
      // old syntax: `--dport ! 80`
      if (tokens[j] === "!" && !isQuoted(j) && j + 1 < n && isValue(j + 1)) {
        postNeg = true;
        j++;
      }
      const values: string[] = [];
      while (j < n && isValue(j)) values.push(tokens[j++]!);
      i = j;
      const opt: ModuleOption = { name, negated: neg !== postNeg, values };
      // who owns it: the latest module/target if it knows it, else the other, else the
      // protocol's implicit module, else whoever came last (unknown extensions take anything)
      const lastMatch = contexts.at(-1);
      const order = lastCtx === target ? [target, lastMatch] : [lastMatch, target];
      let owner = order.find((c) => c !== undefined && knows(c, name));
      if (!owner && parts.protocol) {
        const implicit = PROTO_MODULE[parts.protocol.name];
        if (
          implicit &&
          (MODULE_OPTIONS[implicit]!.includes(name) || (implicit === "tcp" && name === "--syn"))
        ) {
          owner = contexts.find((c) => c.module === implicit);
          if (!owner) {
            owner = { module: implicit, options: [], isTarget: false, isGoto: false };
            contexts.push(owner);
          }
        }
      }
      if (!owner) owner = order.find((c) => c !== undefined && !isKnownCtx(c));
      if (!owner) {
        problems.push(`option ${tok} belongs to no match or target on this rule`);
        continue;
      }
      owner.options.push(opt);
      continue;
    }
    problems.push(`unexpected argument ${JSON.stringify(tok)}`);
    i++;
  }
  if (negate) problems.push('"!" at the end of the rule negates nothing');

  for (const c of contexts) {
    const r = interpretMatch(c.module, c.options, family);
    parts.matches.push(r.match);
    for (const p of r.problems) problems.push(p);
  }
  if (target) {
    const r = interpretTarget(target.module, target.isGoto, target.options, family);
    parts.target = r.target;
    for (const p of r.problems) problems.push(p);
  }
  return { parts, problems };
}

export { KNOWN_TARGETS };
