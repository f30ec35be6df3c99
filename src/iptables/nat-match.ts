/**
 * @module iptables/nat-match — compiles one rule's matches into predicates over the evaluator's
 * packet state, in three-valued logic: matches, does not match, or cannot be decided (with the
 * reason). Address blocks become bigint bounds once, at compile time.
 */
import type { Cidr, Family, Ip } from "../net/cidr.ts";
import { formatIp } from "../net/cidr.ts";
import type { AddrMatch, HiddenPart, IfaceMatch, Match, PortsSpec, Rule, TypeSet } from "./dump.ts";
import { ipsetMembership } from "./ipset-member.ts";
import type { IpsetDump } from "./ipset-parser.ts";
import type { AddressFact, Assumption, CtState, Decider } from "./nat-trace.ts";
import { OIF_READS } from "./oif-reads.ts";
import { EXACT_SRC, SRC_READS, type SrcTest } from "./src-reads.ts";

// the log of source reads (iptables/src-reads), bound once: read on every source test
const R = SRC_READS;
// whether the outgoing interface was read (iptables/oif-reads), bound once
const O = OIF_READS;

/** An unknown fact taken one way on a walk, under the key its predicates ask for it by. */
export interface Taken {
  readonly key: unknown;
  readonly assumption: Assumption;
}

/** The packet as the evaluator tracks it through the hooks. */
export interface PacketState {
  family: Family;
  src: bigint;
  dst: bigint;
  origSrc: bigint;
  origDst: bigint;
  proto: string;
  sport: number | undefined;
  dport: number | undefined;
  /** undefined: not known; "" : no such interface at this hook. */
  inIface: string | undefined;
  outIface: string | undefined;
  mark: number;
  /** Bits of `mark` that are known. */
  markKnown: number;
  ctmark: number;
  ctmarkKnown: number;
  ctstate: CtState;
  dnatted: boolean;
  /** Set by a predicate that answers UNDECIDED. */
  reason: string;
  /** Set by a statistic predicate that answers BRANCH. */
  branchP: number;
  branchNote: string;
  /** The flow's own word on its destination: that address, and whether it is the node's. */
  premise: { readonly addr: bigint; readonly local: boolean } | undefined;
  /** Unknown facts taken one way on this walk; undefined while none is. */
  taken: Taken[] | undefined;
  /** Facts from other evidence that decided a match on this walk; undefined while none did. */
  factsUsed: AddressFact[] | undefined;
  /** Set with `reason` by a predicate that answers UNDECIDED: the fact to follow both ways. */
  unknown: UnknownAsk | undefined;
}

/** The fact an UNDECIDED predicate turns on, under the key it asks for it by. */
export interface UnknownAsk {
  readonly key: unknown;
  readonly fact: string;
  readonly decide: Decider;
}

/** The value this walk took for an unknown fact, or undefined when it has not taken one. */
export function assumed(s: PacketState, key: unknown): boolean | undefined {
  const t = s.taken;
  if (t === undefined) return undefined;
  for (let i = 0; i < t.length; i++) if (t[i]!.key === key) return t[i]!.assumption.holds;
  return undefined;
}

/** Answers UNDECIDED, naming the fact that would decide it (the evaluator follows both ways). */
function unknown(
  s: PacketState,
  key: unknown,
  fact: string,
  reason: string,
  decide: Decider,
): MatchOutcome {
  s.reason = reason;
  s.unknown = { key, fact, decide };
  return UNDECIDED;
}

const DECIDE_LOCAL: Decider = { command: "ip -o addr   # on the node" };
const DECIDE_MARK: Decider = {
  command:
    "iptables-save -t mangle; iptables-save -t raw   # on the node: the rules that set the mark",
};
const DECIDE_RULES: Decider = { command: "iptables-save   # on the node" };

export const NO = 0;
export const YES = 1;
export const UNDECIDED = 2;
export const BRANCH = 3;
export type MatchOutcome = typeof NO | typeof YES | typeof UNDECIDED | typeof BRANCH;

export type Pred = (s: PacketState) => MatchOutcome;

/** How the compiler learns address types: the node's own addresses and subnet broadcasts. */
export interface AddressKnowledge {
  /** True when the node's whole address list is known (`ip addr`). */
  readonly localKnown: boolean;
  readonly local: readonly { start: bigint; end: bigint; family: Family }[];
  readonly broadcast: readonly Ip[];
  /** Facts from other evidence, consulted when the whole list is not known. */
  readonly facts: readonly AddressFact[];
  /** The node's IP sets (`ipset save`), deciding `-m set --match-set`; undefined when not given. */
  readonly sets?: IpsetDump;
  /** Where the node's `ipset save` belongs, for what would decide a set match without it. */
  readonly setsFile?: string;
}

/**
 * Is the address the node's own? true/false when the address list or a fact says (the fact is
 * recorded on the walk), undefined when nothing does.
 */
export function isLocalAddress(
  addr: bigint,
  family: Family,
  k: AddressKnowledge,
  s: PacketState | undefined,
): boolean | undefined {
  if (family === 4 && addr >= V4_LOOPBACK.start && addr <= V4_LOOPBACK.end) return true;
  if (family === 6 && addr === 1n) return true;
  if (s?.premise !== undefined && s.premise.addr === addr) return s.premise.local;
  if (k.localKnown) {
    for (const r of k.local)
      if (r.family === family && addr >= r.start && addr <= r.end) return true;
    return false;
  }
  for (const f of k.facts) {
    if (f.cidr.family === family && addr >= f.cidr.start && addr <= f.cidr.end) {
      if (s !== undefined) {
        if (s.factsUsed === undefined) s.factsUsed = [f];
        else if (!s.factsUsed.includes(f)) s.factsUsed = [...s.factsUsed, f];
      }
      return f.local;
    }
  }
  return undefined;
}

/** The key under which "ADDR is one of the node's own addresses" is taken on a walk. */
export function localKey(family: Family, addr: bigint): string {
  return `local:${family}:${addr}`;
}

/** "10.20.30.40 is one of the node's own addresses", for an unknown fact. */
export function localFactText(family: Family, addr: bigint): string {
  return `${formatIp({ family, value: addr })} is one of the node's own addresses`;
}

const V4_LOOPBACK = { start: 0x7f000000n, end: 0x7fffffffn };
const V4_MULTICAST = { start: 0xe0000000n, end: 0xefffffffn };
const V6_MULTICAST_START = 0xffn << 120n;

/** Address types whose answer depends on routes podpath does not see. */
const ROUTE_TYPES = new Set([
  "UNSPEC",
  "ANYCAST",
  "BLACKHOLE",
  "UNREACHABLE",
  "PROHIBIT",
  "THROW",
  "NAT",
  "XRESOLVE",
]);

/**
 * The address type, as addrtype reads it. Without the node's address list: LOCAL or UNICAST from
 * a fact or from what the walk has taken for it; undefined when neither says.
 */
function classify(
  addr: bigint,
  family: Family,
  k: AddressKnowledge,
  s: PacketState,
): string | undefined {
  if (family === 4) {
    if (addr >= V4_LOOPBACK.start && addr <= V4_LOOPBACK.end) return "LOCAL";
    if (addr >= V4_MULTICAST.start && addr <= V4_MULTICAST.end) return "MULTICAST";
    if (addr === 0xffffffffn) return "BROADCAST";
  } else {
    if (addr === 1n) return "LOCAL";
    if (addr >= V6_MULTICAST_START) return "MULTICAST";
  }
  if (!k.localKnown) {
    const local = isLocalAddress(addr, family, k, s) ?? assumed(s, localKey(family, addr));
    if (local === undefined) return undefined;
    // a subnet broadcast address is never a pod's or a far site's: not local means unicast
    return local ? "LOCAL" : "UNICAST";
  }
  for (const r of k.local)
    if (r.family === family && addr >= r.start && addr <= r.end) return "LOCAL";
  for (const b of k.broadcast) if (b.family === family && b.value === addr) return "BROADCAST";
  return "UNICAST";
}

type AddrField = "src" | "dst" | "origSrc" | "origDst";

// one closure per field: a constant property load is much faster than s[which]
const ADDR_GETTERS: { readonly [K in AddrField]: (s: PacketState) => bigint } = {
  src: (s) => s.src,
  dst: (s) => s.dst,
  origSrc: (s) => s.origSrc,
  origDst: (s) => s.origDst,
};

function addrPred(m: AddrMatch, which: AddrField): Pred {
  const { start, end } = m.cidr;
  const neg = m.negated;
  // a watched evaluation logs each test of the source (iptables/src-reads)
  const test: SrcTest = { kind: "range", start, end };
  if (which === "src") {
    if (start === end)
      return (s) => {
        const log = R.log;
        if (log !== undefined) log.add(test, s.src);
        return (s.src === start) !== neg ? YES : NO;
      };
    return (s) => {
      const log = R.log;
      if (log !== undefined) log.add(test, s.src);
      return (s.src >= start && s.src <= end) !== neg ? YES : NO;
    };
  }
  if (which === "dst") {
    if (start === end) return (s) => ((s.dst === start) !== neg ? YES : NO);
    return (s) => ((s.dst >= start && s.dst <= end) !== neg ? YES : NO);
  }
  const get = ADDR_GETTERS[which];
  const isSrc = which === "origSrc";
  return (s) => {
    const v = get(s);
    const log = R.log;
    if (isSrc && log !== undefined) log.add(test, v);
    return (v >= start && v <= end) !== neg ? YES : NO;
  };
}

function ifacePred(m: IfaceMatch, which: "inIface" | "outIface"): Pred {
  const { name, wildcard, negated } = m;
  const flag = which === "inIface" ? "-i" : "-o";
  const shown = name + (wildcard ? "+" : "");
  const isIn = which === "inIface";
  const key = `${which}:${shown}`;
  const fact = `the packet ${isIn ? "arrives on" : "leaves by"} ${wildcard ? `an interface named ${name}*` : name}`;
  const decide: Decider = {
    command: isIn
      ? "ip route get <pod address>   # on the node: the pod's interface"
      : "ip route get <destination>   # on the node: the interface it leaves by",
  };
  return (s) => {
    if (!isIn) O.read = true;
    const v = isIn ? s.inIface : s.outIface;
    if (v === undefined) {
      const a = assumed(s, key);
      if (a !== undefined) return a !== negated ? YES : NO;
      return unknown(
        s,
        key,
        fact,
        `${negated ? "! " : ""}${flag} ${shown}: the flow's ${isIn ? "incoming" : "outgoing"} interface is not known`,
        decide,
      );
    }
    const hit = wildcard ? v.startsWith(name) : v === name;
    return hit !== negated ? YES : NO;
  };
}

const PROTO_ALIASES: Readonly<Record<string, string>> = {
  "1": "icmp",
  "6": "tcp",
  "17": "udp",
  "58": "ipv6-icmp",
  icmpv6: "ipv6-icmp",
  "132": "sctp",
  "33": "dccp",
  "136": "udplite",
  "47": "gre",
  "50": "esp",
  "51": "ah",
};

export function normalizeProto(p: string): string {
  const l = p.toLowerCase();
  return PROTO_ALIASES[l] ?? l;
}

function inRanges(v: number, spec: PortsSpec): boolean {
  for (const r of spec.ranges) if (v >= r.from && v <= r.to) return true;
  return false;
}

function portPred(spec: PortsSpec, which: "sport" | "dport" | "either", label: string): Pred {
  const decide: Decider = { command: "give the flow's port: --dest IP:PORT" };
  const test: SrcTest = { kind: "sport", spec };
  const pred: Pred = (s) => {
    const log = R.log;
    if (log !== undefined && which !== "dport") log.add(test, s.sport);
    if (which === "either") {
      if (s.sport === undefined || s.dport === undefined) {
        const a = assumed(s, pred);
        if (a !== undefined) return a ? YES : NO;
        return unknown(
          s,
          pred,
          `the flow's ports match ${label}`,
          `${label}: the flow's ports are not known`,
          decide,
        );
      }
      return (inRanges(s.sport, spec) || inRanges(s.dport, spec)) !== spec.negated ? YES : NO;
    }
    const v = which === "sport" ? s.sport : s.dport;
    if (v === undefined) {
      const a = assumed(s, pred);
      if (a !== undefined) return a ? YES : NO;
      const what = which === "sport" ? "source" : "destination";
      return unknown(
        s,
        pred,
        `the flow's ${what} port matches ${label}`,
        `${label}: the flow's ${what} port is not known`,
        decide,
      );
    }
    return inRanges(v, spec) !== spec.negated ? YES : NO;
  };
  return pred;
}

function markPred(value: number, mask: number, negated: boolean, ct: boolean, label: string): Pred {
  return (s) => {
    const known = ct ? s.ctmarkKnown : s.markKnown;
    const cur = ct ? s.ctmark : s.mark;
    // a known bit that differs decides; otherwise every masked bit must be known
    if (((cur ^ value) & mask & known) !== 0) return negated ? YES : NO;
    const unknownBits = (mask & ~known) >>> 0;
    if (unknownBits !== 0) {
      // the known bits agree: the match turns on the unknown ones
      const want = (value & unknownBits) >>> 0;
      const key = `${ct ? "ctmark" : "mark"}:${unknownBits}:${want}`;
      const a = assumed(s, key);
      if (a !== undefined) return a !== negated ? YES : NO;
      const what = ct ? "connection mark" : "mark";
      return unknown(
        s,
        key,
        `the packet's ${what} has bits 0x${unknownBits.toString(16)} set to 0x${want.toString(16)} before nat`,
        `${label}: the packet's ${what} is not known here (mangle or raw rules may set it; give the flow's mark)`,
        DECIDE_MARK,
      );
    }
    return ((cur & mask) >>> 0 === (value & mask) >>> 0) !== negated ? YES : NO;
  };
}

function typePred(set: TypeSet, which: "src" | "dst", k: AddressKnowledge, label: string): Pred {
  const types = set.types;
  const routeDependent = types.some((t) => ROUTE_TYPES.has(t));
  const pred: Pred = (s) => {
    const addr = which === "src" ? s.src : s.dst;
    // the type of the source, its facts and its text turn on the exact address
    const log = R.log;
    if (log !== undefined && which === "src") log.add(EXACT_SRC, addr);
    const t = classify(addr, s.family, k, s);
    if (t === undefined) {
      return unknown(
        s,
        localKey(s.family, addr),
        localFactText(s.family, addr),
        `${label}: the node's local addresses are not known`,
        DECIDE_LOCAL,
      );
    }
    if (t === "UNICAST" && routeDependent) {
      const a = assumed(s, pred);
      if (a !== undefined) return a !== set.negated ? YES : NO;
      return unknown(
        s,
        pred,
        `${formatIp({ family: s.family, value: addr })} is of type ${types.join("/")}`,
        `${label}: whether the address is ${types.join("/")} depends on routes podpath does not see`,
        { command: "ip route show table all   # on the node" },
      );
    }
    return types.includes(t) !== set.negated ? YES : NO;
  };
  return pred;
}

function ctstatePred(set: TypeSet): Pred {
  return (s) => {
    let hit = false;
    for (const t of set.types) {
      if (t === s.ctstate || (t === "DNAT" && s.dnatted)) hit = true;
      // SNAT: the source is translated only after the nat table's decision, so never yet
    }
    return hit !== set.negated ? YES : NO;
  };
}

function ctstatusPred(set: TypeSet, label: string): Pred {
  const pred: Pred = (s) => {
    if (s.ctstate !== "NEW") {
      const a = assumed(s, pred);
      if (a !== undefined) return a ? YES : NO;
      return unknown(
        s,
        pred,
        `the connection's status matches ${label}`,
        `${label}: the status bits of an existing connection are not known`,
        { command: "conntrack -L   # on the node" },
      );
    }
    // a new, unconfirmed connection has none of EXPECTED, SEEN_REPLY, ASSURED, CONFIRMED
    const hit = set.types.includes("NONE");
    return hit !== set.negated ? YES : NO;
  };
  return pred;
}

/** A match that state outside the snapshot decides: both outcomes are followed. */
function undecidable(reason: string, fact: string, decide: Decider = DECIDE_RULES): Pred {
  const pred: Pred = (s) => {
    const a = assumed(s, pred);
    if (a !== undefined) return a ? YES : NO;
    return unknown(s, pred, fact, reason, decide);
  };
  return pred;
}

/** What decides a module's state, by module. */
function moduleDecider(module: string, m: Match): Decider {
  const name = m.options.find((o) => o.name === "--match-set" || o.name === "--name")?.values[0];
  if (module === "set") return { command: `ipset list ${name ?? "<set>"}   # on the node` };
  if (module === "recent")
    return { command: `cat /proc/net/xt_recent/${name ?? "DEFAULT"}   # on the node` };
  if (module === "conntrack" || module === "state" || module === "connlimit")
    return { command: "conntrack -L   # on the node" };
  return DECIDE_RULES;
}

/**
 * A part the listing did not show: both outcomes are followed. Hidden interfaces (`iptables -L`
 * without -v hides them on every rule) are one fact for the whole listing: either no rule tests an
 * interface it hides, and every rule reads as shown, or some rule does, and the listing cannot
 * say where the packet goes.
 */
function hiddenPred(h: HiddenPart, rule: Rule): Pred {
  if (h.part === "in-interface" || h.part === "out-interface") {
    const file = rule.source.file;
    const key = `hidden-interfaces:${file}`;
    const decide: Decider = { ...(file ? { file } : {}), command: "iptables-save   # on the node" };
    return (s) => {
      const a = assumed(s, key);
      if (a === true) return YES;
      return unknown(
        s,
        key,
        `the rules ${file} lists test no interface (the listing does not print them)`,
        h.why,
        decide,
      );
    };
  }
  return undecidable(
    `${h.part} of ${rule.chain} rule ${rule.index} not shown: ${h.why}`,
    `${rule.chain} rule ${rule.index} (${rule.source.file}:${rule.source.line}) matches on its ${h.part}, which the listing does not show`,
    {
      ...(rule.source.file ? { file: rule.source.file } : {}),
      command: "iptables-save   # on the node",
    },
  );
}

function statisticPred(m: Extract<Match, { kind: "statistic" }>): Pred {
  const p = m.negated ? 1 - m.probability : m.probability;
  const note =
    m.mode === "random"
      ? `statistic random ${m.negated ? "! " : ""}probability ${m.probability}`
      : `statistic nth every ${m.every} packet ${m.packet}: 1 connection in ${m.every}`;
  return (s) => {
    s.branchP = p;
    s.branchNote = note;
    return BRANCH;
  };
}

function optionText(m: Match): string {
  return `-m ${m.module} ${m.options.map((o) => `${o.negated ? "! " : ""}${o.name} ${o.values.join(" ")}`.trim()).join(" ")}`.trim();
}

function compileMatch(m: Match, k: AddressKnowledge, preds: Pred[]): void {
  const label = optionText(m);
  switch (m.kind) {
    case "comment":
      return;
    case "ports":
      portsPreds(m, label, preds);
      return;
    case "multiport":
      if (m.sports) preds.push(portPred(m.sports, "sport", label));
      if (m.dports) preds.push(portPred(m.dports, "dport", label));
      if (m.ports) preds.push(portPred(m.ports, "either", label));
      return;
    case "addrtype":
      if (m.limitIfaceIn || m.limitIfaceOut) {
        preds.push(
          undecidable(
            `${label}: --limit-iface-in/out needs the per-interface address table`,
            `the packet matches ${label}`,
            { command: "ip -o addr   # on the node" },
          ),
        );
        return;
      }
      if (m.src) preds.push(typePred(m.src, "src", k, label));
      if (m.dst) preds.push(typePred(m.dst, "dst", k, label));
      return;
    case "mark":
      preds.push(
        markPred(m.mark.value, m.mark.mask, m.mark.negated, m.module === "connmark", label),
      );
      return;
    case "conntrack":
      conntrackPreds(m, label, preds);
      return;
    case "statistic":
      preds.push(statisticPred(m));
      return;
    case "opaque":
      opaquePreds(m, label, preds, k);
      return;
  }
}

/** tcp/udp/…: the ports, `--syn`, and any other option undecidable. */
function portsPreds(m: Extract<Match, { kind: "ports" }>, label: string, preds: Pred[]): void {
  if (m.sport) preds.push(portPred(m.sport, "sport", label));
  if (m.dport) preds.push(portPred(m.dport, "dport", label));
  for (const o of m.options) {
    if (o.name === "--sport" || o.name === "--dport") continue;
    if (o.name === "--tcp-flags" && o.values[0] === "FIN,SYN,RST,ACK" && o.values[1] === "SYN") {
      // --syn: the packet that creates a TCP connection is a SYN
      const neg = o.negated;
      const unknownFlags = undecidable(
        `${label}: the TCP flags of a packet of an existing connection are not known`,
        `the packet's TCP flags match ${label}`,
      );
      preds.push((s) => (s.ctstate !== "NEW" ? unknownFlags(s) : neg ? NO : YES));
      continue;
    }
    preds.push(
      undecidable(
        `${label}: ${o.name} depends on packet contents podpath does not model`,
        `the packet matches ${label}`,
      ),
    );
  }
}

/** conntrack/state: state, status, the tuple's addresses, direction; other options undecidable. */
function conntrackPreds(
  m: Extract<Match, { kind: "conntrack" }>,
  label: string,
  preds: Pred[],
): void {
  if (m.ctstate) preds.push(ctstatePred(m.ctstate));
  if (m.ctstatus) preds.push(ctstatusPred(m.ctstatus, label));
  if (m.ctorigsrc) preds.push(addrPred(m.ctorigsrc, "origSrc"));
  if (m.ctorigdst) preds.push(addrPred(m.ctorigdst, "origDst"));
  // before source NAT the reply tuple is (current destination -> original source)
  if (m.ctreplsrc) preds.push(addrPred(m.ctreplsrc, "dst"));
  if (m.ctrepldst) preds.push(addrPred(m.ctrepldst, "origSrc"));
  if (m.ctdir) {
    const d = m.ctdir;
    preds.push(() => (d === "ORIGINAL" ? YES : NO));
  }
  for (const o of m.options) {
    if (
      [
        "--ctstate",
        "--state",
        "--ctstatus",
        "--ctorigsrc",
        "--ctorigdst",
        "--ctreplsrc",
        "--ctrepldst",
        "--ctdir",
      ].includes(o.name)
    ) {
      continue;
    }
    preds.push(
      undecidable(`${label}: ${o.name} is not modelled`, `the packet matches ${label}`, {
        command: "conntrack -L   # on the node",
      }),
    );
  }
}

/**
 * `-m set [!] --match-set NAME src|dst`: decided by the set's members when the node's `ipset save`
 * is given, else an unknown fact (one per set and address) naming what decides it. Other options
 * (several dimensions, counters tests, --return-nomatch) are left to the undecidable module.
 */
function setPred(
  m: Extract<Match, { kind: "opaque" }>,
  label: string,
  k: AddressKnowledge,
): Pred | undefined {
  const o = m.options[0];
  if (m.options.length !== 1 || o?.name !== "--match-set" || o.values.length !== 2)
    return undefined;
  const name = o.values[0] ?? "";
  const dir = o.values[1];
  if (dir !== "src" && dir !== "dst") return undefined;
  const neg = o.negated;
  const sets = k.sets;
  const decide: Decider = {
    ...(sets ? { file: sets.file } : k.setsFile ? { file: k.setsFile } : {}),
    command: `ipset list ${name}   # on the node`,
  };
  return (s) => {
    const addr = dir === "src" ? s.src : s.dst;
    const log = R.log;
    if (log !== undefined && dir === "src") log.add(EXACT_SRC, addr);
    const shown = formatIp({ family: s.family, value: addr });
    const key = `ipset:${name}:${s.family}:${addr}`;
    const fact = `${shown} is a member of ipset ${name}`;
    if (sets === undefined) {
      const a = assumed(s, key);
      if (a !== undefined) return a !== neg ? YES : NO;
      return unknown(
        s,
        key,
        fact,
        `${label}: match "set" depends on the members of set ${name}, not in the snapshot: undecided: give ipset save`,
        decide,
      );
    }
    const r = ipsetMembership(sets, name, s.family, addr);
    if (r.kind === "cannot-tell") {
      const a = assumed(s, key);
      if (a !== undefined) return a !== neg ? YES : NO;
      return unknown(s, key, fact, `${label}: ${r.reason}`, decide);
    }
    return (r.kind === "member") !== neg ? YES : NO;
  };
}

/** A module podpath does not model: undecidable, except `recent --set` (always matches). */
function opaquePreds(
  m: Extract<Match, { kind: "opaque" }>,
  label: string,
  preds: Pred[],
  k: AddressKnowledge,
): void {
  const set = m.module === "set" ? setPred(m, label, k) : undefined;
  if (set) {
    preds.push(set);
    return;
  }
  if (
    m.module === "recent" &&
    m.options.every((o) => ["--set", "--name", "--mask", "--rsource", "--rdest"].includes(o.name))
  ) {
    return; // `recent --set` records the address and always matches
  }
  preds.push(
    undecidable(
      `${label}: match "${m.module}" depends on state podpath does not have`,
      `the packet matches ${label}`,
      moduleDecider(m.module, m),
    ),
  );
}

/** All predicates of a rule, in the kernel's order (addresses, interfaces, protocol, modules). */
export function compileRulePreds(rule: Rule, family: Family, k: AddressKnowledge): Pred[] {
  const preds: Pred[] = [];
  if (rule.src) preds.push(addrPred(rule.src, "src"));
  if (rule.dst) preds.push(addrPred(rule.dst, "dst"));
  if (rule.inIface) preds.push(ifacePred(rule.inIface, "inIface"));
  if (rule.outIface) preds.push(ifacePred(rule.outIface, "outIface"));
  if (rule.protocol) {
    const want = normalizeProto(rule.protocol.name);
    const neg = rule.protocol.negated;
    preds.push((s) => ((s.proto === want) !== neg ? YES : NO));
  }
  if (rule.fragment) {
    // the first packet of a connection is never a non-first fragment
    const neg = rule.fragment.negated;
    preds.push(() => (neg ? YES : NO));
  }
  const first = preds.length;
  for (const m of rule.matches) compileMatch(m, k, preds);
  for (const h of rule.hidden ?? []) preds.push(hiddenPred(h, rule));
  void family;
  return withPortsFirst(rule, preds, first);
}

/**
 * A rule whose modules read the node's addresses (addrtype, set) before its ports (kube-proxy's
 * `-m addrtype --dst-type LOCAL -m tcp --dport N`) is first tested on the flow's known ports
 * alone: a port that differs is a NO whatever the other predicates say, so the answer is the
 * same, and a packet to another port does not classify its address. The port predicates stay
 * where they were for the flows whose ports are not known.
 */
function withPortsFirst(rule: Rule, preds: Pred[], first: number): Pred[] {
  let costly = false;
  const quick: Pred[] = [];
  for (const m of rule.matches) {
    if (m.kind === "addrtype" || m.kind === "opaque") costly = true;
    else if (m.kind === "ports" && costly) {
      if (m.dport) quick.push(knownPortPred(m.dport, "dport"));
      if (m.sport) quick.push(knownPortPred(m.sport, "sport"));
    }
  }
  if (quick.length === 0) return preds;
  return [...preds.slice(0, first), ...quick, ...preds.slice(first)];
}

/** NO when the flow's port is known and outside the spec; else YES (the real test comes later). */
function knownPortPred(spec: PortsSpec, which: "sport" | "dport"): Pred {
  if (which === "dport") {
    return (s) => (s.dport !== undefined && inRanges(s.dport, spec) === spec.negated ? NO : YES);
  }
  const test: SrcTest = { kind: "sport", spec };
  return (s) => {
    const log = R.log;
    if (log !== undefined) log.add(test, s.sport);
    return s.sport !== undefined && inRanges(s.sport, spec) === spec.negated ? NO : YES;
  };
}

/** Builds the address knowledge from the context (local addresses and interface addresses). */
export function addressKnowledge(
  local: readonly (Ip | Cidr)[] | undefined,
  interfaceAddrs: readonly { readonly ip: Ip; readonly prefix: number }[],
  facts: readonly AddressFact[] = [],
  sets?: IpsetDump,
  setsFile?: string,
): AddressKnowledge {
  const ranges = (local ?? []).map((a) =>
    "value" in a
      ? { start: a.value, end: a.value, family: a.family }
      : { start: a.start, end: a.end, family: a.family },
  );
  const broadcast: Ip[] = [];
  for (const a of interfaceAddrs) {
    ranges.push({ start: a.ip.value, end: a.ip.value, family: a.ip.family });
    if (a.ip.family === 4 && a.prefix < 31) {
      const host = (1n << BigInt(32 - a.prefix)) - 1n;
      broadcast.push({ family: 4, value: a.ip.value | host });
    }
  }
  return {
    localKnown: local !== undefined || interfaceAddrs.length > 0,
    local: ranges,
    broadcast,
    facts,
    ...(sets ? { sets } : {}),
    ...(setsFile ? { setsFile } : {}),
  };
}
