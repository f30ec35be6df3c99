/**
 * @module path/table-walk — walks one hook chain of a raw, mangle or filter table the way the
 * kernel does (first match; jump, goto, RETURN, the built-in chain's policy; MARK and CONNMARK
 * change the packet; ACCEPT, DROP and REJECT end the table), following both outcomes of every fact
 * the evidence does not state and every `statistic` branch.
 */
import type { Chain, IptablesDump, Rule, Target } from "../iptables/dump.ts";
import {
  CONTINUING_TARGETS,
  cloneState as cloneStateShared,
  evalPreds as evalPredsShared,
  takeBothWays,
} from "../iptables/forks.ts";
import {
  type AddressKnowledge,
  assumed,
  compileRulePreds,
  type PacketState,
  type Pred,
} from "../iptables/nat-match.ts";
import type { UnknownFact } from "../iptables/nat-trace.ts";
import type { SourceRef } from "../model/types.ts";
import type { Hook, PathStep, RejectWith } from "./path-types.ts";
import { rejectWithOf } from "./reject-with.ts";
import { push, type StepList } from "./step-list.ts";

// bound once: an imported function is read through a getter on every call under tsx
const evalPreds = evalPredsShared;
const cloneState = cloneStateShared;
// the verdicts of nat-match, as local constants (imported bindings cost a getter under tsx)
const NO = 0;
const UNDECIDED = 2;
const BRANCH = 3;

/** Targets that only look at the packet (or its conntrack entry) and let the walk go on. */
const CONTINUING = new Set(CONTINUING_TARGETS);

const MAX_DEPTH = 128;

/** The end of every walk that accepts (ends are never changed: one object serves them all). */
const ACCEPT: TableEnd = { kind: "accept" };

/** How a walk of one table ends. */
export type TableEnd =
  | { readonly kind: "accept" }
  | { readonly kind: "drop"; readonly by: SourceRef; readonly chain: string }
  | {
      readonly kind: "reject";
      readonly with: RejectWith;
      readonly by: SourceRef;
      readonly chain: string;
    }
  | {
      readonly kind: "undecided";
      readonly reason: string;
      readonly at: SourceRef;
      /** The facts that would decide it, with the command that gets them. */
      readonly unknowns?: readonly UnknownFact[];
    };

/** One walk's end with the packet as it left the table, its steps (after those it came with) and its chance. */
export interface WalkEnd {
  readonly end: TableEnd;
  readonly st: PacketState;
  readonly steps: StepList;
  readonly prob: number;
}

/** A rule read once: its target, place and predicates, and the steps it always makes. */
interface CRule {
  readonly rule: Rule;
  readonly target: Target | undefined;
  readonly chain: string;
  readonly index: number;
  readonly source: SourceRef;
  readonly preds: readonly Pred[];
  /** The chain a jump or goto enters (null: not in the dump). */
  readonly jump: CChain | null | undefined;
  /** The step the rule makes whenever it matches (all but a REJECT's, which depends on nothing either, made on first use). */
  step: PathStep | undefined;
}

/** A chain read for walking: its rules compiled on first visit, its index built once. */
interface CChain {
  readonly chain: Chain;
  readonly rules: readonly Rule[];
  readonly compiled: (CRule | undefined)[];
  readonly index: ChainIndex | undefined;
}

interface Frame {
  readonly chain: CChain;
  pos: number;
}

interface Walk {
  st: PacketState;
  frames: Frame[];
  steps: StepList;
  prob: number;
}

/** Runs of rules that each match one exact destination (or one destination port). */
interface ChainIndex {
  readonly on: "dst" | "dport";
  /** IPv4 destinations are keyed as numbers: a Map hashes a number faster than a bigint. */
  readonly v4: boolean;
  readonly runOf: Int32Array;
  readonly runs: readonly {
    readonly end: number;
    readonly byKey: Map<bigint | number, number[]>;
  }[];
}

/** The one destination port a rule requires (`-m tcp --dport N`), else undefined. */
function exactDport(r: Rule): number | undefined {
  for (const m of r.matches) {
    if (m.kind === "ports" && m.dport && !m.dport.negated && m.dport.ranges.length === 1) {
      const x = m.dport.ranges[0]!;
      if (x.from === x.to) return x.from;
    }
  }
  return undefined;
}

/**
 * Indexes a big chain, as the nat evaluator does, on the destination (`-d A/32`) or else on the
 * destination port: within a run of such rules one that names another address or port cannot
 * match, so skipping it keeps first-match order (kube-proxy's filter KUBE-SERVICES and
 * KUBE-EXTERNAL-SERVICES hold one REJECT per Service without endpoints).
 */
function indexChain(rules: readonly Rule[], full: number): ChainIndex | undefined {
  const v4 = full === 32;
  const byDst = (r: Rule) =>
    r.dst !== undefined && !r.dst.negated && r.dst.cidr.prefix === full
      ? v4
        ? Number(r.dst.cidr.start)
        : r.dst.cidr.start
      : undefined;
  for (const [on, keyOf] of [
    ["dst", byDst],
    ["dport", exactDport],
  ] as const) {
    const n = rules.length;
    const runOf = new Int32Array(n).fill(-1);
    const runs: { end: number; byKey: Map<bigint | number, number[]> }[] = [];
    let i = 0;
    while (i < n) {
      if (keyOf(rules[i]!) === undefined) {
        i++;
        continue;
      }
      let j = i;
      const byKey = new Map<bigint | number, number[]>();
      for (
        let k = keyOf(rules[j]!);
        j < n && k !== undefined;
        k = j < n ? keyOf(rules[j]!) : undefined
      ) {
        const list = byKey.get(k);
        if (list) list.push(j);
        else byKey.set(k, [j]);
        j++;
      }
      if (j - i >= 4) {
        runOf.fill(runs.length, i, j);
        runs.push({ end: j, byKey });
      }
      i = j;
    }
    if (runs.length > 0) return { on, v4, runOf, runs };
  }
  return undefined;
}

/** The first rule at or after `pos` that could match the packet. */
function nextCandidate(ix: ChainIndex | undefined, n: number, pos: number, s: PacketState): number {
  if (ix === undefined) return pos;
  const key = ix.on === "dst" ? (ix.v4 ? Number(s.dst) : s.dst) : s.dport;
  while (pos < n) {
    const ri = ix.runOf[pos]!;
    if (ri < 0) return pos;
    const run = ix.runs[ri]!;
    const list = key === undefined ? undefined : run.byKey.get(key);
    if (list !== undefined) for (const k of list) if (k >= pos) return k;
    pos = run.end;
  }
  return n;
}

/** A table of a dump compiled for walking (chains and rules compiled on first visit). */
export class TableWalker {
  readonly table: "raw" | "mangle" | "filter";
  /** Whether the dump has this table at all (a table not in a whole dump is empty: ACCEPT). */
  readonly present: boolean;
  readonly #dump: IptablesDump;
  readonly #knowledge: AddressKnowledge;
  readonly #chains = new Map<string, CChain | null>();
  /** Per hook: its chain and the step that enters it (undefined: not in the dump). */
  readonly #hooks = new Map<Hook, { readonly chain: CChain; readonly step: PathStep } | null>();
  readonly #maxBranches: number;

  constructor(
    dump: IptablesDump,
    table: "raw" | "mangle" | "filter",
    knowledge: AddressKnowledge,
    maxBranches = 256,
  ) {
    this.#dump = dump;
    this.table = table;
    this.present = dump.tables.has(table);
    this.#knowledge = knowledge;
    this.#maxBranches = maxBranches;
  }

  /**
   * Walks `hook` for the packet `st`, after the steps `steps`. The walk takes `st` over: the
   * first end carries it (changed), each fork a copy.
   */
  walk(hook: Hook, st: PacketState, steps: StepList): WalkEnd[] {
    const h = this.#hook(hook);
    if (h === null) {
      // a whole dump without this chain: nothing there, the packet passes
      if (this.#dump.excerpt === undefined) return [{ end: ACCEPT, st, steps, prob: 1 }];
      // an excerpt that shows the table but not this chain: its rules and policy are not known
      const file = this.#dump.file;
      const at = this.#dump.tables.get(this.table)?.source ?? { file, line: 0 };
      return [
        {
          end: {
            kind: "undecided",
            reason: `${this.table} ${hook} is not in ${file} (an excerpt)`,
            at,
            unknowns: [this.#wholeTable(`what ${this.table} ${hook} does with the packet`, at)],
          },
          st,
          steps,
          prob: 1,
        },
      ];
    }
    if (
      h.chain.rules.length === 0 &&
      h.chain.chain.policy === "ACCEPT" &&
      h.chain.chain.partial !== true
    ) {
      // an empty chain that accepts (mangle's, often): its policy, without a walk
      return [{ end: ACCEPT, st, steps: push(steps, h.step), prob: 1 }];
    }
    const first: Walk = {
      st,
      frames: [{ chain: h.chain, pos: 0 }],
      steps: push(steps, h.step),
      prob: 1,
    };
    const out: WalkEnd[] = [];
    const pending: Walk[] = [first];
    let walks = 1;
    // in the order they were found: an index, not shift()
    for (let next = 0; next < pending.length; next++) {
      const w = pending[next]!;
      if (walks > this.#maxBranches) {
        out.push(
          this.#end(w, {
            kind: "undecided",
            reason: "too many branches to follow",
            at: h.step.source,
          }),
        );
        continue;
      }
      const before = pending.length;
      out.push(this.#run(w, pending));
      walks += pending.length - before;
    }
    return out;
  }

  #hook(hook: Hook): { readonly chain: CChain; readonly step: PathStep } | null {
    let h = this.#hooks.get(hook);
    if (h === undefined) {
      const table = this.#dump.tables.get(this.table);
      const chain = table?.chains.get(hook);
      if (!chain) h = null;
      else {
        const ref = chain.declared ?? table?.source ?? { file: this.#dump.file, line: 0 };
        h = {
          chain: this.#chain(chain.name)!,
          step: { kind: "hook", table: this.table, hook, source: ref },
        };
      }
      this.#hooks.set(hook, h);
    }
    return h;
  }

  #end(w: Walk, end: TableEnd): WalkEnd {
    return { end, st: w.st, steps: w.steps, prob: w.prob };
  }

  /** The chain of that name, compiled for walking; null when the table does not have it. */
  #chain(name: string): CChain | null {
    let c = this.#chains.get(name);
    if (c === undefined) {
      const chain = this.#dump.tables.get(this.table)?.chains.get(name);
      if (!chain) c = null;
      else {
        const rules = chain.rules;
        c = {
          chain,
          rules,
          compiled: new Array<CRule | undefined>(rules.length),
          index:
            rules.length >= 16 ? indexChain(rules, this.#dump.family === 4 ? 32 : 128) : undefined,
        };
      }
      this.#chains.set(name, c);
    }
    return c;
  }

  #compile(c: CChain, idx: number): CRule {
    const r = c.rules[idx]!;
    const t = r.target;
    const cr: CRule = {
      rule: r,
      target: t,
      chain: r.chain,
      index: r.index,
      source: r.source,
      preds: compileRulePreds(r, this.#dump.family, this.#knowledge),
      jump: t?.kind === "chain" ? this.#chain(t.name) : undefined,
      step: undefined,
    };
    c.compiled[idx] = cr;
    return cr;
  }

  #fork(w: Walk, fact: UnknownFact & { readonly key: unknown }): Walk {
    const other: Walk = {
      st: cloneState(w.st),
      frames: w.frames.map((f) => ({ chain: f.chain, pos: f.pos })),
      steps: w.steps,
      prob: w.prob,
    };
    takeBothWays(w.st, other.st, fact);
    w.steps = push(w.steps, { kind: "assume", fact: fact.fact, holds: true, source: fact.rule });
    other.steps = push(other.steps, {
      kind: "assume",
      fact: fact.fact,
      holds: false,
      source: fact.rule,
    });
    return other;
  }

  /** Runs one walk to its end; forks it takes go into `forks`. */
  #run(w: Walk, forks: Walk[]): WalkEnd {
    const s = w.st;
    const frames = w.frames;
    for (;;) {
      const f = frames[frames.length - 1];
      if (f === undefined) return this.#end(w, ACCEPT);
      const c = f.chain;
      const n = c.rules.length;
      // a chain the file may not show whole: a grep's missing rules may come first, a cut's last
      const chain = c.chain;
      if (chain.partial && (chain.partialTail ? f.pos >= n : f.pos === 0)) {
        const open = this.#openPartial(w, c, forks);
        if (open) return open;
      }
      const idx = nextCandidate(c.index, n, f.pos, s);
      if (idx >= n) {
        if (chain.partialTail && f.pos < n) {
          // the rules shown are done: the ones cut off come next
          f.pos = n;
          const open = this.#openPartial(w, c, forks);
          if (open) return open;
        }
        frames.pop();
        if (frames.length === 0) return this.#policy(w, c.chain);
        continue;
      }
      f.pos = idx + 1;
      const cr = c.compiled[idx] ?? this.#compile(c, idx);
      const v = evalPreds(cr.preds, s);
      if (v === NO) continue;
      if (v === UNDECIDED) {
        const ask = s.unknown;
        if (ask === undefined || assumed(s, ask.key) !== undefined) {
          return this.#end(w, { kind: "undecided", reason: s.reason, at: cr.source });
        }
        f.pos = idx;
        forks.push(
          this.#fork(w, {
            key: ask.key,
            fact: ask.fact,
            reason: s.reason,
            rule: cr.source,
            decide: ask.decide,
          }),
        );
        continue;
      }
      if (v === BRANCH) {
        const p = s.branchP;
        if (p <= 0) continue;
        if (p < 1) {
          const other: Walk = {
            st: cloneState(s),
            frames: frames.map((x) => ({ chain: x.chain, pos: x.pos })),
            steps: push(w.steps, this.#ruleStep(cr, `${s.branchNote}: not taken`)),
            prob: w.prob * (1 - p),
          };
          forks.push(other);
          w.prob *= p;
          w.steps = push(w.steps, this.#ruleStep(cr, `${s.branchNote}: taken`));
        }
      }
      const t = cr.target;
      if (t?.kind === "chain" && !cr.jump) {
        // a chain the dump does not show (a grep or a cut of iptables-save dropped it): it may
        // decide the packet, or let it through as a RETURN would; both are followed, as the nat
        // evaluator does
        const key = `chain:${this.table}:${t.name}`;
        const taken = assumed(s, key);
        if (taken === undefined) {
          const other = this.#fork(w, {
            key,
            fact: `chain ${t.name} (${this.table}, not in ${this.#dump.file}) decides this packet`,
            reason: `${t.goto ? "goto" : "jump"} to chain ${t.name}, which is not in ${this.#dump.file}`,
            rule: cr.source,
            decide: this.#showChain(t.name),
          });
          // not deciding: on after the rule (a goto leaves the calling chain as well)
          if (t.goto) other.frames[other.frames.length - 1]!.pos = n;
          forks.push(other);
        } else if (taken === false) {
          if (t.goto) f.pos = n;
          continue;
        }
      }
      const ended = this.#act(w, c, cr);
      if (ended) return ended;
    }
  }

  /** What shows a chain the dump does not: the table's dump, on the node. */
  #showChain(name: string): UnknownFact["decide"] {
    return {
      file: this.#dump.file,
      command: `iptables-save -t ${this.table}   # on the node: chain ${name}`,
    };
  }

  /** An unknown fact about this table that the whole table decides. */
  #wholeTable(fact: string, rule: SourceRef): UnknownFact {
    const file = this.#dump.file;
    return {
      fact,
      reason: `${file} does not show all of table ${this.table}`,
      rule,
      decide: {
        file,
        command: `iptables-save -t ${this.table}   # on the node: the whole table, not an excerpt`,
      },
    };
  }

  /**
   * A chain the file may not show whole, as the nat evaluator reads one: this walk goes on taking
   * the chain as shown, and a fork that takes the rules not shown as deciding ends undecided,
   * naming what decides it. Its end when this walk is that fork; once per walk and chain.
   */
  #openPartial(w: Walk, c: CChain, forks: Walk[]): WalkEnd | undefined {
    const name = c.chain.name;
    const key = `complete:${this.table}:${name}`;
    const file = this.#dump.file;
    const cut = c.chain.partialTail === true;
    const fact: UnknownFact = {
      ...this.#wholeTable(
        `${file} shows every rule of ${this.table} ${name} (it is ${cut ? "cut short" : "an excerpt"})`,
        c.chain.declared ?? this.#dump.tables.get(this.table)?.source ?? { file, line: 0 },
      ),
      reason: cut
        ? `${file} is cut short: rules of ${name} after the last one it shows may decide`
        : `${file} is an excerpt: rules of ${name} it does not show may decide first`,
    };
    const taken = assumed(w.st, key);
    if (taken === undefined) {
      forks.push(this.#fork(w, { ...fact, key }));
      return undefined;
    }
    if (taken) return undefined;
    return this.#end(w, {
      kind: "undecided",
      reason: `the rules of ${this.table} ${name} that ${file} does not show`,
      at: fact.rule,
      unknowns: [fact],
    });
  }

  #ruleStep(r: CRule, note: string): PathStep {
    return {
      kind: "rule",
      table: this.table,
      chain: r.chain,
      ruleIndex: r.index,
      note,
      source: r.source,
    };
  }

  /** The step a rule makes whenever it matches, made once (callers read `r.step` first: no closure then). */
  #fixedStep(r: CRule, make: () => PathStep): PathStep {
    let step = r.step;
    if (step === undefined) {
      step = make();
      r.step = step;
    }
    return step;
  }

  #policy(w: Walk, c: Chain): WalkEnd {
    const ref = c.declared ?? { file: this.#dump.file, line: 0 };
    const policy = c.policy;
    if (policy === "DROP") {
      w.steps = push(w.steps, {
        kind: "verdict",
        table: this.table,
        chain: c.name,
        ruleIndex: 0,
        verdict: "DROP",
        note: `${this.table} ${c.name} policy DROP`,
        source: ref,
      });
      return this.#end(w, { kind: "drop", by: ref, chain: c.name });
    }
    if (policy === undefined && this.#dump.excerpt !== undefined) {
      return this.#end(w, {
        kind: "undecided",
        reason: `the policy of ${this.table} ${c.name} is not in ${this.#dump.file}`,
        at: ref,
        unknowns: [this.#wholeTable(`the policy of ${this.table} ${c.name}`, ref)],
      });
    }
    return this.#end(w, ACCEPT);
  }

  /** Applies a matched rule's target; returns the walk's end when the target ends it. */
  #act(w: Walk, c: CChain, r: CRule): WalkEnd | undefined {
    const t = r.target;
    if (t === undefined) return undefined;
    const s = w.st;
    switch (t.kind) {
      case "verdict": {
        if (t.name === "RETURN") {
          w.steps = push(w.steps, r.step ?? this.#fixedStep(r, () => this.#ruleStep(r, "RETURN")));
          w.frames.pop();
          // a RETURN from the hook chain itself ends in its policy
          if (w.frames.length === 0) return this.#policy(w, c.chain);
          return undefined;
        }
        if (t.name === "QUEUE") {
          return this.#end(w, {
            kind: "undecided",
            reason: "QUEUE hands the packet to a user-space program",
            at: r.source,
          });
        }
        const verdict = t.name;
        w.steps = push(
          w.steps,
          r.step ??
            this.#fixedStep(r, () => ({
              kind: "verdict",
              table: this.table,
              chain: r.chain,
              ruleIndex: r.index,
              verdict,
              note: `${verdict}`,
              source: r.source,
            })),
        );
        if (verdict === "ACCEPT") return this.#end(w, ACCEPT);
        return this.#end(w, { kind: "drop", by: r.source, chain: r.chain });
      }
      case "chain": {
        const to = r.jump;
        if (!to) {
          const file = this.#dump.file;
          return this.#end(w, {
            kind: "undecided",
            reason: `${t.goto ? "goto" : "jump"} to chain ${t.name}, which is not in ${file}`,
            at: r.source,
            unknowns: [
              {
                fact: `what chain ${t.name} (${this.table}) does with the packet`,
                reason: `${file} does not show chain ${t.name}`,
                rule: r.source,
                decide: this.#showChain(t.name),
              },
            ],
          });
        }
        if (w.frames.length >= MAX_DEPTH) {
          return this.#end(w, {
            kind: "undecided",
            reason: `chains nested deeper than ${MAX_DEPTH}: a loop in the rules`,
            at: r.source,
          });
        }
        w.steps = push(
          w.steps,
          r.step ??
            this.#fixedStep(r, () => this.#ruleStep(r, `${t.goto ? "goto" : "jump"} ${t.name}`)),
        );
        if (t.goto) w.frames.pop();
        w.frames.push({ chain: to, pos: 0 });
        return undefined;
      }
      case "MARK": {
        s.mark = ((s.mark & ~t.op.mask) ^ t.op.value) >>> 0;
        s.markKnown = (s.markKnown | t.op.mask) >>> 0;
        w.steps = push(
          w.steps,
          r.step ??
            this.#fixedStep(r, () =>
              this.#ruleStep(r, `MARK --set-xmark ${hex(t.op.value)}/${hex(t.op.mask)}`),
            ),
        );
        return undefined;
      }
      case "CONNMARK": {
        if (s.ctstate === "UNTRACKED") {
          // no connection to take a mark from or give one to
        } else if (t.mode === "restore") {
          // the packet's mark takes the connection's under nfmask; a new connection's is 0
          const bits = t.nfmask & t.ctmask;
          s.mark = ((s.mark & ~bits) | (s.ctmark & bits)) >>> 0;
          s.markKnown = (s.markKnown & ~(bits & ~s.ctmarkKnown)) >>> 0;
        } else if (t.mode === "save") {
          const bits = t.nfmask & t.ctmask;
          s.ctmark = ((s.ctmark & ~bits) | (s.mark & bits)) >>> 0;
        } else {
          s.ctmark = ((s.ctmark & ~t.op.mask) ^ t.op.value) >>> 0;
        }
        w.steps = push(
          w.steps,
          r.step ?? this.#fixedStep(r, () => this.#ruleStep(r, `CONNMARK ${t.mode}`)),
        );
        return undefined;
      }
      case "extension": {
        if (t.name === "REJECT") {
          const rw = rejectWithOf(t.options, this.#dump.family, s.proto);
          w.steps = push(w.steps, {
            kind: "verdict",
            table: this.table,
            chain: r.chain,
            ruleIndex: r.index,
            verdict: "REJECT",
            rejectWith: rw,
            note: `REJECT --reject-with ${rw}`,
            source: r.source,
          });
          return this.#end(w, { kind: "reject", with: rw, by: r.source, chain: r.chain });
        }
        if (
          this.table === "raw" &&
          (t.name === "NOTRACK" ||
            (t.name === "CT" && t.options.some((o) => o.name === "--notrack")))
        ) {
          // conntrack (after raw) leaves the packet untracked: nat skips it, --ctstate UNTRACKED
          s.ctstate = "UNTRACKED";
        }
        if (CONTINUING.has(t.name)) {
          w.steps = push(w.steps, r.step ?? this.#fixedStep(r, () => this.#ruleStep(r, t.name)));
          return undefined;
        }
        return this.#end(w, {
          kind: "undecided",
          reason: `target ${t.name} is not one podpath evaluates`,
          at: r.source,
        });
      }
      default:
        return this.#end(w, {
          kind: "undecided",
          reason: `${t.name} in the ${this.table} table`,
          at: r.source,
        });
    }
  }
}

const hex = (n: number) => `0x${(n >>> 0).toString(16)}`;
