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
import type { SrcRead, SrcReadLog } from "../iptables/src-reads.ts";
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
  readonly ports: readonly {
    readonly read: Extract<SrcRead, { kind: "sport" }>;
    readonly answer: boolean | "unknown";
  }[];
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
    let key = `${p.dst.family}${p.src.family}|${p.dst.value}|${p.proto}|${p.dport}|${p.origin}|${inIface}|${p.mark}|${p.ctstate}`;
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
    const guard = guardOf(log.reads, p);
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
function guardOf(reads: readonly SrcRead[], p: PathPacket): Guard | undefined {
  const src = p.src.value;
  const starts: bigint[] = [];
  const ends: bigint[] = [];
  const inside: boolean[] = [];
  const ports: { read: Extract<SrcRead, { kind: "sport" }>; answer: boolean | "unknown" }[] = [];
  const seenBlocks = new Set<string>();
  const seenPorts = new Set<unknown>();
  let exact: bigint | undefined;
  for (const r of reads) {
    if (r.kind === "sport") {
      if (r.seen !== p.sport) return undefined;
      if (seenPorts.has(r.spec)) continue;
      seenPorts.add(r.spec);
      ports.push({ read: r, answer: sportAnswer(r.spec, r.seen) });
      continue;
    }
    if (r.seen !== src) return undefined;
    if (r.kind === "exact") {
      exact = src;
      continue;
    }
    const id = `${r.start}-${r.end}`;
    if (seenBlocks.has(id)) continue;
    seenBlocks.add(id);
    starts.push(r.start);
    ends.push(r.end);
    inside.push(src >= r.start && src <= r.end);
  }
  return { starts, ends, inside, ports, exact };
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
  for (const x of g.ports) if (sportAnswer(x.read.spec, sport) !== x.answer) return false;
  return true;
}

/**
 * Where the outcome holds the packet's source object (the evaluation hands the packet's own `Ip`
 * on); undefined when nowhere, null when it holds it anywhere else (then it is not kept).
 */
function slotsOf(o: PathOutcome, src: Ip): SrcSlots | undefined | null {
  const steps: number[] = [];
  const to: boolean[] = [];
  for (let i = 0; i < o.steps.length; i++) {
    const s = o.steps[i]!;
    if (s.kind === "snat" && s.from === src) {
      steps.push(i);
      to.push(s.to === src);
    } else if (holdsShallow(s, src)) return null;
  }
  const v = o.verdict;
  let verdict = false;
  if (v.kind === "forwarded" && v.src === src) {
    if (v.dst === src || v.via === src) return null;
    verdict = true;
  } else if (holdsShallow(v, src)) return null;
  if (o.dstOut === src) return null;
  for (const a of o.assumptions) if (holdsShallow(a, src)) return null;
  return steps.length === 0 && !verdict ? undefined : { steps, to, verdict };
}

/** Whether any field of the object (or of an object in it, one level down) is `src`. */
function holdsShallow(x: object, src: Ip): boolean {
  for (const v of Object.values(x)) {
    if (v === src) return true;
    if (typeof v === "object" && v !== null)
      for (const w of Object.values(v)) if (w === src) return true;
  }
  return false;
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
