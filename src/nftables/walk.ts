/**
 * @module nftables/walk — follows a packet through the base chains of one hook as the kernel
 * does: every table's base chains of that hook and type in priority order; rules in order; jump,
 * goto, return, verdict maps; accept ends a base chain (the next one still sees the packet), drop
 * and reject end the hook; a NAT statement ends the hook's NAT. Facts the evidence does not state
 * and random numbers fork the walk; an expression podpath does not read stops it, undecided.
 */

import type { AddressKnowledge } from "../iptables/nat-match.ts";
import type { Assumption, NatStep, NatStepKind } from "../iptables/nat-trace.ts";
import type { SourceRef } from "../model/types.ts";
import { formatIp } from "../net/cidr.ts";
import {
  elementHolds,
  lookup,
  NFT_NO,
  NFT_YES,
  type NftMatch,
  type NftPacket,
  type RandomOutcome,
  readKey,
} from "./match.ts";
import type {
  NftChain,
  NftMapData,
  NftMapRef,
  NftRule,
  NftRuleset,
  NftStatement,
  NftTable,
  NftVerdict,
} from "./model.ts";
import { CT_STATE_BITS } from "./values.ts";

export type NftHook = "prerouting" | "input" | "forward" | "output" | "postrouting";

interface Frame {
  readonly table: NftTable;
  readonly chain: NftChain;
  pos: number;
}

/** One walk of the packet; forks copy it. */
export interface NftWalk {
  pkt: NftPacket;
  frames: Frame[];
  steps: NatStep[];
  probability: number;
  assumptions: Assumption[];
  /** The base chain the walk entered (after a goto from it, the bottom frame is another chain). */
  base?: NftChain;
  /** Where the last base chain accepted the packet (its accept rule or its policy). */
  acceptedAt?: SourceRef;
  /** A `notrack` statement ran: conntrack (and so nat) will not see the packet. */
  notrack?: SourceRef;
}

export type NftEndKind = "accept" | "nat" | "drop" | "reject" | "undecided";

export interface NftHookEnd {
  readonly w: NftWalk;
  readonly kind: NftEndKind;
  readonly ref: SourceRef;
  /** For "nat": the statement that translated. */
  readonly nat?: Extract<NftStatement, { kind: "dnat" | "snat" | "masquerade" | "redirect" }>;
  readonly rejectWith?: string;
  readonly reason?: string;
}

/** A base chain of a hook, with its table (for {@link NftWalker.runBases}). */
export type NftHookBase = Base;

const MAX_DEPTH = 64;
const UNTRACKED_BIT = CT_STATE_BITS["untracked"];
const MAX_WALKS = 512;

/** A base chain of a hook, with its table. */
interface Base {
  readonly table: NftTable;
  readonly chain: NftChain;
}

/** The walker over one ruleset. */
export class NftWalker {
  readonly rs: NftRuleset;
  readonly k: AddressKnowledge;
  walks = 0;
  constructor(rs: NftRuleset, k: AddressKnowledge) {
    this.rs = rs;
    this.k = k;
  }

  /** Base chains of `hook` and `type` for the packet's family, by priority (stable). */
  bases(hook: NftHook, type: string, family: 4 | 6): Base[] {
    const key = `${hook} ${type} ${family}`;
    let cached = this.baseCache.get(key);
    if (!cached) {
      cached = this.findBases(hook, type, family);
      this.baseCache.set(key, cached);
    }
    return cached;
  }

  private readonly baseCache = new Map<string, Base[]>();

  private findBases(hook: NftHook, type: string, family: 4 | 6): Base[] {
    const out: { b: Base; prio: number; i: number }[] = [];
    let i = 0;
    for (const table of this.rs.tables) {
      const fam = table.family;
      if (!(fam === "inet" || (family === 4 ? fam === "ip" : fam === "ip6"))) continue;
      for (const chain of table.chains.values()) {
        const b = chain.base;
        if (b && b.hook === hook && b.type === type)
          out.push({ b: { table, chain }, prio: b.priority, i: i++ });
      }
    }
    out.sort((x, y) => x.prio - y.prio || x.i - y.i);
    return out.map((x) => x.b);
  }

  /** Every end of the hook for this walk (several when it forks). */
  runHook(w0: NftWalk, hook: NftHook, type: string): NftHookEnd[] {
    return this.runBases(w0, hook, type, this.bases(hook, type, w0.pkt.family));
  }

  /**
   * Every end of a walk through these base chains of `hook` in turn (`type` names them in the
   * steps): what {@link runHook} does for one type, for a caller that orders chains itself.
   */
  runBases(w0: NftWalk, hook: NftHook, type: string, bases: readonly NftHookBase[]): NftHookEnd[] {
    const ends: NftHookEnd[] = [];
    // pending: walks with the index of the base chain they are in
    const pending: { w: NftWalk; b: number }[] = [{ w: w0, b: 0 }];
    while (pending.length > 0) {
      const { w, b } = pending.pop()!;
      if (b >= bases.length) {
        const last = bases.at(-1);
        ends.push({
          w,
          kind: "accept",
          ref: w.acceptedAt ?? last?.chain.source ?? { file: this.rs.file, line: 0 },
        });
        continue;
      }
      if (w.frames.length === 0) {
        const base = bases[b]!;
        w.frames.push({ table: base.table, chain: base.chain, pos: 0 });
        w.base = base.chain;
        step(
          w,
          "enter",
          base.chain,
          0,
          base.chain.source,
          `${hook} ${type} chain ${base.table.family} ${base.table.name} ${base.chain.name} (priority ${base.chain.base!.priority})`,
        );
      }
      const forks: NftWalk[] = [];
      const e = this.loop(w, forks);
      for (const f of forks) pending.push({ w: f, b });
      if (e.kind === "accept") {
        w.frames = [];
        w.acceptedAt = e.ref;
        pending.push({ w, b: b + 1 });
      } else ends.push(e);
    }
    return ends;
  }

  /** Runs the walk until its base chain ends; forked copies are added to `forks`. */
  private loop(w: NftWalk, forks: NftWalk[]): NftHookEnd {
    for (;;) {
      const f = w.frames.at(-1)!;
      if (f.pos >= f.chain.rules.length) {
        if (w.frames.length === 1) {
          const base = (w.base ?? f.chain).base!;
          step(
            w,
            "policy",
            f.chain,
            0,
            f.chain.source,
            `end of ${f.chain.name}: policy ${base.policy}`,
          );
          return { w, kind: base.policy === "drop" ? "drop" : "accept", ref: f.chain.source };
        }
        w.frames.pop();
        continue;
      }
      const rule = f.chain.rules[f.pos]!;
      const idx = f.pos + 1;
      f.pos++;
      const r = this.rule(w, f, rule, idx, forks);
      if (r === "next") continue;
      if (r === "refork") {
        f.pos--;
        continue;
      }
      return r;
    }
  }

  /** Evaluates one rule: "next" to go on, "refork" to evaluate it again (after a fork). */
  private rule(
    w: NftWalk,
    f: Frame,
    rule: NftRule,
    idx: number,
    forks: NftWalk[],
  ): NftHookEnd | "next" | "refork" {
    ruleStart.set(w.pkt, { rule, mark: w.pkt.mark });
    const site = `${rule.source.file}:${rule.source.line}`;
    for (let si = 0; si < rule.statements.length; si++) {
      const s = rule.statements[si]!;
      const at = `${site}#${si}`;
      switch (s.kind) {
        case "match": {
          const m = this.match(w, s, at);
          const d = this.decide(w, m, f, rule, idx, forks);
          if (d !== "yes") return d === "no" ? "next" : d;
          break;
        }
        case "vmap": {
          const data = this.mapLookup(w, s.key, s.map, f.table, at);
          const d = this.decideData(w, data, f, rule, idx, forks);
          if (typeof d === "string") return d === "no" ? "next" : d;
          if (d.kind !== "verdict")
            return this.undecided(
              w,
              f.chain,
              idx,
              rule,
              "a verdict map gave a value, not a verdict",
            );
          return this.verdict(w, f, rule, idx, d.verdict);
        }
        case "verdict":
          return this.verdict(w, f, rule, idx, s.verdict);
        case "reject":
          step(w, "drop", f.chain, idx, rule.source, `reject${s.with ? ` with ${s.with}` : ""}`);
          return { w, kind: "reject", ref: rule.source, ...(s.with ? { rejectWith: s.with } : {}) };
        case "ct-mark-save": {
          const p = w.pkt;
          p.ctmark = p.markKnown === 0xffffffff ? p.mark : undefined;
          step(w, "mark", f.chain, idx, rule.source, "ct mark set meta mark");
          break;
        }
        case "mark-set": {
          const p = w.pkt;
          const v = Number(s.value) >>> 0;
          // an untracked packet has no connection: `ct mark` breaks the rule there (nft_ct_get)
          if (s.fromCtMark && p.ctState === UNTRACKED_BIT) return "next";
          if (s.fromCtMark) {
            // the connection's mark: known for a connection this packet opens (0 unless saved)
            p.mark = p.ctmark ?? 0;
            p.markKnown = p.ctmark === undefined ? 0 : 0xffffffff;
          } else if (s.op === "set") {
            p.mark = v;
            p.markKnown = 0xffffffff;
          } else if (s.op === "or") {
            p.mark = (p.mark | v) >>> 0;
            p.markKnown = (p.markKnown | v) >>> 0;
          } else if (s.op === "xor") {
            p.mark = (p.mark ^ v) >>> 0;
          } else {
            p.mark = (p.mark & v) >>> 0;
            p.markKnown = (p.markKnown | ~v) >>> 0;
          }
          if (s.second) applyMarkOp(p, s.second.op, Number(s.second.value) >>> 0);
          step(
            w,
            "mark",
            f.chain,
            idx,
            rule.source,
            s.fromCtMark
              ? `mark set ct mark: now ${p.markKnown === 0 ? "unknown" : `0x${p.mark.toString(16)}`}`
              : `mark ${s.op} 0x${v.toString(16)}${s.second ? ` ${s.second.op} 0x${s.second.value.toString(16)}` : ""}: now 0x${p.mark.toString(16)}`,
          );
          break;
        }
        case "dnat":
        case "snat":
        case "masquerade":
        case "redirect":
          return this.nat(w, f, rule, idx, s, at, forks);
        case "notrack":
          w.notrack = rule.source;
          break;
        case "counter":
        case "log":
        case "comment":
        case "set-update":
          break;
        case "unknown":
          return this.undecided(
            w,
            f.chain,
            idx,
            rule,
            `"${s.text}" is not an expression podpath evaluates`,
          );
      }
    }
    return "next";
  }

  private match(w: NftWalk, s: Extract<NftStatement, { kind: "match" }>, at: string): NftMatch {
    const sel = s.key.selectors;
    // iptables-nft's statistic: meta random & M < V
    if (sel.length === 1 && sel[0]!.key === "random") {
      const key = `random@${at}`;
      const t = w.pkt.taken.get(key);
      const v = s.right.kind === "anonymous" ? s.right.elements[0]?.[0] : undefined;
      if (s.op !== "<" || v?.kind !== "range" || sel[0]!.modulus === undefined) {
        return { v: "undecided", reason: "this form of meta random is not modelled" };
      }
      if (typeof t === "number") return t < Number(v.lo) ? NFT_YES : NFT_NO;
      const pYes = Number(v.lo) / sel[0]!.modulus;
      return {
        v: "random",
        key,
        outcomes: [
          {
            value: 0,
            probability: pYes,
            note: `meta random < ${v.lo} (probability ${round(pYes)})`,
          },
          {
            value: Number(v.lo),
            probability: 1 - pYes,
            note: `meta random ≥ ${v.lo} (probability ${round(1 - pYes)})`,
          },
        ],
      };
    }
    // an unknown fact already taken one way for this statement on this walk
    const stmtKey = `stmt@${at}`;
    const taken = w.pkt.taken.get(stmtKey);
    if (typeof taken === "boolean") return taken ? NFT_YES : NFT_NO;
    const r = readKey(s.key, w.pkt, this.k, at);
    if ("v" in r) {
      // the statement as a whole is the fact (a device name, mark bits); an address's locality
      // is one fact for every statement that asks it
      if (r.v === "unknown" && !r.key.startsWith("local:")) return { ...r, key: stmtKey };
      return r;
    }
    const flagKeys = sel.map((x) => x.key);
    let holds: boolean;
    if (s.right.kind === "named") {
      const set = this.findSet(w, s.right.name);
      if (!set) return { v: "undecided", reason: `the set @${s.right.name} is not in the listing` };
      holds = lookup(set, r.values) >= 0;
    } else {
      const els = s.right.elements;
      if (s.op === "==" || s.op === "!=") {
        holds = els.some((e) => elementHolds(e, r.values, flagKeys));
      } else {
        const v = r.values[0];
        const a = els[0]?.[0];
        if (typeof v !== "bigint" || a?.kind !== "range")
          return { v: "undecided", reason: "a comparison podpath does not read" };
        holds =
          s.op === "<" ? v < a.lo : s.op === ">" ? v > a.lo : s.op === "<=" ? v <= a.lo : v >= a.lo;
        return holds ? NFT_YES : NFT_NO;
      }
    }
    return holds !== (s.op === "!=") ? NFT_YES : NFT_NO;
  }

  private findSet(w: NftWalk, name: string) {
    return w.frames.at(-1)?.table.sets.get(name);
  }

  private mapLookup(
    w: NftWalk,
    key: import("./model.ts").NftKey,
    map: NftMapRef,
    table: NftTable,
    at: string,
  ): NftMapData | NftMatch {
    const r = readKey(key, w.pkt, this.k, at);
    if ("v" in r) {
      if (r.v === "unknown" && !r.key.startsWith("local:")) {
        return { v: "undecided", reason: `a map lookup turns on an unknown fact: ${r.fact}` };
      }
      return r;
    }
    if (map.kind === "named") {
      const set = table.sets.get(map.name);
      if (!set?.data)
        return { v: "undecided", reason: `the map @${map.name} is not in the listing` };
      const i = lookup(set, r.values);
      if (i < 0) return NFT_NO;
      // a damaged listing can leave an element without its value (`KEY .: goto x`)
      return (
        set.data[i] ?? {
          v: "undecided",
          reason: `the matching element of @${map.name} has no value in the listing`,
        }
      );
    }
    const flagKeys = key.selectors.map((x) => x.key);
    for (const e of map.entries) if (elementHolds(e.key, r.values, flagKeys)) return e.data;
    return NFT_NO;
  }

  /** Turns a match result into yes/no, forking the walk for unknown facts and random numbers. */
  private decide(
    w: NftWalk,
    m: NftMatch,
    f: Frame,
    rule: NftRule,
    idx: number,
    forks: NftWalk[],
  ): "yes" | "no" | "refork" | NftHookEnd {
    if (m.v === "undecided") return this.undecided(w, f.chain, idx, rule, m.reason);
    if (m.v === "unknown" || m.v === "random") return this.fork(w, m, f, rule, idx, forks);
    return m.v;
  }

  private decideData(
    w: NftWalk,
    d: NftMapData | NftMatch,
    f: Frame,
    rule: NftRule,
    idx: number,
    forks: NftWalk[],
  ): NftMapData | "no" | "refork" | NftHookEnd {
    if (!("v" in d)) return d;
    const r = this.decide(w, d, f, rule, idx, forks);
    return r === "yes"
      ? this.undecided(w, f.chain, idx, rule, "internal: a lookup answered yes")
      : r;
  }

  private fork(
    w: NftWalk,
    m: Extract<NftMatch, { v: "unknown" | "random" }>,
    f: Frame,
    rule: NftRule,
    idx: number,
    forks: NftWalk[],
  ): "refork" | NftHookEnd {
    const outcomes: { value: boolean | number; probability: number; note: string }[] =
      m.v === "random"
        ? m.outcomes.map((o: RandomOutcome) => ({ ...o }))
        : [
            { value: true, probability: 1, note: `assumed: ${m.fact}` },
            { value: false, probability: 1, note: `assumed not: ${m.fact}` },
          ];
    if (this.walks + outcomes.length - 1 > MAX_WALKS) {
      return this.undecided(
        w,
        f.chain,
        idx,
        rule,
        `more than ${MAX_WALKS} branches: too many to follow`,
      );
    }
    this.walks += outcomes.length - 1;
    const mark0 = markAtRuleStart(w, rule);
    const copies = outcomes.slice(1).map(() => cloneWalk(w));
    const all = [w, ...copies];
    outcomes.forEach((o, i) => {
      const x = all[i]!;
      x.pkt.taken.set(m.key, o.value);
      x.probability *= o.probability;
      step(x, "branch", f.chain, idx, rule.source, o.note);
      if (m.v === "unknown") {
        x.assumptions.push({
          fact: m.fact,
          rule: rule.source,
          reason: `${f.chain.name} rule ${idx} turns on it`,
          decide: { command: m.command },
          holds: o.value === true,
        });
      }
    });
    // every walk evaluates the rule again from its start, with the value taken
    for (const x of all) x.pkt.mark = mark0;
    for (const c of copies) {
      c.frames.at(-1)!.pos--;
      forks.push(c);
    }
    return "refork";
  }

  private verdict(
    w: NftWalk,
    f: Frame,
    rule: NftRule,
    idx: number,
    v: NftVerdict,
  ): NftHookEnd | "next" {
    switch (v.kind) {
      case "accept":
        step(w, "accept", f.chain, idx, rule.source, "accept: this base chain ends");
        return { w, kind: "accept", ref: rule.source };
      case "drop":
        step(w, "drop", f.chain, idx, rule.source, "drop");
        return { w, kind: "drop", ref: rule.source };
      case "continue":
        return "next";
      case "queue":
        return this.undecided(
          w,
          f.chain,
          idx,
          rule,
          "queue hands the packet to a user-space program",
        );
      case "return": {
        step(w, "return", f.chain, idx, rule.source, `return from ${f.chain.name}`);
        if (w.frames.length === 1) {
          const base = (w.base ?? f.chain).base!;
          return { w, kind: base.policy === "drop" ? "drop" : "accept", ref: rule.source };
        }
        w.frames.pop();
        return "next";
      }
      case "jump":
      case "goto": {
        const target = f.table.chains.get(v.chain);
        if (!target)
          return this.undecided(w, f.chain, idx, rule, `chain ${v.chain} is not in the listing`);
        if (w.frames.length >= MAX_DEPTH)
          return this.undecided(w, f.chain, idx, rule, "jumps nest too deep (a loop?)");
        step(w, v.kind, f.chain, idx, rule.source, `${v.kind} ${v.chain}`);
        if (v.kind === "goto") w.frames.pop();
        w.frames.push({ table: f.table, chain: target, pos: 0 });
        return "next";
      }
    }
  }

  private nat(
    w: NftWalk,
    f: Frame,
    rule: NftRule,
    idx: number,
    s: Extract<NftStatement, { kind: "dnat" | "snat" | "masquerade" | "redirect" }>,
    at: string,
    forks: NftWalk[],
  ): NftHookEnd | "next" | "refork" {
    if (f.chain.base === undefined && !this.natChainReached(w)) {
      return this.undecided(w, f.chain, idx, rule, `${s.kind} outside a nat chain`);
    }
    const p = w.pkt;
    if (s.kind === "dnat" || s.kind === "redirect") {
      if (s.kind === "redirect")
        return this.undecided(
          w,
          f.chain,
          idx,
          rule,
          "redirect (to the incoming interface's address) is not modelled",
        );
      let addr: bigint | undefined;
      let port: number | undefined;
      if (s.to?.kind === "fixed") {
        if (s.to.addr?.kind === "range") addr = s.to.addr.lo;
        if (s.to.port?.kind === "range") port = Number(s.to.port.lo);
      } else if (s.to?.kind === "map") {
        const d = this.decideData(
          w,
          this.mapLookup(w, s.to.key, s.to.map, f.table, at),
          f,
          rule,
          idx,
          forks,
        );
        if (d === "no") return "next";
        if (d === "refork" || "w" in d) return d;
        if (d.kind !== "value")
          return this.undecided(w, f.chain, idx, rule, "a NAT map gave a verdict");
        const v = d.value;
        if (v[0]?.kind === "range") addr = v[0].lo;
        if (v[1]?.kind === "range") port = Number(v[1].lo);
      }
      if (addr === undefined && port === undefined)
        return this.undecided(w, f.chain, idx, rule, "dnat without an address podpath reads");
      if (addr !== undefined) p.dst = addr;
      if (port !== undefined) p.dport = port;
      p.dnatted = true;
      step(
        w,
        "dnat",
        f.chain,
        idx,
        rule.source,
        `dnat: destination becomes ${formatIp({ family: p.family, value: p.dst })}${p.dport !== undefined ? ` port ${p.dport}` : ""}`,
      );
      return { w, kind: "nat", ref: rule.source, nat: s };
    }
    step(w, s.kind === "masquerade" ? "masquerade" : "snat", f.chain, idx, rule.source, s.kind);
    return { w, kind: "nat", ref: rule.source, nat: s };
  }

  private natChainReached(w: NftWalk): boolean {
    // the base chain entered, not the bottom frame: a goto from the base chain replaces that
    return (w.base ?? w.frames[0]?.chain)?.base?.type === "nat";
  }

  private undecided(
    w: NftWalk,
    chain: NftChain,
    idx: number,
    rule: NftRule,
    reason: string,
  ): NftHookEnd {
    step(w, "cannot-decide", chain, idx, rule.source, reason);
    return { w, kind: "undecided", ref: rule.source, reason };
  }
}

function applyMarkOp(p: NftPacket, op: "or" | "xor" | "and", v: number): void {
  if (op === "or") {
    p.mark = (p.mark | v) >>> 0;
    p.markKnown = (p.markKnown | v) >>> 0;
  } else if (op === "xor") {
    p.mark = (p.mark ^ v) >>> 0;
  } else {
    p.mark = (p.mark & v) >>> 0;
    p.markKnown = (p.markKnown | ~v) >>> 0;
  }
}

/** The packet's mark when the rule being evaluated began (a rule evaluated again starts there). */
const ruleStart = new WeakMap<NftPacket, { rule: NftRule; mark: number }>();
function markAtRuleStart(w: NftWalk, rule: NftRule): number {
  const s = ruleStart.get(w.pkt);
  return s && s.rule === rule ? s.mark : w.pkt.mark;
}

function step(
  w: NftWalk,
  kind: NatStepKind,
  chain: NftChain,
  ruleIndex: number,
  source: SourceRef,
  note: string,
): void {
  w.steps.push({ kind, chain: chain.name, ruleIndex, source, note });
}

export function cloneWalk(w: NftWalk): NftWalk {
  return {
    pkt: {
      ...w.pkt,
      taken: new Map(w.pkt.taken),
      ...(w.pkt.factsUsed ? { factsUsed: [...w.pkt.factsUsed] } : {}),
    },
    frames: w.frames.map((f) => ({ ...f })),
    steps: [...w.steps],
    probability: w.probability,
    assumptions: [...w.assumptions],
    ...(w.base ? { base: w.base } : {}),
    ...(w.acceptedAt ? { acceptedAt: w.acceptedAt } : {}),
    ...(w.notrack ? { notrack: w.notrack } : {}),
  };
}

function round(p: number): string {
  return String(Math.round(p * 1e6) / 1e6);
}
