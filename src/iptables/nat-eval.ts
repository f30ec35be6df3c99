/**
 * @module iptables/nat-eval — follows one connection's first packet through the nat table the way
 * the kernel does: PREROUTING (or OUTPUT for the node's own traffic), then POSTROUTING (or INPUT
 * for local delivery); jumps, goto, RETURN, policies; the first NAT target of a hook decides.
 * The table is compiled once (chains resolved, address blocks as bigint bounds, big chains indexed
 * on the destination address) so evaluating a flow does not scan every rule.
 */

import type { SourceRef } from "../model/types.ts";
import { type Family, formatIp, type Ip } from "../net/cidr.ts";
import type { Chain, IptablesDump, Rule, Target } from "./dump.ts";
import {
  branchesTrace,
  CONTINUING_TARGETS,
  cloneState as cloneStateShared,
  evalPreds as evalPredsShared,
  settledFacts,
  takeBothWays,
} from "./forks.ts";
import {
  type AddressKnowledge,
  addressKnowledge,
  assumed,
  compileRulePreds,
  isLocalAddress,
  localFactText,
  localKey,
  normalizeProto,
  type PacketState,
  type Pred,
} from "./nat-match.ts";
import type {
  CtState,
  DstOut,
  Flow,
  NatBranch,
  NatContext,
  NatDecision,
  NatEvaluator,
  NatStep,
  NatStepKind,
  NatTrace,
  SourceOut,
  Undecided,
  UnknownFact,
} from "./nat-trace.ts";
import { ruleCount } from "./saved-chain.ts";
import { EXACT_SRC, SRC_READS, type SrcReadLog } from "./src-reads.ts";

interface CRule {
  readonly rule: Rule;
  /** The rule's target, position and line, read once (a parsed rule reads them through getters). */
  readonly target: Target | undefined;
  readonly index: number;
  readonly source: SourceRef;
  /** Predicates compiled by nat-match. */
  readonly preds: readonly Pred[];
  /** Resolved chain for jump/goto targets; null when the chain is not in the dump. */
  jump: CChain | null | undefined;
  /** Steps are immutable: the ones this rule produces are made once and shared ({@link Memo}). */
  m0?: NatStep;
  m1?: NatStep;
  m2?: NatStep;
  memo?: Map<unknown, NatStep>;
}

interface Run {
  readonly end: number;
  /** Keyed by the address as a number for IPv4 (cheaper to hash), as a bigint for IPv6. */
  readonly byDst: Map<number | bigint, number[]>;
}

interface CChain {
  readonly name: string;
  readonly builtin: boolean;
  readonly policy: string | undefined;
  readonly ref: SourceRef;
  /** The chain's rules as parsed. */
  readonly src: readonly Rule[];
  /** Compiled on first visit (most of a kube-proxy table is never reached by a given flow). */
  readonly rules: (CRule | undefined)[];
  /** The file may not show every rule of this chain (an excerpt). */
  readonly partial: boolean;
  /** With `partial`: only rules after the last one shown may be missing (a cut, not a grep). */
  readonly partialTail: boolean;
  /** For indexed chains: for each rule position, the run it belongs to (-1: none). */
  runOf?: Int32Array;
  runs?: Run[];
  indexV4?: boolean;
  /** The steps this chain always makes alike ({@link Memo}). */
  m0?: NatStep;
  m1?: NatStep;
  m2?: NatStep;
  memo?: Map<unknown, NatStep>;
}

interface StepNode {
  readonly step: NatStep;
  readonly prev: StepNode | undefined;
}

interface Frame {
  chain: CChain;
  pos: number;
}

type Hook = "PREROUTING" | "OUTPUT" | "POSTROUTING" | "INPUT";

interface Walk {
  st: PacketState;
  frames: Frame[];
  hook: CChain;
  hookName: Hook;
  steps: StepNode | undefined;
  prob: number;
}

type EndKind = "accept" | "nat" | "drop" | "undecided";

/**
 * A forwarded flow's first hook, kept ({@link NatContext.reuseFirstHook}): the walks that ended
 * there, and those that go on to the routing decision as they stood when it was made.
 */
interface FirstHook {
  readonly flow: Flow;
  readonly ended: readonly HookEnd[];
  readonly between: readonly Walk[];
  readonly walks: number;
  /** The source tests its walk made (iptables/src-reads), when it was watched. */
  readonly reads: SrcReadLog | undefined;
}

interface HookEnd {
  readonly w: Walk;
  readonly kind: EndKind;
  readonly ref: SourceRef;
  readonly target?: Target;
  readonly undecided?: Undecided;
}

// TEE sends a copy elsewhere; the packet itself goes on through nat
const NON_TERMINATING = new Set([...CONTINUING_TARGETS, "TEE"]);

const MAX_DEPTH = 128;
// bound once: an imported function is read through a getter on every call under tsx
const evalPreds = evalPredsShared;
const cloneState = cloneStateShared;
// the verdicts of nat-match, as local constants (imported bindings cost a getter under tsx)
const NO = 0;
const UNDECIDED = 2;
const BRANCH = 3;

/**
 * Compiles the dump's nat table for evaluation. The dump's other tables are read only to learn
 * whether something could have marked the packet before nat (mangle/raw MARK rules).
 *
 * @example
 * const nat = compileNat(dump, { nodeInternalIp: parseIp("10.128.0.20"), localAddresses: [...] });
 * nat.evaluate({ src: parseIp("10.4.1.5"), dst: parseIp("10.20.30.40"), proto: "tcp", dport: 5432, origin: "pod" });
 */
export function compileNat(dump: IptablesDump, ctx: NatContext = {}): NatEvaluator {
  const family = dump.family;
  const table = dump.tables.get("nat");
  const ifaceAddrs = (ctx.interfaces ?? []).flatMap((i) => i.addresses ?? []);
  const knowledge = addressKnowledge(
    ctx.localAddresses,
    ifaceAddrs,
    ctx.addressFacts,
    ctx.ipsets,
    ctx.ipsetFile,
  );
  const chains = new Map<string, CChain>();
  const tableRef: SourceRef = table?.source ?? {
    file: dump.file,
    line: 0,
    text: "(nat table not in the dump)",
  };
  // in an excerpt, a hook chain it does not show is unknown, not empty
  const excerpt = dump.excerpt !== undefined;
  for (const name of ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"]) {
    if (!table?.chains.has(name)) {
      chains.set(name, {
        name,
        builtin: true,
        policy: undefined,
        ref: tableRef,
        src: [],
        rules: [],
        partial: excerpt,
        partialTail: false,
      });
    }
  }
  const compiled = (c: Chain): CChain => ({
    name: c.name,
    builtin: c.builtin,
    policy: c.policy,
    ref: c.declared ?? tableRef,
    src: c.rules,
    rules: new Array<CRule | undefined>(c.rules.length),
    partial: c.partial === true,
    partialTail: c.partial === true && c.partialTail === true,
  });
  // the big chains are indexed now; the rest are compiled when a flow first reaches them (a
  // kube-proxy table has tens of thousands of chains of one or two rules)
  const threshold = ctx.indexThreshold ?? 16;
  if (table) {
    for (const c of table.chains.values()) {
      const n = ruleCount(c);
      if (c.builtin || n >= threshold) {
        const cc = compiled(c);
        if (n >= threshold) buildIndex(cc, family);
        chains.set(c.name, cc);
      }
    }
  }
  const chainNamed = (name: string): CChain | undefined => {
    let cc = chains.get(name);
    if (cc === undefined) {
      const c = table?.chains.get(name);
      if (c === undefined) return undefined;
      cc = compiled(c);
      chains.set(name, cc);
    }
    return cc;
  };
  // the packet-mark bits the mangle/raw rules can change before nat (the others stay as given)
  let marksMayBePreset = 0;
  for (const t of dump.tables.values()) {
    if (t.name !== "mangle" && t.name !== "raw") continue;
    for (const c of t.chains.values()) {
      for (const r of c.rules) marksMayBePreset = (marksMayBePreset | markBitsSet(r)) >>> 0;
    }
  }
  const engine = new Engine(
    dump,
    ctx,
    chainNamed,
    knowledge,
    marksMayBePreset,
    table === undefined && !excerpt,
  );
  return { evaluate: (flow) => engine.evaluate(flow) };
}

/**
 * The packet-mark bits a mangle/raw rule can change: MARK's mask and value, CONNMARK
 * --restore-mark's nfmask (its other modes change the connection's mark only), every bit for a
 * target podpath does not read (HMARK, an unparsed MARK).
 */
function markBitsSet(r: Rule): number {
  const t = r.target;
  if (!t) return 0;
  if (t.kind === "MARK") return (t.op.mask | t.op.value) >>> 0;
  if (t.kind === "CONNMARK") return t.mode === "restore" ? t.nfmask >>> 0 : 0;
  if (t.kind === "extension" && ["MARK", "CONNMARK", "HMARK"].includes(t.name)) return 0xffffffff;
  return 0;
}

/**
 * Index a chain on the destination address: maximal runs of consecutive rules that match one
 * exact destination (`-d A/32`, not negated) get a map from that address to their positions.
 * A rule outside the map cannot match a packet to another address, so skipping it keeps the
 * first-match order (kube-proxy's KUBE-SERVICES is one such run of thousands of rules).
 */
function buildIndex(c: CChain, family: Family): void {
  const full = family === 4 ? 32 : 128;
  const n = c.src.length;
  const runOf = new Int32Array(n).fill(-1);
  const runs: Run[] = [];
  const exact = (r: Rule) => r.dst !== undefined && !r.dst.negated && r.dst.cidr.prefix === full;
  let i = 0;
  while (i < n) {
    if (!exact(c.src[i]!)) {
      i++;
      continue;
    }
    let j = i;
    const byDst = new Map<number | bigint, number[]>();
    while (j < n && exact(c.src[j]!)) {
      const start = c.src[j]!.dst!.cidr.start;
      const key = family === 4 ? Number(start) : start;
      const list = byDst.get(key);
      if (list) list.push(j);
      else byDst.set(key, [j]);
      j++;
    }
    if (j - i >= 4) {
      const id = runs.length;
      runs.push({ end: j, byDst });
      runOf.fill(id, i, j);
    }
    i = j;
  }
  if (runs.length > 0) {
    c.runOf = runOf;
    c.runs = runs;
    c.indexV4 = family === 4;
  }
}

/** The first rule at or after `pos` that could match a packet to `dst`. */
function nextCandidate(c: CChain, pos: number, dst: bigint): number {
  const runOf = c.runOf;
  if (runOf === undefined) return pos;
  const key = c.indexV4 ? Number(dst) : dst;
  const n = c.src.length;
  while (pos < n) {
    const ri = runOf[pos]!;
    if (ri < 0) return pos;
    const run = c.runs![ri]!;
    const list = run.byDst.get(key);
    if (list !== undefined) {
      for (const k of list) if (k >= pos) return k;
    }
    pos = run.end;
  }
  return n;
}

/**
 * What holds the steps a rule or chain always makes alike: the common keys in fields (a rule has
 * one target, so one of jump, mark, dnat, snat, log; a chain is entered and ends in its policy),
 * the others (a RETURN's chain, an ACCEPT's hook) in a map.
 */
interface Memo {
  /** enter (a chain), or the one target step of a rule: jump, mark, dnat, snat, log. */
  m0?: NatStep;
  /** policy (a chain), or a statistic rule's "taken". */
  m1?: NatStep;
  /** A statistic rule's "not taken". */
  m2?: NatStep;
  memo?: Map<unknown, NatStep>;
}

function slotOf(key: unknown): number {
  switch (key) {
    case "enter":
    case "jump":
    case "mark":
    case "dnat":
    case "snat":
    case "log":
      return 0;
    case "policy":
    case "taken":
      return 1;
    case "not-taken":
      return 2;
    default:
      return 3;
  }
}

/** A walk between the hooks, copied: the second hook changes its state and frames. */
function copyWalk(w: Walk): Walk {
  const st = cloneState(w.st);
  st.unknown = w.st.unknown;
  return { st, frames: [], hook: w.hook, hookName: w.hookName, steps: w.steps, prob: w.prob };
}

function copyWalks(ends: readonly HookEnd[]): Walk[] {
  const out = new Array<Walk>(ends.length);
  for (let i = 0; i < ends.length; i++) out[i] = copyWalk(ends[i]!.w);
  return out;
}

/** Whether two flows are the same forwarded flow but for the interface they leave by. */
function sameButOutIface(a: Flow, b: Flow): boolean {
  return (
    a.src.value === b.src.value &&
    a.dst.value === b.dst.value &&
    a.src.family === b.src.family &&
    a.dst.family === b.dst.family &&
    a.proto === b.proto &&
    a.sport === b.sport &&
    a.dport === b.dport &&
    a.origin === b.origin &&
    a.origin !== "host" &&
    a.inIface === b.inIface &&
    a.mark === b.mark &&
    a.ctstate === b.ctstate &&
    a.dstLocal === b.dstLocal
  );
}

/** The source a packet leaves with when no rule translates it. */
function unchangedSource(flow: Flow): SourceOut {
  return {
    ip: flow.src,
    how: "unchanged",
    note: "no source NAT: the packet leaves with its own source address",
  };
}

function cloneFrames(frames: Frame[]): Frame[] {
  const out: Frame[] = new Array(frames.length);
  for (let i = 0; i < frames.length; i++) out[i] = { chain: frames[i]!.chain, pos: frames[i]!.pos };
  return out;
}

function applyMarkOp(value: number, known: number, op: { value: number; mask: number }) {
  return { value: ((value & ~op.mask) ^ op.value) >>> 0, known: (known | op.mask) >>> 0 };
}

const fmt = (family: Family, v: bigint) => formatIp({ family, value: v });

/**
 * DNAT: the destination (and port) become the one given. The reason it cannot be decided (no
 * --to-destination, a range the kernel picks from per connection), else undefined.
 */
function applyDnat(
  s: PacketState,
  to: Extract<Target, { kind: "SNAT" | "DNAT" }>["to"],
): string | undefined {
  if (!to) return "DNAT without --to-destination";
  if (to.from && to.to && to.from.value !== to.to.value) {
    return `DNAT to the range ${formatIp(to.from)}-${formatIp(to.to)}: the kernel picks one address per connection`;
  }
  if (to.ports && to.ports.from !== to.ports.to) {
    return `DNAT to the port range ${to.ports.from}-${to.ports.to}: the kernel picks one port per connection`;
  }
  if (to.from) s.dst = to.from.value;
  if (to.ports) s.dport = to.ports.from;
  return undefined;
}

/** CONNMARK's effect on the packet's and the connection's marks (xt_connmark). */
function connmark(s: PacketState, t: Extract<Target, { kind: "CONNMARK" }>): void {
  if (t.mode === "set") {
    const m = applyMarkOp(s.ctmark, s.ctmarkKnown, t.op);
    s.ctmark = m.value;
    s.ctmarkKnown = m.known;
  } else if (t.mode === "save") {
    // xt_connmark: ctmark = (ctmark & ~ctmask) ^ (mark & nfmask)
    const v = ((s.ctmark & ~t.ctmask) ^ (s.mark & t.nfmask)) >>> 0;
    s.ctmarkKnown = ((s.ctmarkKnown | t.ctmask) & (s.markKnown | ~t.nfmask)) >>> 0;
    s.ctmark = v;
  } else {
    // mark = (mark & ~nfmask) ^ (ctmark & ctmask)
    const v = ((s.mark & ~t.nfmask) ^ (s.ctmark & t.ctmask)) >>> 0;
    s.markKnown = ((s.markKnown | t.nfmask) & (s.ctmarkKnown | ~t.ctmask)) >>> 0;
    s.mark = v;
  }
}

class Engine {
  private readonly dump: IptablesDump;
  private readonly ctx: NatContext;
  /** The compiled chain of that name (compiled on first use), undefined when not in the dump. */
  private readonly chainNamed: (name: string) => CChain | undefined;
  private readonly knowledge: AddressKnowledge;
  private readonly marksMayBePreset: number;
  private readonly noNatTable: boolean;
  private readonly maxBranches: number;
  private walks = 0;
  private readonly hookChains: Readonly<Record<Hook, CChain>>;
  private readonly reuse: boolean;
  private last: FirstHook | undefined;

  constructor(
    dump: IptablesDump,
    ctx: NatContext,
    chainNamed: (name: string) => CChain | undefined,
    knowledge: AddressKnowledge,
    marksMayBePreset: number,
    noNatTable: boolean,
  ) {
    this.dump = dump;
    this.ctx = ctx;
    this.chainNamed = chainNamed;
    this.knowledge = knowledge;
    this.marksMayBePreset = marksMayBePreset;
    this.noNatTable = noNatTable;
    this.maxBranches = ctx.maxBranches ?? 512;
    this.reuse = ctx.reuseFirstHook === true;
    this.hookChains = {
      PREROUTING: chainNamed("PREROUTING")!,
      INPUT: chainNamed("INPUT")!,
      OUTPUT: chainNamed("OUTPUT")!,
      POSTROUTING: chainNamed("POSTROUTING")!,
    };
  }

  evaluate(flow: Flow): NatTrace {
    const family = this.dump.family;
    const notes: string[] = [];
    if (flow.src.family !== family || flow.dst.family !== family) {
      return this.bare(
        flow,
        notes,
        `the flow is IPv${flow.src.family === family ? flow.dst.family : flow.src.family} but ${this.dump.file} holds IPv${family} rules`,
      );
    }
    if (this.noNatTable)
      notes.push(`${this.dump.file} has no nat table: nothing rewrites this flow there`);
    const ctstate = flow.ctstate ?? "NEW";
    if (ctstate !== "NEW") {
      notes.push(
        `the nat table is consulted only for the first packet of a connection; a ${ctstate} packet keeps the translation chosen then (this is what a new connection would get now)`,
      );
    }
    let markKnown = 0xffffffff;
    if (flow.mark === undefined && this.marksMayBePreset !== 0) {
      markKnown = ~this.marksMayBePreset >>> 0;
      notes.push(
        "the mangle/raw tables can set packet marks and the flow's mark was not given: mark matches cannot be decided",
      );
    }
    const host = flow.origin === "host";
    const finals: HookEnd[] = [];
    const between: HookEnd[] = [];
    const last = this.last;
    if (last !== undefined && sameButOutIface(last.flow, flow)) {
      // the same forwarded flow, told another outgoing interface: its PREROUTING (which does not
      // see the outgoing interface) is the last one's
      for (const e of last.ended) finals.push(e);
      for (const w of last.between) {
        between.push({ w: copyWalk(w), kind: "accept", ref: w.hook.ref });
      }
      this.walks = last.walks;
      // a watched evaluation reads the source as the walk it reuses did
      const log = SRC_READS.log;
      if (log !== undefined) {
        if (last.reads === undefined) log.opaque = true;
        else log.addAll(last.reads);
      }
    } else this.first(flow, host, markKnown, ctstate, finals, between);
    return this.second(flow, host, finals, between, notes);
  }

  /** The first hook (PREROUTING or OUTPUT): the walks that end there, and those that go on. */
  private first(
    flow: Flow,
    host: boolean,
    markKnown: number,
    ctstate: CtState,
    finals: HookEnd[],
    between: HookEnd[],
  ): void {
    const family = this.dump.family;
    const st: PacketState = {
      family,
      src: flow.src.value,
      dst: flow.dst.value,
      origSrc: flow.src.value,
      origDst: flow.dst.value,
      proto: normalizeProto(flow.proto),
      sport: flow.sport,
      dport: flow.dport,
      inIface: host ? "" : flow.inIface,
      outIface: host ? flow.outIface : "",
      mark: (flow.mark ?? 0) >>> 0,
      markKnown,
      ctmark: 0,
      ctmarkKnown: ctstate === "NEW" ? 0xffffffff : 0,
      // a later packet keeps the translation chosen for its connection's first packet: the nat
      // rules saw that one, whose state was NEW
      ctstate: ctstate === "ESTABLISHED" || ctstate === "RELATED" ? "NEW" : ctstate,
      dnatted: false,
      reason: "",
      branchP: 1,
      branchNote: "",
      premise:
        flow.dstLocal === undefined ? undefined : { addr: flow.dst.value, local: flow.dstLocal },
      taken: undefined,
      factsUsed: undefined,
      unknown: undefined,
    };
    this.walks = 1;
    const first: Hook = host ? "OUTPUT" : "PREROUTING";
    const w0: Walk = {
      st,
      frames: [],
      hook: this.hookChains[first],
      hookName: first,
      steps: undefined,
      prob: 1,
    };
    const log = SRC_READS.log;
    const readsFrom = log === undefined ? 0 : log.length;
    const ends1 = this.runHook(w0, first);
    for (const e of ends1) {
      if (e.kind === "drop" || e.kind === "undecided") finals.push(e);
      else between.push(e);
    }
    this.last =
      this.reuse && !host
        ? {
            flow,
            ended: [...finals],
            between: copyWalks(between),
            walks: this.walks,
            reads: log === undefined ? undefined : log.slice(readsFrom),
          }
        : undefined;
  }

  /** The routing decision and the second hook (POSTROUTING or INPUT), then the trace. */
  private second(
    flow: Flow,
    host: boolean,
    finals: HookEnd[],
    between: HookEnd[],
    notes: string[],
  ): NatTrace {
    const family = this.dump.family;
    while (between.length > 0) {
      const w = between.shift()!.w;
      let second: Hook = "POSTROUTING";
      if (!host) {
        // the routing decision: a destination that is the node's own is delivered (nat INPUT)
        const st = w.st;
        let local = this.isLocal(st);
        if (local === undefined) {
          if (this.walks >= this.maxBranches) {
            finals.push(this.tooMany(w));
            continue;
          }
          const other = this.forkWalk(w, {
            key: localKey(family, st.dst),
            fact: localFactText(family, st.dst),
            reason:
              "routing: whether the destination is the node's own address decides between local delivery and forwarding",
            rule: w.hook.ref,
            decide: { command: "ip -o addr   # on the node" },
          });
          between.push({ w: other, kind: "accept", ref: w.hook.ref });
          local = true;
        }
        if (local) second = "INPUT";
        w.st.inIface = second === "INPUT" ? flow.inIface : "";
        w.st.outIface = second === "INPUT" ? "" : flow.outIface;
      }
      if (this.walks > this.maxBranches) {
        finals.push(this.tooMany(w));
        continue;
      }
      for (const e2 of this.runHook(w, second)) finals.push(e2);
    }
    if (this.walks > this.maxBranches) {
      return this.bare(
        flow,
        notes,
        `more than ${this.maxBranches} statistic branches: too many to follow`,
      );
    }
    const traces = new Array<NatTrace>(finals.length);
    for (let i = 0; i < finals.length; i++) traces[i] = this.toTrace(flow, finals[i]!, notes);
    if (traces.length === 1) return traces[0]!;
    return this.combine(flow, finals, traces, notes);
  }

  private compileRule(c: CChain, idx: number): CRule {
    const rule = c.src[idx]!;
    const t = rule.target;
    const cr: CRule = {
      rule,
      target: t,
      index: rule.index,
      source: rule.source,
      preds: compileRulePreds(rule, this.dump.family, this.knowledge),
      jump: t?.kind === "chain" ? (this.chainNamed(t.name) ?? null) : undefined,
    };
    c.rules[idx] = cr;
    return cr;
  }

  /** Is the destination the node's own: from its addresses, a fact, or what the walk took. */
  private isLocal(st: PacketState): boolean | undefined {
    const family = this.dump.family;
    return (
      isLocalAddress(st.dst, family, this.knowledge, st) ?? assumed(st, localKey(family, st.dst))
    );
  }

  /**
   * Follows both outcomes of an unknown fact: `w` goes on taking it as true, the returned copy
   * (not yet scheduled) as false.
   */
  private forkWalk(w: Walk, u: UnknownFact & { readonly key: unknown }): Walk {
    this.walks++;
    const other: Walk = {
      st: cloneState(w.st),
      frames: cloneFrames(w.frames),
      hook: w.hook,
      hookName: w.hookName,
      steps: w.steps,
      prob: w.prob,
    };
    takeBothWays(w.st, other.st, u);
    const chain = w.frames[w.frames.length - 1]?.chain ?? w.hook;
    const index = u.rule.line === chain.ref.line ? 0 : this.ruleIndexAt(chain, u.rule);
    this.step(w, "branch", chain, index, u.rule, `if ${u.fact} (not known: ${u.reason})`);
    this.step(other, "branch", chain, index, u.rule, `if not: ${u.fact} (not known: ${u.reason})`);
    return other;
  }

  private ruleIndexAt(c: CChain, ref: SourceRef): number {
    for (const r of c.rules) if (r && r.source === ref) return r.index;
    return 0;
  }

  private tooMany(w: Walk): HookEnd {
    const undecided: Undecided = {
      chain: w.hook.name,
      ruleIndex: 0,
      rule: w.hook.ref,
      reason: `more than ${this.maxBranches} statistic branches: too many to follow`,
    };
    return { w, kind: "undecided", ref: w.hook.ref, undecided };
  }

  private bare(flow: Flow, notes: string[], reason: string): NatTrace {
    const ref: SourceRef = { file: this.dump.file, line: 0 };
    return {
      flow,
      steps: [],
      decision: "cannot-decide",
      undecided: { chain: "", ruleIndex: 0, rule: ref, reason },
      notes: [...notes, reason],
    };
  }

  private step(
    w: Walk,
    kind: NatStepKind,
    chain: CChain,
    ruleIndex: number,
    source: SourceRef,
    note: string,
  ): void {
    w.steps = { step: { kind, chain: chain.name, ruleIndex, source, note }, prev: w.steps };
  }

  /**
   * Pushes the step already made for this holder and key; false when there is none yet (then
   * {@link stepM} makes it: its note is a closure, made only then).
   */
  private hit(w: Walk, holder: Memo, key: unknown): boolean {
    const slot = slotOf(key);
    const step =
      slot === 0
        ? holder.m0
        : slot === 1
          ? holder.m1
          : slot === 2
            ? holder.m2
            : holder.memo?.get(key);
    if (step === undefined) return false;
    w.steps = { step, prev: w.steps };
    return true;
  }

  /** Pushes a step made once per holder and key (`note` is only called the first time). */
  private stepM(
    w: Walk,
    holder: Memo,
    key: unknown,
    kind: NatStepKind,
    chain: CChain,
    ruleIndex: number,
    source: SourceRef,
    note: () => string,
  ): void {
    if (this.hit(w, holder, key)) return;
    const step: NatStep = { kind, chain: chain.name, ruleIndex, source, note: note() };
    const slot = slotOf(key);
    if (slot === 0) holder.m0 = step;
    else if (slot === 1) holder.m1 = step;
    else if (slot === 2) holder.m2 = step;
    else {
      let memo = holder.memo;
      if (memo === undefined) {
        memo = new Map();
        holder.memo = memo;
      }
      memo.set(key, step);
    }
    w.steps = { step, prev: w.steps };
  }

  private runHook(w: Walk, hook: Hook): HookEnd[] {
    const chain = this.hookChains[hook];
    w.hook = chain;
    w.hookName = hook;
    w.frames = [{ chain, pos: 0 }];
    if (!this.hit(w, chain, "enter"))
      this.stepM(w, chain, "enter", "enter", chain, 0, chain.ref, () => `nat ${hook}`);
    const out: HookEnd[] = [];
    const pending: Walk[] = [];
    if (!chain.partial || chain.partialTail || this.openPartial(w, out, chain)) pending.push(w);
    while (pending.length > 0) {
      const next = pending.shift()!;
      if (this.walks > this.maxBranches) {
        out.push(this.tooMany(next));
        continue;
      }
      this.loop(next, out, pending);
    }
    return out;
  }

  private loop(w: Walk, out: HookEnd[], pending: Walk[]): void {
    const s = w.st;
    for (;;) {
      const f = w.frames[w.frames.length - 1];
      if (f === undefined) {
        this.policy(w, out);
        return;
      }
      const c = f.chain;
      const idx = nextCandidate(c, f.pos, s.dst);
      if (idx >= c.src.length) {
        // a chain cut short: rules after the last one shown may decide
        if (c.partialTail && !this.openPartial(w, out, c)) return;
        w.frames.pop();
        if (w.frames.length === 0) {
          this.policy(w, out);
          return;
        }
        const back = w.frames[w.frames.length - 1]!.chain;
        if (!this.hit(w, c, back))
          this.stepM(
            w,
            c,
            back,
            "return",
            c,
            0,
            c.ref,
            () => `end of ${c.name}: back to ${back.name}`,
          );
        continue;
      }
      f.pos = idx + 1;
      const cr = c.rules[idx] ?? this.compileRule(c, idx);
      const v = evalPreds(cr.preds, s);
      if (v === NO) continue;
      if (v === UNDECIDED) {
        const ask = s.unknown;
        if (
          ask === undefined ||
          assumed(s, ask.key) !== undefined ||
          this.walks >= this.maxBranches
        ) {
          this.undecided(w, out, c, cr, s.reason);
          return;
        }
        // follow both outcomes of the fact; each walk then reads this rule again under it
        f.pos = idx;
        const other = this.forkWalk(w, {
          key: ask.key,
          fact: ask.fact,
          reason: s.reason,
          rule: cr.source,
          decide: ask.decide,
        });
        pending.push(other);
        continue;
      }
      if (v === BRANCH) {
        const p = s.branchP;
        if (p <= 0) continue;
        if (p < 1) {
          this.walks++;
          const other: Walk = {
            st: cloneState(s),
            frames: cloneFrames(w.frames),
            hook: w.hook,
            hookName: w.hookName,
            steps: w.steps,
            prob: w.prob * (1 - p),
          };
          const note = s.branchNote;
          if (!this.hit(other, cr, "not-taken"))
            this.stepM(
              other,
              cr,
              "not-taken",
              "branch",
              c,
              cr.index,
              cr.source,
              () => `${note}: not taken (${round(1 - p)})`,
            );
          pending.push(other);
          w.prob *= p;
          if (!this.hit(w, cr, "taken"))
            this.stepM(
              w,
              cr,
              "taken",
              "branch",
              c,
              cr.index,
              cr.source,
              () => `${note}: taken (${round(p)})`,
            );
        }
      }
      if (!this.act(w, out, c, cr)) return;
    }
  }

  private policy(w: Walk, out: HookEnd[]): void {
    const h = w.hook;
    const policy = h.policy ?? "ACCEPT";
    if (!this.hit(w, h, "policy"))
      this.stepM(w, h, "policy", "policy", h, 0, h.ref, () =>
        h.policy === undefined
          ? `end of ${h.name}: policy not in the dump; nat chains accept`
          : `end of ${h.name}: policy ${policy}`,
      );
    out.push({ w, kind: policy === "DROP" ? "drop" : "accept", ref: h.ref });
  }

  private undecided(
    w: Walk,
    out: HookEnd[],
    c: CChain,
    cr: CRule | undefined,
    reason: string,
  ): void {
    const index = cr?.index ?? 0;
    const ref = cr?.source ?? c.ref;
    this.step(w, "cannot-decide", c, index, ref, reason);
    out.push({
      w,
      kind: "undecided",
      ref,
      undecided: { chain: c.name, ruleIndex: index, rule: ref, reason },
    });
  }

  /**
   * A chain the file may not show whole: the walk goes on taking it as shown, and a branch that
   * takes the rules it does not show as deciding ends undecided. False when the walk itself ended
   * (too many branches). Once per walk and chain.
   */
  private openPartial(w: Walk, out: HookEnd[], c: CChain): boolean {
    const key = `complete:${c.name}`;
    if (assumed(w.st, key) !== undefined) return true;
    if (this.walks >= this.maxBranches) {
      out.push(this.tooMany(w));
      return false;
    }
    const file = this.dump.file;
    const other = this.forkWalk(w, {
      key,
      fact: `${file} shows every rule of ${c.name} (it is ${c.partialTail ? "cut short" : "an excerpt"})`,
      reason: c.partialTail
        ? `${file} is cut short${this.excerptWhy()}: rules of ${c.name} after the last one it shows may decide`
        : `${file} is an excerpt${this.excerptWhy()}: rules of ${c.name} it does not show may decide first`,
      rule: c.ref,
      decide: {
        file,
        command: "iptables-save -t nat   # on the node: the whole table, not an excerpt",
      },
    });
    this.undecided(other, out, c, undefined, `the rules of ${c.name} that ${file} does not show`);
    return true;
  }

  private excerptWhy(): string {
    const r = this.dump.excerpt?.reasons;
    return r && r.length > 0 ? ` (${r.join("; ")})` : "";
  }

  /** Applies a matched rule's target. Returns false when the walk has ended. */
  private act(w: Walk, out: HookEnd[], c: CChain, cr: CRule): boolean {
    const t = cr.target;
    const s = w.st;
    if (t === undefined) return true;
    const hook = w.hookName;
    const family = s.family;
    switch (t.kind) {
      case "chain":
        return this.jump(w, out, c, cr, t);
      case "verdict":
        return this.verdict(w, out, c, cr, t.name, hook);
      case "MARK": {
        const m = applyMarkOp(s.mark, s.markKnown, t.op);
        s.mark = m.value;
        s.markKnown = m.known;
        const op = t.op;
        if (!this.hit(w, cr, "mark"))
          this.stepM(
            w,
            cr,
            "mark",
            "mark",
            c,
            cr.index,
            cr.source,
            () => `MARK --set-xmark ${hex(op.value)}/${hex(op.mask)}`,
          );
        return true;
      }
      case "CONNMARK":
        connmark(s, t);
        this.step(w, "mark", c, cr.index, cr.source, `CONNMARK ${t.mode}`);
        return true;
      case "DNAT":
      case "REDIRECT":
      case "NETMAP":
      case "SNAT":
      case "MASQUERADE":
        return this.nat(w, out, c, cr, t, hook, family);
      case "extension":
        return this.extension(w, out, c, cr, t.name);
    }
  }

  /** `-j CHAIN` / `-g CHAIN`: the walk enters the chain (or forks on a chain not in the dump). */
  private jump(
    w: Walk,
    out: HookEnd[],
    c: CChain,
    cr: CRule,
    t: Extract<Target, { kind: "chain" }>,
  ): boolean {
    const s = w.st;
    const to = cr.jump;
    if (!to) {
      const key = `chain:${t.name}`;
      const taken = assumed(s, key);
      if (taken === true) {
        // taken as deciding nothing: the packet comes back as from a RETURN (a goto ends the
        // calling chain too)
        if (t.goto) w.frames.pop();
        return true;
      }
      const reason = `${t.goto ? "goto" : "jump"} to chain ${t.name}, which is not in the dump`;
      if (taken === undefined && this.walks < this.maxBranches) {
        const other = this.forkWalk(w, {
          key,
          fact: `chain ${t.name} (not in ${this.dump.file}) lets this packet through without deciding`,
          reason,
          rule: cr.source,
          decide: {
            file: this.dump.file,
            command: `iptables-save -t nat   # on the node: chain ${t.name}`,
          },
        });
        this.undecided(other, out, c, cr, reason);
        if (t.goto) w.frames.pop();
        return true;
      }
      this.undecided(w, out, c, cr, reason);
      return false;
    }
    if (w.frames.length >= MAX_DEPTH) {
      this.undecided(w, out, c, cr, `chains nested deeper than ${MAX_DEPTH}: a loop in the rules`);
      return false;
    }
    if (t.goto) w.frames.pop();
    w.frames.push({ chain: to, pos: 0 });
    // an excerpt: rules it does not show may come before, between or after those it shows
    if (to.partial && !to.partialTail && !this.openPartial(w, out, to)) return false;
    if (!this.hit(w, cr, "jump"))
      this.stepM(
        w,
        cr,
        "jump",
        t.goto ? "goto" : "jump",
        c,
        cr.index,
        cr.source,
        () => `${t.goto ? "goto" : "jump to"} ${t.name}`,
      );
    return true;
  }

  /** RETURN, ACCEPT, DROP (QUEUE: a userspace program decides). */
  private verdict(
    w: Walk,
    out: HookEnd[],
    c: CChain,
    cr: CRule,
    name: Extract<Target, { kind: "verdict" }>["name"],
    hook: Hook,
  ): boolean {
    if (name === "RETURN") {
      w.frames.pop();
      const back = w.frames[w.frames.length - 1];
      if (!this.hit(w, cr, back?.chain ?? c))
        this.stepM(w, cr, back?.chain ?? c, "return", c, cr.index, cr.source, () =>
          back ? `RETURN to ${back.chain.name}` : `RETURN from ${c.name}`,
        );
      return true; // an empty stack ends in the hook's policy
    }
    if (name === "ACCEPT") {
      if (!this.hit(w, cr, hook))
        this.stepM(
          w,
          cr,
          hook,
          "accept",
          c,
          cr.index,
          cr.source,
          () => `ACCEPT: no further nat rules in ${hook}`,
        );
      out.push({ w, kind: "accept", ref: cr.source });
      return false;
    }
    if (name === "DROP") {
      this.step(w, "drop", c, cr.index, cr.source, "DROP");
      out.push({ w, kind: "drop", ref: cr.source });
      return false;
    }
    this.undecided(w, out, c, cr, `${name}: the packet goes to a userspace program`);
    return false;
  }

  /** A target extension podpath does not interpret: logging ones continue, REJECT drops. */
  private extension(w: Walk, out: HookEnd[], c: CChain, cr: CRule, name: string): boolean {
    const s = w.st;
    if (NON_TERMINATING.has(name)) {
      if (!this.hit(w, cr, "log"))
        this.stepM(
          w,
          cr,
          "log",
          "log",
          c,
          cr.index,
          cr.source,
          () => `${name}: recorded, traversal continues`,
        );
      return true;
    }
    if (name === "HMARK") {
      s.markKnown = 0;
      this.step(w, "mark", c, cr.index, cr.source, "HMARK: mark set from a hash of the packet");
      return true;
    }
    if (name === "REJECT") {
      this.step(w, "drop", c, cr.index, cr.source, "REJECT");
      out.push({ w, kind: "drop", ref: cr.source });
      return false;
    }
    this.undecided(w, out, c, cr, `target ${name} is not modelled`);
    return false;
  }

  /**
   * REDIRECT: the destination becomes the incoming interface's primary address (loopback in
   * OUTPUT) and the port the one given. The reason it cannot be decided, else undefined.
   */
  private applyRedirect(
    s: PacketState,
    t: Extract<Target, { kind: "REDIRECT" }>,
    hook: Hook,
    family: Family,
  ): string | undefined {
    let to: bigint | undefined;
    if (hook === "OUTPUT") to = family === 4 ? 0x7f000001n : 1n;
    else {
      const iface = this.ctx.interfaces?.find((i) => i.name === s.inIface);
      to = iface?.primary?.value;
    }
    if (to === undefined) {
      return `REDIRECT goes to the primary address of the incoming interface${s.inIface ? ` ${s.inIface}` : ""}, which is not known`;
    }
    if (t.toPorts && t.toPorts.from !== t.toPorts.to) {
      return `REDIRECT to the port range ${t.toPorts.from}-${t.toPorts.to}: the kernel picks one port per connection`;
    }
    s.dst = to;
    if (t.toPorts) s.dport = t.toPorts.from;
    return undefined;
  }

  /** NETMAP: the destination's network part replaced (PREROUTING, OUTPUT), or the source's. */
  private netmap(
    w: Walk,
    c: CChain,
    cr: CRule,
    t: Extract<Target, { kind: "NETMAP" }>,
    destHook: boolean,
    family: Family,
  ): void {
    const s = w.st;
    const hostBits = t.to.end - t.to.start;
    if (destHook) {
      s.dst = (s.dst & ~hostBits) | t.to.start;
      s.dnatted = true;
      this.step(
        w,
        "netmap",
        c,
        cr.index,
        cr.source,
        `NETMAP: destination becomes ${fmt(family, s.dst)}`,
      );
    } else {
      // the text names the source's own translation
      SRC_READS.log?.add(EXACT_SRC, s.src);
      this.step(
        w,
        "netmap",
        c,
        cr.index,
        cr.source,
        `NETMAP: source becomes ${fmt(family, (s.src & ~hostBits) | t.to.start)}`,
      );
    }
  }

  private nat(
    w: Walk,
    out: HookEnd[],
    c: CChain,
    cr: CRule,
    t: Target,
    hook: Hook,
    family: Family,
  ): boolean {
    const s = w.st;
    const destHook = hook === "PREROUTING" || hook === "OUTPUT";
    if (t.kind === "DNAT" || t.kind === "REDIRECT") {
      if (!destHook) {
        this.undecided(
          w,
          out,
          c,
          cr,
          `${t.kind} in nat ${hook}: the kernel allows it only in PREROUTING and OUTPUT (iptables-restore would refuse this rule set)`,
        );
        return false;
      }
      const why =
        t.kind === "REDIRECT" ? this.applyRedirect(s, t, hook, family) : applyDnat(s, t.to);
      if (why !== undefined) {
        this.undecided(w, out, c, cr, why);
        return false;
      }
      s.dnatted = true;
      const kind = t.kind === "DNAT" ? "dnat" : "redirect";
      const dst = s.dst;
      const dport = s.dport;
      // DNAT's result is the same for every flow; REDIRECT's depends on the interface
      if (t.kind === "DNAT" && t.to?.from) {
        if (!this.hit(w, cr, "dnat"))
          this.stepM(w, cr, "dnat", kind, c, cr.index, cr.source, () =>
            dnatNote(t.kind, family, dst, dport),
          );
      } else this.step(w, kind, c, cr.index, cr.source, dnatNote(t.kind, family, dst, dport));
      out.push({ w, kind: "nat", ref: cr.source, target: t });
      return false;
    }
    if (t.kind === "NETMAP") {
      this.netmap(w, c, cr, t, destHook, family);
      out.push({ w, kind: "nat", ref: cr.source, target: t });
      return false;
    }
    if (destHook) {
      this.undecided(
        w,
        out,
        c,
        cr,
        `${t.kind} in nat ${hook}: the kernel allows it only in POSTROUTING and INPUT (iptables-restore would refuse this rule set)`,
      );
      return false;
    }
    if (!this.hit(w, cr, "snat"))
      this.stepM(
        w,
        cr,
        "snat",
        t.kind === "SNAT" ? "snat" : "masquerade",
        c,
        cr.index,
        cr.source,
        () =>
          t.kind === "SNAT"
            ? "SNAT: source rewritten"
            : "MASQUERADE: source becomes the outgoing interface's address",
      );
    out.push({ w, kind: "nat", ref: cr.source, target: t });
    return false;
  }

  private sourceOut(flow: Flow, e: HookEnd): { decision: NatDecision; out: SourceOut } {
    const t = e.target;
    const family = this.dump.family;
    if (e.kind === "accept" || !t || e.w.hookName === "PREROUTING" || e.w.hookName === "OUTPUT") {
      return { decision: "keep", out: unchangedSource(flow) };
    }
    if (t.kind === "SNAT") {
      if (!t.to?.from)
        return { decision: "snat", out: { how: "unknown", note: "SNAT without an address" } };
      const single = t.to.to === undefined || t.to.to.value === t.to.from.value;
      return {
        decision: "snat",
        out: {
          ip: t.to.from,
          ...(single || !t.to.to ? {} : { rangeEnd: t.to.to }),
          ...(t.to.ports ? { ports: t.to.ports } : {}),
          how: "to-source",
          note: single
            ? `--to-source ${formatIp(t.to.from)}`
            : `--to-source ${formatIp(t.to.from)}-${formatIp(t.to.to!)}: one of the range per connection`,
        },
      };
    }
    if (t.kind === "NETMAP") {
      const hostBits = t.to.end - t.to.start;
      SRC_READS.log?.add(EXACT_SRC, flow.src.value);
      const ip: Ip = { family, value: (flow.src.value & ~hostBits) | t.to.start };
      return { decision: "snat", out: { ip, how: "netmap", note: `NETMAP to ${formatIp(ip)}` } };
    }
    if (t.kind === "MASQUERADE") {
      const ports = t.toPorts ? { ports: t.toPorts } : {};
      const ifName = flow.outIface;
      const iface =
        ifName === undefined ? undefined : this.ctx.interfaces?.find((i) => i.name === ifName);
      if (iface?.primary) {
        return {
          decision: "masquerade",
          out: {
            ip: iface.primary,
            ...ports,
            how: "interface-primary",
            note: `primary address of ${iface.name}`,
          },
        };
      }
      const why =
        ifName === undefined
          ? "the outgoing interface is not known"
          : `the addresses of ${ifName} are not known`;
      if (this.ctx.nodeInternalIp) {
        return {
          decision: "masquerade",
          out: {
            ip: this.ctx.nodeInternalIp,
            ...ports,
            how: "node-internal-ip-fallback",
            note: `${why}; assumed the Node's InternalIP ${formatIp(this.ctx.nodeInternalIp)} (MASQUERADE takes the primary address of the outgoing interface, which is the node address on GKE)`,
          },
        };
      }
      return {
        decision: "masquerade",
        out: { ...ports, how: "unknown", note: `${why}, and the Node's InternalIP was not given` },
      };
    }
    return { decision: "keep", out: unchangedSource(flow) };
  }

  private toTrace(flow: Flow, e: HookEnd, notes: string[]): NatTrace {
    let count = 0;
    for (let n = e.w.steps; n; n = n.prev) count++;
    const steps = new Array<NatStep>(count);
    for (let n = e.w.steps; n; n = n.prev) steps[--count] = n.step;
    const s = e.w.st;
    const family = this.dump.family;
    const dstChanged = s.dst !== flow.dst.value || s.dport !== flow.dport;
    let dnatStep: NatStep | undefined;
    for (let i = 0; i < steps.length; i++) {
      const x = steps[i]!;
      if (x.kind === "dnat" || x.kind === "redirect" || (x.kind === "netmap" && s.dnatted)) {
        dnatStep = x;
        break;
      }
    }
    const dstOut: DstOut = {
      ip: { family, value: s.dst },
      ...(s.dport !== undefined ? { port: s.dport } : {}),
      how:
        !dstChanged || !dnatStep
          ? "unchanged"
          : dnatStep.kind === "netmap"
            ? "netmap"
            : dnatStep.kind === "redirect"
              ? "redirect"
              : "dnat",
    };
    // built without spreads: this runs once per branch of every flow
    let t: {
      -readonly [K in keyof NatTrace]: NatTrace[K];
    };
    if (e.kind === "undecided") {
      t = { flow, steps, decision: "cannot-decide", dstOut, undecided: e.undecided!, notes };
    } else if (e.kind === "drop") {
      t = { flow, steps, decision: "dropped", dstOut, decidingRule: e.ref, notes };
    } else {
      const { decision, out } = this.sourceOut(flow, e);
      t = {
        flow,
        steps,
        decision,
        sourceOut: out,
        dstOut,
        decidingRule: e.ref,
        notes,
        delivery: e.w.hookName === "INPUT" ? "local" : "forward",
      };
    }
    if (s.taken !== undefined) t.assumptions = s.taken.map((x) => x.assumption);
    if (s.factsUsed !== undefined) t.factsUsed = s.factsUsed;
    return t;
  }

  private combine(flow: Flow, finals: HookEnd[], traces: NatTrace[], notes: string[]): NatTrace {
    const branches = new Array<NatBranch>(traces.length);
    let forked = false;
    for (let i = 0; i < traces.length; i++) {
      const trace = traces[i]!;
      branches[i] = { probability: finals[i]!.w.prob, trace };
      if (trace.assumptions !== undefined) forked = true;
    }
    if (forked) {
      const key0 = outcomeKey(traces[0]!);
      if (key0 !== undefined && traces.every((t) => outcomeKey(t) === key0)) {
        // every outcome of the unknown facts leads to the same answer: it holds without them
        const first = traces[0]!;
        const factsUsed = [...new Set(traces.flatMap((t) => t.factsUsed ?? []))];
        const { assumptions: _a, ...rest } = first;
        return {
          ...rest,
          unknownButSettled: settledFacts(traces),
          ...(factsUsed.length > 0 ? { factsUsed } : {}),
          branches,
        };
      }
    }
    return branchesTrace(flow, traces, branches, notes);
  }
}

/**
 * What an answer is, for comparing the outcomes of unknown facts: the decision, the source and
 * destination it leaves with, where it ends, and the rule that decided (for a kept source, the
 * RETURN that skipped the translation). Undefined for an undecided trace (never the same answer).
 */
function outcomeKey(t: NatTrace): string | undefined {
  if (t.decision === "cannot-decide" || t.decision === "branches") return undefined;
  const rule = decidingRuleOf(t);
  const src = t.sourceOut;
  return [
    t.decision,
    t.delivery ?? "",
    src?.how ?? "",
    src?.ip?.value ?? "",
    src?.rangeEnd?.value ?? "",
    t.dstOut?.ip.value ?? "",
    t.dstOut?.port ?? "",
    rule ? `${rule.file}:${rule.line}` : "",
  ].join("|");
}

function dnatNote(kind: string, family: Family, dst: bigint, dport: number | undefined): string {
  return `${kind}: destination becomes ${fmt(family, dst)}${dport !== undefined ? ` port ${dport}` : ""}`;
}

function round(p: number): string {
  return String(Math.round(p * 1e6) / 1e6);
}

function hex(n: number): string {
  return `0x${(n >>> 0).toString(16)}`;
}

/**
 * The rule that decided a trace, as a person reads it: for a kept source, the last RETURN that
 * skipped the translation (not the built-in chain's policy the walk ends on); else the rule the
 * evaluator ended on.
 */
export function decidingRuleOf(t: NatTrace): SourceRef | undefined {
  if (t.decision === "keep") {
    for (let i = t.steps.length - 1; i >= 0; i--) {
      const st = t.steps[i]!;
      if (st.kind === "return" && st.ruleIndex > 0) return st.source;
    }
  }
  return t.decidingRule;
}
