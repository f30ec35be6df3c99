/**
 * @module path/table-walk — walks one hook chain of a raw, mangle or filter table the way the
 * kernel does (first match; jump, goto, RETURN, the built-in chain's policy; MARK and CONNMARK
 * change the packet; ACCEPT, DROP and REJECT end the table), following both outcomes of every fact
 * the evidence does not state and every `statistic` branch.
 */
import type { Chain, IptablesDump, Rule, Target } from "../iptables/dump.ts";
import {
  type AddressKnowledge,
  assumed,
  BRANCH,
  compileRulePreds,
  NO,
  type PacketState,
  type Pred,
  type Taken,
  UNDECIDED,
} from "../iptables/nat-match.ts";
import type { UnknownFact } from "../iptables/nat-trace.ts";
import type { SourceRef } from "../model/types.ts";
import type { Hook, PathStep, RejectWith } from "./path-types.ts";
import { rejectWithOf } from "./reject-with.ts";

/** Targets that only look at the packet (or its conntrack entry) and let the walk go on. */
const CONTINUING = new Set([
  "LOG",
  "NFLOG",
  "ULOG",
  "TRACE",
  "AUDIT",
  "CLASSIFY",
  "DSCP",
  "TOS",
  "TTL",
  "HL",
  "TCPMSS",
  "CHECKSUM",
  "SET",
  "IDLETIMER",
  "LED",
  "SECMARK",
  "CONNSECMARK",
  "RATEEST",
  "NOTRACK",
  "CT",
]);

const MAX_DEPTH = 128;

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
  | { readonly kind: "undecided"; readonly reason: string; readonly at: SourceRef };

/** One walk's end with the packet as it left the table, its steps and its chance. */
export interface WalkEnd {
  readonly end: TableEnd;
  readonly st: PacketState;
  readonly steps: PathStep[];
  readonly prob: number;
}

interface CRule {
  readonly rule: Rule;
  readonly preds: readonly Pred[];
}

interface Frame {
  readonly chain: Chain;
  pos: number;
}

interface Walk {
  st: PacketState;
  frames: Frame[];
  steps: PathStep[];
  prob: number;
}

/** Runs of rules that each match one exact destination (or one destination port). */
interface ChainIndex {
  readonly on: "dst" | "dport";
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
  const byDst = (r: Rule) =>
    r.dst !== undefined && !r.dst.negated && r.dst.cidr.prefix === full
      ? r.dst.cidr.start
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
    if (runs.length > 0) return { on, runOf, runs };
  }
  return undefined;
}

/** The first rule at or after `pos` that could match the packet. */
function nextCandidate(ix: ChainIndex | undefined, n: number, pos: number, s: PacketState): number {
  if (ix === undefined) return pos;
  const key = ix.on === "dst" ? s.dst : s.dport;
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

/** A table of a dump compiled for walking (rules compiled on first visit). */
export class TableWalker {
  readonly table: "raw" | "mangle" | "filter";
  readonly #dump: IptablesDump;
  readonly #knowledge: AddressKnowledge;
  readonly #compiled = new Map<Rule, CRule>();
  readonly #indexes = new Map<Chain, ChainIndex | null>();
  readonly #maxBranches: number;

  constructor(
    dump: IptablesDump,
    table: "raw" | "mangle" | "filter",
    knowledge: AddressKnowledge,
    maxBranches = 256,
  ) {
    this.#dump = dump;
    this.table = table;
    this.#knowledge = knowledge;
    this.#maxBranches = maxBranches;
  }

  /** Whether the dump has this table at all (a table not in a whole dump is empty: ACCEPT). */
  get present(): boolean {
    return this.#dump.tables.has(this.table);
  }

  /** Walks `hook` for the packet `st` (not changed: each end carries its own copy). */
  walk(hook: Hook, st: PacketState): WalkEnd[] {
    const table = this.#dump.tables.get(this.table);
    const chain = table?.chains.get(hook);
    if (!chain) {
      // a whole dump without this chain: nothing there, the packet passes
      return [{ end: { kind: "accept" }, st: cloneState(st), steps: [], prob: 1 }];
    }
    const ref = chain.declared ?? table?.source ?? { file: this.#dump.file, line: 0 };
    const first: Walk = {
      st: cloneState(st),
      frames: [{ chain, pos: 0 }],
      steps: [{ kind: "hook", table: this.table, hook, source: ref }],
      prob: 1,
    };
    const out: WalkEnd[] = [];
    const pending: Walk[] = [first];
    let walks = 1;
    while (pending.length > 0) {
      const w = pending.shift()!;
      if (walks > this.#maxBranches) {
        out.push(
          this.#end(w, { kind: "undecided", reason: "too many branches to follow", at: ref }),
        );
        continue;
      }
      const forks: Walk[] = [];
      out.push(this.#run(w, forks));
      walks += forks.length;
      pending.push(...forks);
    }
    return out;
  }

  #end(w: Walk, end: TableEnd): WalkEnd {
    return { end, st: w.st, steps: w.steps, prob: w.prob };
  }

  #index(c: Chain): ChainIndex | undefined {
    let ix = this.#indexes.get(c);
    if (ix === undefined) {
      ix =
        c.rules.length >= 16
          ? (indexChain(c.rules, this.#dump.family === 4 ? 32 : 128) ?? null)
          : null;
      this.#indexes.set(c, ix);
    }
    return ix ?? undefined;
  }

  #compile(r: Rule): CRule {
    let c = this.#compiled.get(r);
    if (!c) {
      c = { rule: r, preds: compileRulePreds(r, this.#dump.family, this.#knowledge) };
      this.#compiled.set(r, c);
    }
    return c;
  }

  #fork(w: Walk, fact: UnknownFact & { readonly key: unknown }): Walk {
    const other: Walk = {
      st: cloneState(w.st),
      frames: w.frames.map((f) => ({ chain: f.chain, pos: f.pos })),
      steps: [...w.steps],
      prob: w.prob,
    };
    const base: UnknownFact = {
      fact: fact.fact,
      rule: fact.rule,
      reason: fact.reason,
      decide: fact.decide,
    };
    const take = (x: Walk, holds: boolean) => {
      const t: Taken = { key: fact.key, assumption: { ...base, holds } };
      x.st.taken = x.st.taken === undefined ? [t] : [...x.st.taken, t];
      x.steps.push({ kind: "assume", fact: fact.fact, holds, source: fact.rule });
    };
    take(w, true);
    take(other, false);
    return other;
  }

  /** Runs one walk to its end; forks it takes go into `forks`. */
  #run(w: Walk, forks: Walk[]): WalkEnd {
    const s = w.st;
    for (;;) {
      const f = w.frames[w.frames.length - 1];
      if (f === undefined) return this.#end(w, { kind: "accept" });
      const c = f.chain;
      const rules = c.rules;
      f.pos = nextCandidate(this.#index(c), rules.length, f.pos, s);
      if (f.pos >= rules.length) {
        w.frames.pop();
        if (w.frames.length === 0) return this.#policy(w, c);
        continue;
      }
      const idx = f.pos;
      f.pos = idx + 1;
      const cr = this.#compile(rules[idx]!);
      const v = evalPreds(cr.preds, s);
      if (v === NO) continue;
      if (v === UNDECIDED) {
        const ask = s.unknown;
        if (ask === undefined || assumed(s, ask.key) !== undefined) {
          return this.#end(w, { kind: "undecided", reason: s.reason, at: cr.rule.source });
        }
        f.pos = idx;
        forks.push(
          this.#fork(w, {
            key: ask.key,
            fact: ask.fact,
            reason: s.reason,
            rule: cr.rule.source,
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
            frames: w.frames.map((x) => ({ chain: x.chain, pos: x.pos })),
            steps: [...w.steps],
            prob: w.prob * (1 - p),
          };
          other.steps.push(this.#ruleStep(cr.rule, `${s.branchNote}: not taken`));
          forks.push(other);
          w.prob *= p;
          w.steps.push(this.#ruleStep(cr.rule, `${s.branchNote}: taken`));
        }
      }
      const ended = this.#act(w, cr.rule);
      if (ended) return ended;
    }
  }

  #ruleStep(r: Rule, note: string): PathStep {
    return {
      kind: "rule",
      table: this.table,
      chain: r.chain,
      ruleIndex: r.index,
      note,
      source: r.source,
    };
  }

  #policy(w: Walk, c: Chain): WalkEnd {
    const ref = c.declared ?? { file: this.#dump.file, line: 0 };
    const policy = c.policy;
    if (policy === "DROP") {
      w.steps.push({
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
      });
    }
    return this.#end(w, { kind: "accept" });
  }

  /** Applies a matched rule's target; returns the walk's end when the target ends it. */
  #act(w: Walk, r: Rule): WalkEnd | undefined {
    const t: Target | undefined = r.target;
    if (t === undefined) return undefined;
    const s = w.st;
    switch (t.kind) {
      case "verdict": {
        if (t.name === "RETURN") {
          w.steps.push(this.#ruleStep(r, "RETURN"));
          w.frames.pop();
          if (w.frames.length === 0) {
            const table = this.#dump.tables.get(this.table);
            return this.#policy(w, table?.chains.get(r.chain) ?? { ...emptyChain, name: r.chain });
          }
          return undefined;
        }
        if (t.name === "QUEUE") {
          return this.#end(w, {
            kind: "undecided",
            reason: "QUEUE hands the packet to a user-space program",
            at: r.source,
          });
        }
        w.steps.push({
          kind: "verdict",
          table: this.table,
          chain: r.chain,
          ruleIndex: r.index,
          verdict: t.name,
          note: `${t.name}`,
          source: r.source,
        });
        if (t.name === "ACCEPT") return this.#end(w, { kind: "accept" });
        return this.#end(w, { kind: "drop", by: r.source, chain: r.chain });
      }
      case "chain": {
        const to = this.#dump.tables.get(this.table)?.chains.get(t.name);
        if (!to) {
          return this.#end(w, {
            kind: "undecided",
            reason: `${t.goto ? "goto" : "jump"} to chain ${t.name}, which is not in ${this.#dump.file}`,
            at: r.source,
          });
        }
        if (w.frames.length >= MAX_DEPTH) {
          return this.#end(w, {
            kind: "undecided",
            reason: `chains nested deeper than ${MAX_DEPTH}: a loop in the rules`,
            at: r.source,
          });
        }
        w.steps.push(this.#ruleStep(r, `${t.goto ? "goto" : "jump"} ${t.name}`));
        if (t.goto) w.frames.pop();
        w.frames.push({ chain: to, pos: 0 });
        return undefined;
      }
      case "MARK": {
        s.mark = ((s.mark & ~t.op.mask) ^ t.op.value) >>> 0;
        s.markKnown = (s.markKnown | t.op.mask) >>> 0;
        w.steps.push(this.#ruleStep(r, `MARK --set-xmark ${hex(t.op.value)}/${hex(t.op.mask)}`));
        return undefined;
      }
      case "CONNMARK": {
        if (t.mode === "restore") {
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
        w.steps.push(this.#ruleStep(r, `CONNMARK ${t.mode}`));
        return undefined;
      }
      case "extension": {
        if (t.name === "REJECT") {
          const rw = rejectWithOf(t.options, this.#dump.family, s.proto);
          w.steps.push({
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
          w.steps.push(this.#ruleStep(r, t.name));
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

const emptyChain: Chain = { name: "", builtin: true, rules: [] };

const hex = (n: number) => `0x${(n >>> 0).toString(16)}`;

/** Three-valued AND of a rule's predicates (as the nat evaluator reads them). */
function evalPreds(preds: readonly Pred[], s: PacketState): number {
  let undecided = false;
  let branch = false;
  let reason = "";
  let ask: PacketState["unknown"];
  let p = 1;
  let note = "";
  for (const pred of preds) {
    const v = pred(s);
    if (v === NO) return NO;
    if (v === UNDECIDED && !undecided) {
      undecided = true;
      reason = s.reason;
      ask = s.unknown;
    } else if (v === BRANCH) {
      branch = true;
      p *= s.branchP;
      note = note ? `${note}; ${s.branchNote}` : s.branchNote;
    }
  }
  if (undecided) {
    s.reason = reason;
    s.unknown = ask;
    return UNDECIDED;
  }
  if (branch) {
    s.branchP = p;
    s.branchNote = note;
    return BRANCH;
  }
  return 1;
}

/** A copy of the packet state a walk can change without touching the original. */
export function cloneState(s: PacketState): PacketState {
  return { ...s, unknown: undefined };
}
