/**
 * @module iptables/list-match-text — reads the match text `iptables -L` prints after the address
 * columns back into the matches iptables-save would show: each reader knows one extension's print
 * function (iptables 1.8, both the legacy and the nf_tables variant print alike) and builds the
 * {@link Match} from the options iptables-save would print, through the same interpreter, so a
 * listing and a save of one rule give equal matches. Comments are cut by the caller.
 *
 * What each extension prints (`-n` form; without `-n` ports and ICMP types may be names):
 * `ADDRTYPE match src-type LOCAL dst-type !LOCAL limit-out`, `mark match ! 0x4000/0x4000`,
 * `connmark match  0x1/0xff`, `statistic mode random ! probability 0.25000000000`,
 * `statistic mode nth every 3 packet 1`, `tcp spt:80 dpts:!1024:65535 flags:0x17/0x02 option=2`,
 * `multiport dports  !80,443`, `! ctstate NEW ctorigdst 10.0.0.1 ctdir REPLY`, `state RELATED`,
 * `! match-set NAME src,dst`, `icmptype 8`, `icmp !type 3 code 4`, `ipv6-icmptype 128`.
 */
import type { Family } from "../net/cidr.ts";
import type { Match, ModuleOption } from "./dump.ts";
import {
  ICMP_NAMES,
  ICMP6_NAMES,
  type IcmpType,
  icmpSaveValue,
  portNumber,
  tcpFlagBits,
  tcpFlagNames,
} from "./list-names.ts";
import type { Word } from "./list-words.ts";
import { interpretMatch } from "./match-spec.ts";

/** Matches read from `words[i..next)`. */
export interface MatchRead {
  readonly matches: readonly Match[];
  readonly next: number;
}

type Reader = (w: readonly Word[], i: number, family: Family) => MatchRead | undefined;

const opt = (name: string, negated: boolean, ...values: string[]): ModuleOption => ({
  name,
  negated,
  values,
});

/** The match iptables-save's reading would give for these options; undefined if it objects. */
function build(module: string, options: ModuleOption[], family: Family): Match | undefined {
  const r = interpretMatch(module, options, family);
  return r.problems.length > 0 ? undefined : r.match;
}

const one = (m: Match | undefined, next: number): MatchRead | undefined =>
  m === undefined ? undefined : { matches: [m], next };

/** `!X` → [true, "X"]. */
const bang = (s: string): [boolean, string] =>
  s.startsWith("!") ? [true, s.slice(1)] : [false, s];

/** `80`, `http`, `1024:65535`, `ssh:90` as iptables-save's `80` / `1024:65535`. */
function portText(text: string): string | undefined {
  const colon = text.indexOf(":");
  if (colon < 0) {
    const p = portNumber(text);
    return p === undefined ? undefined : String(p);
  }
  const a = portNumber(text.slice(0, colon));
  const b = portNumber(text.slice(colon + 1));
  return a === undefined || b === undefined ? undefined : `${a}:${b}`;
}

const readAddrtype: Reader = (w, i, family) => {
  if (w[i]?.text !== "ADDRTYPE" || w[i + 1]?.text !== "match") return undefined;
  const options: ModuleOption[] = [];
  let k = i + 2;
  for (;;) {
    let neg = false;
    let at = k;
    if (w[at]?.text === "!") {
      neg = true;
      at++;
    }
    const key = w[at]?.text;
    if (key === "src-type" || key === "dst-type") {
      let v = w[at + 1]?.text;
      if (v === "!") {
        neg = true;
        v = w[at + 2]?.text;
        at++;
      }
      if (v === undefined) return undefined;
      const [n2, types] = bang(v);
      options.push(opt(`--${key}`, neg || n2, types));
      k = at + 2;
    } else if (!neg && (key === "limit-in" || key === "limit-out")) {
      options.push(opt(key === "limit-in" ? "--limit-iface-in" : "--limit-iface-out", false));
      k = at + 1;
    } else break;
  }
  return options.length === 0 ? undefined : one(build("addrtype", options, family), k);
};

/** `mark match [!] V[/M]` and `connmark match [!] V[/M]`. */
const readMark: Reader = (w, i, family) => {
  const module = w[i]?.text;
  if ((module !== "mark" && module !== "connmark") || w[i + 1]?.text !== "match") return undefined;
  let k = i + 2;
  let neg = false;
  if (w[k]?.text === "!") {
    neg = true;
    k++;
  }
  const v = w[k]?.text;
  if (v === undefined || !/^0x[0-9a-f]+(?:\/0x[0-9a-f]+)?$/i.test(v)) return undefined;
  return one(build(module, [opt("--mark", neg, v)], family), k + 1);
};

const readStatistic: Reader = (w, i, family) => {
  if (w[i]?.text !== "statistic" || w[i + 1]?.text !== "mode") return undefined;
  const mode = w[i + 2]?.text;
  let k = i + 3;
  let neg = false;
  if (w[k]?.text === "!") {
    neg = true;
    k++;
  }
  if (mode === "random") {
    const p = w[k + 1]?.text;
    if (w[k]?.text !== "probability" || p === undefined) return undefined;
    const options = [opt("--mode", false, "random"), opt("--probability", neg, p)];
    return one(build("statistic", options, family), k + 2);
  }
  if (mode === "nth") {
    const every = w[k + 1]?.text;
    if (w[k]?.text !== "every" || every === undefined) return undefined;
    k += 2;
    let packet = "0";
    if (w[k]?.text === "packet" && w[k + 1] !== undefined) {
      packet = w[k + 1]!.text;
      k += 2;
    }
    const options = [
      opt("--mode", false, "nth"),
      opt("--every", neg, every),
      opt("--packet", false, packet),
    ];
    return one(build("statistic", options, family), k);
  }
  return undefined;
};

const PORT_MODULES = new Set(["tcp", "udp", "udplite", "sctp", "dccp"]);

/** `tcp spt:80 dpts:1024:65535 flags:!0x17/0x02 option=2` (options in libxt_tcp's order). */
const readPorts: Reader = (w, i, family) => {
  const module = w[i]?.text;
  if (module === undefined || !PORT_MODULES.has(module)) return undefined;
  const options: ModuleOption[] = [];
  let k = i + 1;
  for (; k < w.length; k++) {
    const t = w[k]!.text;
    const m = /^(spts?|dpts?|flags|option)([:=])(!?)(.*)$/.exec(t);
    if (!m) break;
    const [, key, sep, inv, value] = m as unknown as [string, string, string, string, string];
    const neg = inv === "!";
    if (key === "option") {
      if (sep !== "=" || module !== "tcp" || !/^[0-9]{1,3}$/.test(value)) return undefined;
      options.push(opt("--tcp-option", neg, value));
    } else if (key === "flags") {
      const slash = value.indexOf("/");
      if (sep !== ":" || module !== "tcp" || slash < 0) return undefined;
      const mask = tcpFlagBits(value.slice(0, slash));
      const cmp = tcpFlagBits(value.slice(slash + 1));
      const maskText = mask === undefined ? undefined : tcpFlagNames(mask);
      const cmpText = cmp === undefined ? undefined : tcpFlagNames(cmp);
      if (maskText === undefined || cmpText === undefined) return undefined;
      options.push(opt("--tcp-flags", neg, maskText, cmpText));
    } else {
      if (sep !== ":") return undefined;
      const ranged = key.endsWith("s");
      const p = portText(value);
      if (p === undefined || p.includes(":") !== ranged) return undefined;
      options.push(opt(key.startsWith("s") ? "--sport" : "--dport", neg, p));
    }
  }
  return one(build(module, options, family), k);
};

const readMultiport: Reader = (w, i, family) => {
  if (w[i]?.text !== "multiport") return undefined;
  const which = w[i + 1]?.text;
  if (which !== "sports" && which !== "dports" && which !== "ports") return undefined;
  let k = i + 2;
  let list = w[k]?.text;
  if (list === "!") list = w[++k]?.text;
  if (list === undefined) return undefined;
  const [neg, items] = bang(list);
  const ports: string[] = [];
  for (const item of items.split(",")) {
    const p = portText(item);
    if (p === undefined) return undefined;
    ports.push(p);
  }
  return one(build("multiport", [opt(`--${which}`, neg, ports.join(","))], family), k + 1);
};

/** conntrack's keys in the order libxt_conntrack prints them. */
const CT_KEYS = [
  "ctstate",
  "ctproto",
  "ctorigsrc",
  "ctorigdst",
  "ctreplsrc",
  "ctrepldst",
  "ctorigsrcport",
  "ctorigdstport",
  "ctreplsrcport",
  "ctrepldstport",
  "ctstatus",
  "ctexpire",
  "ctdir",
];

/** Reads the value of a conntrack key as iptables-save would print it; undefined if unreadable. */
function ctValue(key: string, v: string, family: Family): string | undefined {
  if (key === "ctorigsrc" || key === "ctorigdst" || key === "ctreplsrc" || key === "ctrepldst") {
    // without -n an address may be a host name: unreadable (the caller keeps it hidden)
    const ok = family === 4 ? /^[0-9./]+$/.test(v) : /^[0-9a-fA-F:./]+$/.test(v) && v.includes(":");
    return ok ? v : undefined;
  }
  if (key.endsWith("port")) return portText(v);
  if (key === "ctproto" || key === "ctexpire")
    return /^[0-9]+(?::[0-9]+)?$/.test(v) ? v : undefined;
  return v;
}

/**
 * `[!] ctstate NEW [!] ctorigdst 10.0.0.1 ctdir REPLY`: one conntrack match while its keys come in
 * print order; a key out of order starts the next conntrack match (two `-m conntrack` in a row).
 */
const readConntrack: Reader = (w, i, family) => {
  const options: ModuleOption[] = [];
  let k = i;
  let last = -1;
  for (;;) {
    let at = k;
    const neg = w[at]?.text === "!";
    if (neg) at++;
    const key = w[at]?.text ?? "";
    const rank = CT_KEYS.indexOf(key);
    if (rank < 0 || rank <= last || (neg && key === "ctdir")) break;
    const raw = w[at + 1]?.text;
    const v = raw === undefined ? undefined : ctValue(key, raw, family);
    if (v === undefined) return undefined;
    options.push(opt(`--${key}`, neg, v));
    last = rank;
    k = at + 2;
  }
  return options.length === 0 ? undefined : one(build("conntrack", options, family), k);
};

const readState: Reader = (w, i, family) => {
  let k = i;
  const neg = w[k]?.text === "!";
  if (neg) k++;
  const v = w[k + 1]?.text;
  if (w[k]?.text !== "state" || v === undefined) return undefined;
  return one(build("state", [opt("--state", neg, v)], family), k + 2);
};

/** `[!] match-set NAME FLAGS` (ipset's own further options are not read). */
const readSet: Reader = (w, i, family) => {
  let k = i;
  const neg = w[k]?.text === "!";
  if (neg) k++;
  const name = w[k + 1]?.text;
  const flags = w[k + 2]?.text;
  if (w[k]?.text !== "match-set" || name === undefined || flags === undefined) return undefined;
  if (!/^(?:src|dst)(?:,(?:src|dst))*$/.test(flags)) return undefined;
  return one(build("set", [opt("--match-set", neg, name, flags)], family), k + 3);
};

/**
 * libxt_icmp / libxt_icmp6: ` icmp` then either a name (`echo-request`, `!fragmentation-needed`)
 * or `type N` glued to it when not inverted (`icmptype 8`, `icmp !type 3 code 4`).
 */
const readIcmp: Reader = (w, i, family) => {
  const head = w[i]?.text ?? "";
  const v6 = head.startsWith("ipv6-icmp");
  const base = v6 ? "ipv6-icmp" : "icmp";
  if (head !== base && head !== `${base}type`) return undefined;
  if ((family === 6) !== v6) return undefined;
  let k = i + 1;
  let neg = false;
  let type: IcmpType | undefined;
  const numericType = (text: string | undefined): number | undefined =>
    text !== undefined && /^[0-9]{1,3}$/.test(text) && Number(text) <= 255
      ? Number(text)
      : undefined;
  let n: number | undefined;
  if (head === `${base}type`) n = numericType(w[k++]?.text);
  else if (w[k]?.text === "!type") {
    neg = true;
    n = numericType(w[k + 1]?.text);
    k += 2;
  } else {
    const [inv, name] = bang(w[k]?.text ?? "");
    type = (v6 ? ICMP6_NAMES : ICMP_NAMES).get(name);
    if (type === undefined) return undefined;
    neg = inv;
    k++;
  }
  if (type === undefined) {
    if (n === undefined) return undefined;
    type = { type: n, codeMin: 0, codeMax: 0xff };
    const c = w[k]?.text;
    if (c === "code" && numericType(w[k + 1]?.text) !== undefined) {
      const v = numericType(w[k + 1]?.text)!;
      type = { type: n, codeMin: v, codeMax: v };
      k += 2;
    } else if (c === "codes" && /^[0-9]+-[0-9]+$/.test(w[k + 1]?.text ?? "")) {
      const [a, b] = w[k + 1]!.text.split("-").map(Number) as [number, number];
      type = { type: n, codeMin: a, codeMax: b };
      k += 2;
    }
  }
  const module = v6 ? "icmp6" : "icmp";
  const name = v6 ? "--icmpv6-type" : "--icmp-type";
  return one(build(module, [opt(name, neg, icmpSaveValue(type, v6))], family), k);
};

const READERS: readonly Reader[] = [
  readAddrtype,
  readMark,
  readStatistic,
  readPorts,
  readMultiport,
  readConntrack,
  readState,
  readSet,
  readIcmp,
];

/** The match printed at `words[i]`, if one of the known extensions printed it. */
export function readMatchAt(
  words: readonly Word[],
  i: number,
  family: Family,
): MatchRead | undefined {
  for (const r of READERS) {
    const got = r(words, i, family);
    if (got !== undefined && got.next > i) return got;
  }
  return undefined;
}
