/**
 * @module path/answer-cache — the whole path's answers reused across packets that the rules
 * cannot tell apart, as network verifiers group packets into equivalence classes. A packet's
 * answer is keyed on every field the evaluation reads as a value (destination, ports but the
 * source port, protocol, incoming interface, origin, mark, connection state, the address
 * families, and the `ip rule` selectors its source and source port meet); its source address and
 * source port count only through the tests the rules made of them while its answer was made
 * (iptables/src-reads: `-s` blocks, `--sport` ranges, the exact address for what reads it so).
 * Another packet with the same key that answers each of those tests alike takes the same way
 * through the same rules: its answer is the stored one with its own source written where the
 * evaluation writes the packet's source (the snat step's `from`, a forwarded verdict that keeps
 * the source). The node's own packets (routed from the socket, masqueraded on lo) are not kept.
 */
import type { IpRule } from "../evidence/ip-rule.ts";
import type { PortsSpec } from "../iptables/dump.ts";
import type { SrcReadLog } from "../iptables/src-reads.ts";
import { sportAnswer } from "../iptables/src-reads.ts";
import { contains, type Ip } from "../net/cidr.ts";
import type { PathOutcome, PathPacket, PathResult, PathStep, PathVerdict } from "./path-types.ts";

/** How many answers are kept before the cache starts afresh. */
const MAX_ENTRIES = 1 << 14;

/** The tests an answer's source passed, read off its log (duplicates once). */
interface Guard {
  /** Pairs of block bounds, with whether the source lay in each. */
  readonly starts: readonly bigint[];
  readonly ends: readonly bigint[];
  readonly inside: readonly boolean[];
  /** Port specs, with the answer the source port gave each. */
  readonly specs: readonly PortsSpec[];
  readonly answers: readonly (boolean | "unknown")[];
  /** The one source the answer holds for, when something read the exact address. */
  readonly exact: bigint | undefined;
}

/** Where an outcome holds the packet's own source. */
interface SrcSlots {
  /** Indexes of the snat steps whose `from` is the packet's source. */
  readonly steps: readonly number[];
  /** Per such step, whether its `to` is the packet's source too (a kept source). */
  readonly to: readonly boolean[];
  /** The forwarded verdict's `src` is the packet's source (no source NAT). */
  readonly verdict: boolean;
}

interface Entry {
  readonly guard: Guard;
  readonly outcomes: readonly PathOutcome[];
  /** Per outcome, where its packet's source goes (undefined: nowhere). */
  readonly slots: readonly (SrcSlots | undefined)[];
  readonly notes: readonly string[];
}

/** Answers kept for reuse, with what they were read on. */
export class AnswerCache {
  readonly #byKey = new Map<string, Entry[]>();
  #size = 0;
  /** The `ip rule` selectors that read the source or its port (undefined: none do). */
  readonly #ruleFroms: readonly IpRule[];

  constructor(ipRules: readonly IpRule[] | undefined) {
    this.#ruleFroms = (ipRules ?? []).filter((r) => r.from !== undefined || r.sport !== undefined);
  }

  /** The key of a packet entering with `inIface`; undefined when its answer is not kept. */
  keyOf(p: PathPacket, inIface: string | undefined): string | undefined {
    if (p.origin === "host") return undefined;
    // an IPv4 address printed as a number (the same digits; a bigint prints slower)
    const dst = p.dst.family === 4 ? Number(p.dst.value) : p.dst.value;
    let key = `${p.dst.family}${p.src.family}|${dst}|${p.proto}|${p.dport}|${p.origin}|${inIface}|${p.mark}|${p.ctstate}`;
    for (const r of this.#ruleFroms) {
      // what routeByPolicy asks of the source and its port
      key += r.from === undefined ? "|-" : contains(r.from, p.src) ? "|1" : "|0";
      key +=
        r.sport === undefined || p.sport === undefined
          ? "-"
          : p.sport >= r.sport.from && p.sport <= r.sport.to
            ? "1"
            : "0";
      if (r.sport !== undefined && p.sport === undefined) key += "u";
    }
    return key;
  }

  /** The kept answer for the packet, with its own source, or undefined. */
  get(key: string, p: PathPacket): PathResult | undefined {
    const list = this.#byKey.get(key);
    if (list === undefined) return undefined;
    const src = p.src.value;
    for (const e of list) {
      if (!holds(e.guard, src, p.sport)) continue;
      const outcomes = new Array<PathOutcome>(e.outcomes.length);
      for (let i = 0; i < outcomes.length; i++) {
        const o = e.outcomes[i]!;
        const s = e.slots[i];
        outcomes[i] = s === undefined ? o : withSource(o, s, p.src);
      }
      return { packet: p, outcomes, notes: e.notes.slice() };
    }
    return undefined;
  }

  /** Keeps the packet's answer, made while `log` was watching; false when it cannot be reused. */
  put(key: string, p: PathPacket, r: PathResult, log: SrcReadLog): boolean {
    if (log.opaque) return false;
    const guard = guardOf(log, p);
    if (guard === undefined) return false;
    const slots = new Array<SrcSlots | undefined>(r.outcomes.length);
    for (let i = 0; i < slots.length; i++) {
      const s = slotsOf(r.outcomes[i]!, p.src);
      if (s === null) return false;
      slots[i] = s;
    }
    if (this.#size >= MAX_ENTRIES) {
      this.#byKey.clear();
      this.#size = 0;
    }
    const entry: Entry = { guard, outcomes: r.outcomes.slice(), slots, notes: r.notes.slice() };
    const list = this.#byKey.get(key);
    if (list === undefined) this.#byKey.set(key, [entry]);
    else list.push(entry);
    this.#size++;
    return true;
  }

  /** Forgets every answer. */
  clear(): void {
    this.#byKey.clear();
    this.#size = 0;
  }

  /** How many answers are kept. */
  get size(): number {
    return this.#size;
  }
}

/** The log's tests as a guard; undefined when a test read another source than the packet's. */
function guardOf(log: SrcReadLog, p: PathPacket): Guard | undefined {
  const src = p.src.value;
  const sport = p.sport;
  const starts: bigint[] = [];
  const ends: bigint[] = [];
  const inside: boolean[] = [];
  const specs: PortsSpec[] = [];
  const answers: (boolean | "unknown")[] = [];
  let exact: bigint | undefined;
  const tests = log.tests;
  const seen = log.seen;
  // the same test comes back (a rule read by several walks): once in the guard, found by a scan
  // of the few kept so far
  next: for (let i = 0; i < log.length; i++) {
    const t = tests[i]!;
    if (t.kind === "sport") {
      if (seen[i] !== sport) return undefined;
      for (const x of specs) if (x === t.spec) continue next;
      specs.push(t.spec);
      answers.push(sportAnswer(t.spec, sport));
      continue;
    }
    if (seen[i] !== src) return undefined;
    if (t.kind === "exact") {
      exact = src;
      continue;
    }
    for (let j = 0; j < starts.length; j++)
      if (starts[j] === t.start && ends[j] === t.end) continue next;
    starts.push(t.start);
    ends.push(t.end);
    inside.push(src >= t.start && src <= t.end);
  }
  return { starts, ends, inside, specs, answers, exact };
}

/** Whether a source and source port answer the guard's tests as its answer's packet did. */
function holds(g: Guard, src: bigint, sport: number | undefined): boolean {
  if (g.exact !== undefined && g.exact !== src) return false;
  const starts = g.starts;
  const ends = g.ends;
  const inside = g.inside;
  for (let i = 0; i < starts.length; i++) {
    if ((src >= starts[i]! && src <= ends[i]!) !== inside[i]) return false;
  }
  const specs = g.specs;
  for (let i = 0; i < specs.length; i++)
    if (sportAnswer(specs[i]!, sport) !== g.answers[i]) return false;
  return true;
}

/**
 * Where the outcome holds the packet's source object (the evaluation hands the packet's own `Ip`
 * on); undefined when nowhere, null when it holds it anywhere else (then it is not kept). Only the
 * fields path-types declares as `Ip` are read: this runs for every step of every answer kept.
 */
function slotsOf(o: PathOutcome, src: Ip): SrcSlots | undefined | null {
  let steps: number[] | undefined;
  let to: boolean[] | undefined;
  const list = o.steps;
  for (let i = 0; i < list.length; i++) {
    const s = list[i]!;
    if (s.kind === "snat" && s.from === src) {
      if (steps === undefined || to === undefined) {
        steps = [];
        to = [];
      }
      steps.push(i);
      to.push(s.to === src);
    } else if (stepHolds(s, src)) return null;
  }
  const v = o.verdict;
  let verdict = false;
  if (v.kind === "forwarded" && v.src === src) {
    if (v.dst === src || v.via === src) return null;
    verdict = true;
  } else if (verdictHolds(v, src)) return null;
  if (o.dstOut === src) return null;
  return steps === undefined && !verdict
    ? undefined
    : { steps: steps ?? [], to: to ?? [], verdict };
}

/** Whether a step holds `src` in one of its `Ip` fields (an assumption, a rule, a hook hold none). */
function stepHolds(s: PathStep, src: Ip): boolean {
  switch (s.kind) {
    case "dnat":
      return s.to === src;
    case "route":
      return s.dst === src || s.via === src || s.src === src || s.mainTable?.via === src;
    case "snat":
      return s.from === src || s.to === src;
    default:
      return false;
  }
}

/** Whether a verdict holds `src` in one of its `Ip` fields. */
function verdictHolds(v: PathVerdict, src: Ip): boolean {
  switch (v.kind) {
    case "delivered":
      return v.dst === src;
    case "forwarded":
      return v.src === src || v.dst === src || v.via === src;
    default:
      return false;
  }
}

/** The kept outcome with `src` as its packet's source. */
function withSource(o: PathOutcome, s: SrcSlots, src: Ip): PathOutcome {
  let steps: readonly PathStep[] = o.steps;
  if (s.steps.length > 0) {
    const copy = o.steps.slice();
    for (let k = 0; k < s.steps.length; k++) {
      const i = s.steps[k]!;
      copy[i] = s.to[k]
        ? { ...(copy[i] as SnatStep), from: src, to: src }
        : { ...(copy[i] as SnatStep), from: src };
    }
    steps = copy;
  }
  const verdict: PathVerdict = s.verdict ? { ...(o.verdict as ForwardedVerdict), src } : o.verdict;
  return { ...o, steps, verdict };
}

type SnatStep = Extract<PathStep, { kind: "snat" }>;
type ForwardedVerdict = Extract<PathVerdict, { kind: "forwarded" }>;
