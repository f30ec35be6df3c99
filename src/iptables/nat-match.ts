/**
 * @module iptables/nat-match — compiles one rule's matches into predicates over the evaluator's
 * packet state, in three-valued logic: matches, does not match, or cannot be decided (with the
 * reason). Address blocks become bigint bounds once, at compile time.
 */
import type { Cidr, Family, Ip } from "../net/cidr.ts";
import type { AddrMatch, IfaceMatch, Match, PortsSpec, Rule, TypeSet } from "./dump.ts";
import type { CtState } from "./nat-trace.ts";

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
}

export const NO = 0;
export const YES = 1;
export const UNDECIDED = 2;
export const BRANCH = 3;
export type Verdict = typeof NO | typeof YES | typeof UNDECIDED | typeof BRANCH;

export type Pred = (s: PacketState) => Verdict;

/** How the compiler learns address types: the node's own addresses and subnet broadcasts. */
export interface AddressKnowledge {
  readonly localKnown: boolean;
  readonly local: readonly { start: bigint; end: bigint; family: Family }[];
  readonly broadcast: readonly Ip[];
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

function classify(addr: bigint, family: Family, k: AddressKnowledge): string | undefined {
  if (family === 4) {
    if (addr >= V4_LOOPBACK.start && addr <= V4_LOOPBACK.end) return "LOCAL";
    if (addr >= V4_MULTICAST.start && addr <= V4_MULTICAST.end) return "MULTICAST";
    if (addr === 0xffffffffn) return "BROADCAST";
  } else {
    if (addr === 1n) return "LOCAL";
    if (addr >= V6_MULTICAST_START) return "MULTICAST";
  }
  if (!k.localKnown) return undefined;
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
  if (which === "src") {
    if (start === end) return (s) => ((s.src === start) !== neg ? YES : NO);
    return (s) => ((s.src >= start && s.src <= end) !== neg ? YES : NO);
  }
  if (which === "dst") {
    if (start === end) return (s) => ((s.dst === start) !== neg ? YES : NO);
    return (s) => ((s.dst >= start && s.dst <= end) !== neg ? YES : NO);
  }
  const get = ADDR_GETTERS[which];
  return (s) => {
    const v = get(s);
    return (v >= start && v <= end) !== neg ? YES : NO;
  };
}

function ifacePred(m: IfaceMatch, which: "inIface" | "outIface"): Pred {
  const { name, wildcard, negated } = m;
  const flag = which === "inIface" ? "-i" : "-o";
  const shown = name + (wildcard ? "+" : "");
  const isIn = which === "inIface";
  return (s) => {
    const v = isIn ? s.inIface : s.outIface;
    if (v === undefined) {
      s.reason = `${negated ? "! " : ""}${flag} ${shown}: the flow's ${which === "inIface" ? "incoming" : "outgoing"} interface is not known`;
      return UNDECIDED;
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
  return (s) => {
    if (which === "either") {
      if (s.sport === undefined || s.dport === undefined) {
        s.reason = `${label}: the flow's ports are not known`;
        return UNDECIDED;
      }
      return (inRanges(s.sport, spec) || inRanges(s.dport, spec)) !== spec.negated ? YES : NO;
    }
    const v = which === "sport" ? s.sport : s.dport;
    if (v === undefined) {
      s.reason = `${label}: the flow's ${which === "sport" ? "source" : "destination"} port is not known`;
      return UNDECIDED;
    }
    return inRanges(v, spec) !== spec.negated ? YES : NO;
  };
}

function markPred(value: number, mask: number, negated: boolean, ct: boolean, label: string): Pred {
  return (s) => {
    const known = ct ? s.ctmarkKnown : s.markKnown;
    const cur = ct ? s.ctmark : s.mark;
    // a known bit that differs decides; otherwise every masked bit must be known
    if (((cur ^ value) & mask & known) !== 0) return negated ? YES : NO;
    if ((mask & ~known) !== 0) {
      s.reason = `${label}: the packet's ${ct ? "connection mark" : "mark"} is not known here (mangle or raw rules may set it; give the flow's mark)`;
      return UNDECIDED;
    }
    return ((cur & mask) >>> 0 === (value & mask) >>> 0) !== negated ? YES : NO;
  };
}

function typePred(set: TypeSet, which: "src" | "dst", k: AddressKnowledge, label: string): Pred {
  const types = set.types;
  const routeDependent = types.some((t) => ROUTE_TYPES.has(t));
  return (s) => {
    const t = classify(which === "src" ? s.src : s.dst, s.family, k);
    if (t === undefined) {
      s.reason = `${label}: the node's local addresses are not known`;
      return UNDECIDED;
    }
    if (t === "UNICAST" && routeDependent) {
      s.reason = `${label}: whether the address is ${types.join("/")} depends on routes podpath does not see`;
      return UNDECIDED;
    }
    return types.includes(t) !== set.negated ? YES : NO;
  };
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
  return (s) => {
    if (s.ctstate !== "NEW") {
      s.reason = `${label}: the status bits of an existing connection are not known`;
      return UNDECIDED;
    }
    // a new, unconfirmed connection has none of EXPECTED, SEEN_REPLY, ASSURED, CONFIRMED
    const hit = set.types.includes("NONE");
    return hit !== set.negated ? YES : NO;
  };
}

const undecidable =
  (reason: string): Pred =>
  (s) => {
    s.reason = reason;
    return UNDECIDED;
  };

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
    case "ports": {
      if (m.sport) preds.push(portPred(m.sport, "sport", label));
      if (m.dport) preds.push(portPred(m.dport, "dport", label));
      for (const o of m.options) {
        if (o.name === "--sport" || o.name === "--dport") continue;
        if (
          o.name === "--tcp-flags" &&
          o.values[0] === "FIN,SYN,RST,ACK" &&
          o.values[1] === "SYN"
        ) {
          // --syn: the packet that creates a TCP connection is a SYN
          const neg = o.negated;
          preds.push((s) => {
            if (s.ctstate !== "NEW") {
              s.reason = `${label}: the TCP flags of a packet of an existing connection are not known`;
              return UNDECIDED;
            }
            return neg ? NO : YES;
          });
          continue;
        }
        preds.push(
          undecidable(`${label}: ${o.name} depends on packet contents podpath does not model`),
        );
      }
      return;
    }
    case "multiport":
      if (m.sports) preds.push(portPred(m.sports, "sport", label));
      if (m.dports) preds.push(portPred(m.dports, "dport", label));
      if (m.ports) preds.push(portPred(m.ports, "either", label));
      return;
    case "addrtype":
      if (m.limitIfaceIn || m.limitIfaceOut) {
        preds.push(
          undecidable(`${label}: --limit-iface-in/out needs the per-interface address table`),
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
        preds.push(undecidable(`${label}: ${o.name} is not modelled`));
      }
      return;
    case "statistic":
      preds.push(statisticPred(m));
      return;
    case "opaque": {
      if (
        m.module === "recent" &&
        m.options.every((o) =>
          ["--set", "--name", "--mask", "--rsource", "--rdest"].includes(o.name),
        )
      ) {
        return; // `recent --set` records the address and always matches
      }
      preds.push(
        undecidable(`${label}: match "${m.module}" depends on state podpath does not have`),
      );
      return;
    }
  }
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
  for (const m of rule.matches) compileMatch(m, k, preds);
  void family;
  return preds;
}

/** Builds the address knowledge from the context (local addresses and interface addresses). */
export function addressKnowledge(
  local: readonly (Ip | Cidr)[] | undefined,
  interfaceAddrs: readonly { readonly ip: Ip; readonly prefix: number }[],
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
  return { localKnown: local !== undefined || interfaceAddrs.length > 0, local: ranges, broadcast };
}
