/**
 * @module iptables/match-spec — turns the options of one `-m MODULE` into a structured {@link Match}
 * with its options in the canonical form and order iptables-save prints them.
 */
import type { Family } from "../net/cidr.ts";
import { formatCidr } from "../net/cidr.ts";
import type { AddrMatch, Match, ModuleOption, PortRange, PortsSpec, TypeSet } from "./dump.ts";
import {
  formatPortRange,
  formatProbability,
  hex,
  parseAddr,
  parseMarkMask,
  parsePortList,
  parsePortRange,
  quantiseProbability,
} from "./values.ts";

/** Options each module understands, by canonical name, in iptables-save's print order. */
export const MODULE_OPTIONS: Readonly<Record<string, readonly string[]>> = {
  tcp: ["--sport", "--dport", "--tcp-option", "--tcp-flags"],
  udp: ["--sport", "--dport"],
  udplite: ["--sport", "--dport"],
  dccp: ["--sport", "--dport", "--dccp-types", "--dccp-option"],
  sctp: ["--sport", "--dport", "--chunk-types"],
  icmp: ["--icmp-type"],
  icmp6: ["--icmpv6-type"],
  multiport: ["--sports", "--dports", "--ports"],
  addrtype: ["--src-type", "--dst-type", "--limit-iface-in", "--limit-iface-out"],
  comment: ["--comment"],
  mark: ["--mark"],
  connmark: ["--mark"],
  conntrack: [
    "--ctstate",
    "--ctproto",
    "--ctorigsrc",
    "--ctorigdst",
    "--ctreplsrc",
    "--ctrepldst",
    "--ctorigsrcport",
    "--ctorigdstport",
    "--ctreplsrcport",
    "--ctrepldstport",
    "--ctstatus",
    "--ctexpire",
    "--ctdir",
  ],
  state: ["--state"],
  statistic: ["--mode", "--probability", "--every", "--packet"],
};

/** Long-option aliases iptables accepts, mapped to the name iptables-save prints. */
export const OPTION_ALIASES: Readonly<Record<string, string>> = {
  "--source-port": "--sport",
  "--destination-port": "--dport",
  "--source-ports": "--sports",
  "--destination-ports": "--dports",
  "--syn": "--syn",
};

/** Options strings that iptables-save prints with xtables_save_string (quoted when not plain). */
export const SAVE_STRING_OPTIONS: ReadonlySet<string> = new Set([
  "--comment",
  "--log-prefix",
  "--nflog-prefix",
]);

// libxt_icmp prints the type number (and /code when the name implies one)
const ICMP_TYPES: Readonly<Record<string, string>> = {
  "echo-reply": "0",
  pong: "0",
  "destination-unreachable": "3",
  "network-unreachable": "3/0",
  "host-unreachable": "3/1",
  "protocol-unreachable": "3/2",
  "port-unreachable": "3/3",
  "fragmentation-needed": "3/4",
  "source-quench": "4",
  redirect: "5",
  "echo-request": "8",
  ping: "8",
  "router-advertisement": "9",
  "router-solicitation": "10",
  "time-exceeded": "11",
  "ttl-exceeded": "11",
  "parameter-problem": "12",
  "timestamp-request": "13",
  "timestamp-reply": "14",
};

const CTSTATE_ORDER = ["INVALID", "NEW", "RELATED", "ESTABLISHED", "UNTRACKED", "SNAT", "DNAT"];
const CTSTATUS_ORDER = ["NONE", "EXPECTED", "SEEN_REPLY", "ASSURED", "CONFIRMED"];
// libxt_addrtype prints types in the order of its bit values
const ADDRTYPE_ORDER = [
  "UNSPEC",
  "UNICAST",
  "LOCAL",
  "BROADCAST",
  "ANYCAST",
  "MULTICAST",
  "BLACKHOLE",
  "UNREACHABLE",
  "PROHIBIT",
  "THROW",
  "NAT",
  "XRESOLVE",
];

export interface MatchResult {
  readonly match: Match;
  readonly problems: string[];
}

function orderTypes(text: string, order: readonly string[], what: string, problems: string[]) {
  const given = text.split(",").map((s) => s.toUpperCase());
  for (const g of given) {
    if (!order.includes(g))
      problems.push(`${what} ${JSON.stringify(g)} is not one of ${order.join(", ")}`);
  }
  const known = order.filter((t) => given.includes(t));
  const unknown = given.filter((g) => !order.includes(g));
  return [...known, ...unknown];
}

function sortOptions(
  options: ModuleOption[],
  order: readonly string[] | undefined,
): ModuleOption[] {
  if (!order) return options;
  const rank = (o: ModuleOption) => {
    const i = order.indexOf(o.name);
    return i < 0 ? order.length : i;
  };
  return options
    .map((o, i) => ({ o, i }))
    .sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i)
    .map((x) => x.o);
}

function portsOption(
  o: ModuleOption,
  list: boolean,
  problems: string[],
): { spec?: PortsSpec; opt: ModuleOption } {
  const text = o.values[0] ?? "";
  const r = list ? parsePortList(text) : parsePortRange(text);
  if (!r.ok) {
    problems.push(`${o.name}: ${r.error}`);
    return { opt: o };
  }
  const ranges: PortRange[] = Array.isArray(r.value) ? r.value : [r.value as PortRange];
  const canonical = ranges.map((p) => formatPortRange(p)).join(",");
  return {
    spec: { ranges, negated: o.negated },
    opt: { name: o.name, negated: o.negated, values: [canonical] },
  };
}

function addrOption(o: ModuleOption, family: Family, problems: string[]) {
  const r = parseAddr(o.values[0] ?? "", family);
  if (!r.ok) {
    problems.push(`${o.name}: ${r.error}`);
    return { opt: o };
  }
  const m: AddrMatch = { cidr: r.value, negated: o.negated };
  return { addr: m, opt: { name: o.name, negated: o.negated, values: [formatCidr(r.value)] } };
}

/** Interprets `-m module` with its options (names already canonical). */
export function interpretMatch(
  module: string,
  options: readonly ModuleOption[],
  family: Family,
): MatchResult {
  const problems: string[] = [];
  const known = MODULE_OPTIONS[module];
  if (known) {
    for (const o of options) {
      if (!known.includes(o.name) && !(o.name === "--syn" && module === "tcp")) {
        problems.push(`option ${o.name} is not an option of match "${module}"`);
      }
    }
  }
  return { match: matchOf(module, options, family, problems), problems };
}

/** The match a module's options make; what is wrong with them goes to `problems`. */
function matchOf(
  module: string,
  options: readonly ModuleOption[],
  family: Family,
  problems: string[],
): Match {
  switch (module) {
    case "icmp":
      return {
        kind: "opaque",
        module,
        options: options.map((o) =>
          o.name === "--icmp-type" && o.values[0] !== undefined
            ? { ...o, values: [ICMP_TYPES[o.values[0]] ?? o.values[0]] }
            : o,
        ),
      };
    case "tcp":
    case "udp":
    case "udplite":
    case "dccp":
    case "sctp":
      return portsMatch(module, options, problems);
    case "multiport":
      return multiportMatch(module, options, problems);
    case "addrtype":
      return addrtypeMatch(module, options, problems);
    case "comment": {
      const c = options.find((o) => o.name === "--comment");
      if (!c) problems.push('match "comment" needs --comment');
      return { kind: "comment", module, comment: c?.values[0] ?? "", options };
    }
    case "mark":
    case "connmark":
      return markMatch(module, options, problems);
    case "conntrack":
    case "state":
      return conntrackMatch(module, options, family, problems);
    case "statistic":
      return statisticMatch(module, options, problems);
    default:
      return { kind: "opaque", module, options };
  }
}

/** tcp, udp, udplite, dccp, sctp: the ports read, `--syn` saved as the flags test. */
function portsMatch(module: string, options: readonly ModuleOption[], problems: string[]): Match {
  let sport: PortsSpec | undefined;
  let dport: PortsSpec | undefined;
  const out: ModuleOption[] = [];
  for (const o of options) {
    if (o.name === "--sport" || o.name === "--dport") {
      const { spec, opt } = portsOption(o, false, problems);
      if (o.name === "--sport") sport = spec;
      else dport = spec;
      out.push(opt);
    } else if (o.name === "--icmp-type" && o.values[0] !== undefined) {
      out.push({ ...o, values: [ICMP_TYPES[o.values[0]] ?? o.values[0]] });
    } else if (o.name === "--syn") {
      // libxt_tcp saves --syn as the flags test it stands for
      out.push({ name: "--tcp-flags", negated: o.negated, values: ["FIN,SYN,RST,ACK", "SYN"] });
    } else out.push(o);
  }
  return {
    kind: "ports",
    module,
    ...(sport ? { sport } : {}),
    ...(dport ? { dport } : {}),
    options: sortOptions(out, MODULE_OPTIONS[module]),
  };
}

function multiportMatch(
  module: "multiport",
  options: readonly ModuleOption[],
  problems: string[],
): Match {
  const out: ModuleOption[] = [];
  const specs: { sports?: PortsSpec; dports?: PortsSpec; ports?: PortsSpec } = {};
  for (const o of options) {
    if (o.name === "--sports" || o.name === "--dports" || o.name === "--ports") {
      const { spec, opt } = portsOption(o, true, problems);
      if (spec) specs[o.name.slice(2) as "sports" | "dports" | "ports"] = spec;
      out.push(opt);
    } else out.push(o);
  }
  return { kind: "multiport", module, ...specs, options: out };
}

function addrtypeMatch(
  module: "addrtype",
  options: readonly ModuleOption[],
  problems: string[],
): Match {
  const out: ModuleOption[] = [];
  let src: TypeSet | undefined;
  let dst: TypeSet | undefined;
  for (const o of options) {
    if (o.name === "--src-type" || o.name === "--dst-type") {
      const types = orderTypes(o.values[0] ?? "", ADDRTYPE_ORDER, "address type", problems);
      const set = { types, negated: o.negated };
      if (o.name === "--src-type") src = set;
      else dst = set;
      out.push({ name: o.name, negated: o.negated, values: [types.join(",")] });
    } else out.push(o);
  }
  return {
    kind: "addrtype",
    module,
    ...(src ? { src } : {}),
    ...(dst ? { dst } : {}),
    limitIfaceIn: options.some((o) => o.name === "--limit-iface-in"),
    limitIfaceOut: options.some((o) => o.name === "--limit-iface-out"),
    options: sortOptions(out, MODULE_OPTIONS[module]),
  };
}

/** mark and connmark: `--mark value[/mask]`, saved in hex with the mask only when partial. */
function markMatch(
  module: "mark" | "connmark",
  options: readonly ModuleOption[],
  problems: string[],
): Match {
  const o = options.find((x) => x.name === "--mark");
  if (!o) {
    problems.push(`match "${module}" needs --mark`);
    return { kind: "opaque", module, options };
  }
  const r = parseMarkMask(o.values[0] ?? "");
  if (!r.ok) {
    problems.push(`--mark: ${r.error}`);
    return { kind: "opaque", module, options };
  }
  const mask = r.value.mask ?? 0xffffffff;
  const value = r.value.value;
  const text = mask === 0xffffffff ? hex(value) : `${hex(value)}/${hex(mask)}`;
  return {
    kind: "mark",
    module,
    mark: { value, mask, negated: o.negated },
    options: [{ name: "--mark", negated: o.negated, values: [text] }],
  };
}

/** conntrack and state: states and statuses in the kernel's order, the tuple's addresses. */
function conntrackMatch(
  module: "conntrack" | "state",
  options: readonly ModuleOption[],
  family: Family,
  problems: string[],
): Match {
  const out: ModuleOption[] = [];
  const fields: {
    ctstate?: TypeSet;
    ctstatus?: TypeSet;
    ctorigsrc?: AddrMatch;
    ctorigdst?: AddrMatch;
    ctreplsrc?: AddrMatch;
    ctrepldst?: AddrMatch;
    ctdir?: "ORIGINAL" | "REPLY";
  } = {};
  for (const o of options) {
    if (o.name === "--ctstate" || o.name === "--state") {
      const types = orderTypes(o.values[0] ?? "", CTSTATE_ORDER, "conntrack state", problems);
      fields.ctstate = { types, negated: o.negated };
      out.push({ name: o.name, negated: o.negated, values: [types.join(",")] });
    } else if (o.name === "--ctstatus") {
      const types = orderTypes(o.values[0] ?? "", CTSTATUS_ORDER, "conntrack status", problems);
      fields.ctstatus = { types, negated: o.negated };
      out.push({ name: o.name, negated: o.negated, values: [types.join(",")] });
    } else if (
      o.name === "--ctorigsrc" ||
      o.name === "--ctorigdst" ||
      o.name === "--ctreplsrc" ||
      o.name === "--ctrepldst"
    ) {
      const { addr, opt } = addrOption(o, family, problems);
      if (addr) fields[o.name.slice(2) as "ctorigsrc"] = addr;
      out.push(opt);
    } else if (o.name === "--ctdir") {
      const d = (o.values[0] ?? "").toUpperCase();
      if (d === "ORIGINAL" || d === "REPLY") fields.ctdir = d;
      else problems.push(`--ctdir ${JSON.stringify(o.values[0])}: expected ORIGINAL or REPLY`);
      out.push({ name: o.name, negated: false, values: [d] });
    } else out.push(o);
  }
  return {
    kind: "conntrack",
    module,
    ...fields,
    options: sortOptions(out, MODULE_OPTIONS[module]),
  };
}

/** statistic: `--mode random --probability P` (quantised as the kernel keeps it) or `--mode nth`. */
function statisticMatch(
  module: "statistic",
  options: readonly ModuleOption[],
  problems: string[],
): Match {
  const get = (n: string) => options.find((o) => o.name === n);
  const mode = get("--mode")?.values[0];
  if (mode === "random") {
    const p = get("--probability");
    const num = Number(p?.values[0]);
    if (!p || !Number.isFinite(num) || num < 0 || num > 1) {
      problems.push("statistic --mode random needs --probability between 0 and 1");
      return { kind: "opaque", module, options };
    }
    const q = quantiseProbability(num);
    return {
      kind: "statistic",
      module,
      mode,
      probability: q / 0x80000000,
      negated: p.negated,
      options: [
        { name: "--mode", negated: false, values: ["random"] },
        { name: "--probability", negated: p.negated, values: [formatProbability(q)] },
      ],
    };
  }
  if (mode === "nth") {
    const e = get("--every");
    const pk = get("--packet");
    const every = Number(e?.values[0]);
    const packet = pk ? Number(pk.values[0]) : 0;
    if (
      !e ||
      !Number.isInteger(every) ||
      every < 1 ||
      !Number.isInteger(packet) ||
      packet >= every
    ) {
      problems.push("statistic --mode nth needs --every N (>= 1) and --packet P (< N)");
      return { kind: "opaque", module, options };
    }
    return {
      kind: "statistic",
      module,
      mode,
      probability: 1 / every,
      every,
      packet,
      negated: e.negated,
      options: [
        { name: "--mode", negated: false, values: ["nth"] },
        { name: "--every", negated: e.negated, values: [String(every)] },
        { name: "--packet", negated: false, values: [String(packet)] },
      ],
    };
  }
  problems.push(`statistic --mode ${JSON.stringify(mode)}: expected random or nth`);
  return { kind: "opaque", module, options };
}
