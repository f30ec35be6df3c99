/**
 * @module path/evaluate-path — the packet's whole way through one node over iptables, in the
 * kernel's order: raw and mangle PREROUTING (or OUTPUT), nat PREROUTING/OUTPUT (DNAT, kube-proxy's
 * Service chains and their `statistic` branches, by the nat evaluator), the routing decision
 * (`ip rule` and every table), mangle and filter INPUT or FORWARD (or OUTPUT), mangle and nat
 * POSTROUTING. Each outcome cites every step; facts the evidence does not state fork the answer.
 */
import type { IptablesDump } from "../iptables/dump.ts";
import { cloneState } from "../iptables/forks.ts";
import { compileNat } from "../iptables/nat-eval.ts";
import {
  type AddressKnowledge,
  addressKnowledge,
  isLocalAddress,
  normalizeProto,
  type PacketState,
} from "../iptables/nat-match.ts";
import type {
  Assumption,
  CtState,
  Flow,
  NatContext,
  NatEvaluator,
  NatTrace,
} from "../iptables/nat-trace.ts";
import { OIF_READS } from "../iptables/oif-reads.ts";
import { SrcReadLog, unwatchSrcReads, watchSrcReads } from "../iptables/src-reads.ts";
import type { SourceRef } from "../model/types.ts";
import type { Ip } from "../net/cidr.ts";
import { AnswerCache } from "./answer-cache.ts";
import {
  loMasqueradeSource,
  loMasqueradeStep,
  loMasqueradeUndecided,
  settleCandidates,
} from "./lo-masquerade.ts";
import { type NatLeaf, natLeaves, natSteps } from "./nat-steps.ts";
import type {
  Hook,
  PathEvaluator,
  PathOutcome,
  PathPacket,
  PathResult,
  PathStep,
  PathVerdict,
} from "./path-types.ts";
import {
  decideRoute,
  hasLocalTable,
  type RouteAnswer,
  type RoutedPacket,
  type RoutingEvidence,
  routeByDefaultRules,
} from "./route-decision.ts";
import { unroutedVerdict } from "./route-verdict.ts";
import {
  pushAll as pushAllShared,
  push as pushShared,
  type StepList,
  toArray as toArrayShared,
} from "./step-list.ts";
import { TableWalker } from "./table-walk.ts";

// bound once: an imported function is read through a getter on every call under tsx
const push = pushShared;
const pushAll = pushAllShared;
const toArray = toArrayShared;

/** What the path evaluator knows about the node beyond its rules. */
export interface PathContext extends NatContext {
  readonly routing?: RoutingEvidence;
  /**
   * Reuse an answer for packets the rules cannot tell apart (path/answer-cache); default true.
   * False evaluates every packet afresh (the same answers, slower for many packets).
   */
  readonly reuseAnswers?: boolean;
}

/** A whole-path evaluator whose reused answers (path/answer-cache) can be dropped. */
export interface CachingPathEvaluator extends PathEvaluator {
  /** Forgets every reused answer: the next packets are evaluated afresh. */
  forgetAnswers(): void;
  /** How many answers are kept for reuse. */
  readonly keptAnswers: number;
}

/** A packet part-way through the node: its state, the steps so far, what it took for true. */
interface Partial {
  readonly st: PacketState;
  readonly steps: StepList;
  readonly assumptions: readonly Assumption[];
  readonly prob: number;
}

const FULL = 0xffffffff;

/**
 * Compiles a node's dump (every table) for whole-path questions.
 *
 * @example
 * const path = compilePath(dump, { routing: { routes, rules }, localAddresses });
 * path.evaluate({ src, dst: parseIp("10.96.0.10"), proto: "udp", dport: 53, origin: "pod" });
 */
export function compilePath(dump: IptablesDump, ctx: PathContext = {}): CachingPathEvaluator {
  // a Service's packet is asked again with the endpoint's route: only its POSTROUTING is walked
  const nat = compileNat(dump, { ...ctx, reuseFirstHook: true });
  const ifaceAddrs = (ctx.interfaces ?? []).flatMap((i) => i.addresses ?? []);
  const k = addressKnowledge(
    ctx.localAddresses,
    ifaceAddrs,
    ctx.addressFacts,
    ctx.ipsets,
    ctx.ipsetFile,
  );
  const walkers: Walkers = {
    raw: new TableWalker(dump, "raw", k),
    mangle: new TableWalker(dump, "mangle", k),
    filter: new TableWalker(dump, "filter", k),
    knowledge: k,
  };
  const cache = ctx.reuseAnswers === false ? undefined : new AnswerCache(ctx.routing?.rules);
  // one log, emptied for every packet evaluated afresh (the cache copies what it keeps of it)
  const reads = new SrcReadLog();
  const one = (p: PathPacket): PathResult => {
    const inIface = inIfaceOf(ctx, p);
    const key = cache?.keyOf(p, inIface);
    if (cache === undefined || key === undefined)
      return evaluateOne(dump, ctx, nat, walkers, p, inIface);
    const kept = cache.get(key, p);
    if (kept !== undefined) return kept;
    const log = watchSrcReads(reads);
    let r: PathResult;
    try {
      r = evaluateOne(dump, ctx, nat, walkers, p, inIface);
    } finally {
      unwatchSrcReads(log);
    }
    cache.put(key, p, r, log);
    return r;
  };
  return {
    forgetAnswers: () => cache?.clear(),
    get keptAnswers() {
      return cache?.size ?? 0;
    },
    evaluate: (packet) => {
      if (packet.ctstate === "unknown") {
        // the connection's state is not given: a new connection and an established one, both
        const ref: SourceRef = { file: dump.file, line: 0, text: "(the connection's state)" };
        const both = (["NEW", "ESTABLISHED"] as const).flatMap((cs) => {
          const r = one({ ...packet, ctstate: cs });
          const a: Assumption = {
            fact: "the packet belongs to a connection conntrack already knows",
            rule: ref,
            reason: "the connection's state was not given",
            decide: { command: "conntrack -L   # on the node" },
            holds: cs === "ESTABLISHED",
          };
          return r.outcomes.map((o) => ({ ...o, assumptions: [a, ...o.assumptions] }));
        });
        return { packet, outcomes: both, notes: [] };
      }
      return one(packet);
    },
  };
}

type Walkers = {
  readonly raw: TableWalker;
  readonly mangle: TableWalker;
  readonly filter: TableWalker;
  /** The node's addresses as the nat evaluator knows them. */
  readonly knowledge: AddressKnowledge;
};

/** A nat evaluation's outcomes, with the rule that rewrote each one's destination. */
interface NatOutcomes {
  readonly leaves: readonly NatLeaf[];
  /** Per leaf, its DNAT rule ({@link dnatRule}); made when first asked for. */
  rules?: readonly (SourceRef | undefined)[];
}

/** The first nat evaluation of a packet: the interface it was told, and its outcomes. */
interface FirstNat extends NatOutcomes {
  readonly dev: string | undefined;
  /**
   * Whether its answer turns on that interface: a rule tested `-o` (iptables/oif-reads) or an
   * outcome MASQUERADEs (the interface's address). When not, it holds for any other interface.
   */
  readonly byDev: boolean;
}

/** A nat evaluation for POSTROUTING: the interface it was told, and whether the destination is the packet's own. */
interface PostNat extends NatOutcomes {
  readonly dev: string | undefined;
  readonly unchanged: boolean;
}

function initialState(dump: IptablesDump, p: PathPacket, inIface: string | undefined): PacketState {
  const ctstate: CtState = p.ctstate === undefined || p.ctstate === "unknown" ? "NEW" : p.ctstate;
  return {
    family: dump.family,
    src: p.src.value,
    dst: p.dst.value,
    origSrc: p.src.value,
    origDst: p.dst.value,
    proto: normalizeProto(p.proto),
    sport: p.sport,
    dport: p.dport,
    inIface: p.origin === "host" ? "" : inIface,
    outIface: "",
    mark: (p.mark ?? 0) >>> 0,
    markKnown: FULL,
    ctmark: 0,
    ctmarkKnown: ctstate === "NEW" ? FULL : 0,
    ctstate,
    dnatted: false,
    reason: "",
    branchP: 1,
    branchNote: "",
    premise: undefined,
    taken: undefined,
    factsUsed: undefined,
    unknown: undefined,
  };
}

/** The interface a packet arrives on: as given, else from the routes toward its source. */
function inIfaceOf(ctx: PathContext, p: PathPacket): string | undefined {
  if (p.origin === "host") return undefined;
  const routes = ctx.routing?.routes;
  return p.inIface ?? (routes ? routeByDefaultRules(routes, p.src)?.dev : undefined);
}

function evaluateOne(
  dump: IptablesDump,
  ctx: PathContext,
  nat: NatEvaluator,
  walkers: Walkers,
  p: PathPacket,
  inIface: string | undefined,
): PathResult {
  const notes: string[] = [];
  const host = p.origin === "host";
  const outcomes: PathOutcome[] = [];
  const start: Partial = {
    st: initialState(dump, p, inIface),
    steps: undefined,
    assumptions: [],
    prob: 1,
  };
  if (host) {
    // the socket's route comes before any hook (its mark, from lo): a refusal sends nothing, and
    // its device is the `-o` every OUTPUT chain sees, whatever a mark or DNAT reroutes to later
    const r0 = decideRoute(ctx.routing ?? {}, {
      dst: p.dst,
      src: p.src,
      iif: "lo",
      mark: (p.mark ?? 0) >>> 0,
      proto: start.st.proto,
      ...(p.sport !== undefined ? { sport: p.sport } : {}),
      ...(p.dport !== undefined ? { dport: p.dport } : {}),
    });
    if (r0.kind === "refused") {
      const verdict: PathVerdict = {
        kind: "unroutable",
        how: r0.how,
        ...(r0.by ? { by: r0.by } : {}),
      };
      outcomes.push(finish(p, start.st, undefined, [], 1, verdict, "OUTPUT"));
      return { packet: p, outcomes, notes };
    }
    if (r0.kind === "route") {
      start.st.outIface = r0.route.type === "local" ? "lo" : (r0.route.dev ?? "");
    }
  }
  const first: Hook = host ? "OUTPUT" : "PREROUTING";
  // raw, then mangle, at the first hook
  let live = [start];
  for (const w of [walkers.raw, walkers.mangle]) {
    const next: Partial[] = [];
    for (const x of live) walkTable(w, first, x, outcomes, p, next);
    live = next;
  }
  for (const x of live) natThenRoute(dump, ctx, nat, walkers, p, x, inIface, outcomes, notes);
  return { packet: p, outcomes, notes };
}

/**
 * One table's walk of a partial packet: the walks that go on are added to `go`, those that end
 * to `out`.
 */
function walkTable(
  w: TableWalker,
  hook: Hook,
  x: Partial,
  out: PathOutcome[],
  p: PathPacket,
  go: Partial[],
): void {
  if (!w.present) {
    go.push(x);
    return;
  }
  // the walk takes the state over: what it took before it, counted now
  const had = x.st.taken?.length ?? 0;
  for (const e of w.walk(hook, x.st, x.steps)) {
    const steps = e.steps;
    const assumptions = newTaken(x.assumptions, had, e.st);
    const prob = x.prob * e.prob;
    const end = e.end;
    if (end.kind === "accept") {
      go.push({ st: e.st, steps, assumptions, prob });
      continue;
    }
    const verdict: PathVerdict =
      end.kind === "drop"
        ? { kind: "dropped", by: end.by, table: w.table, chain: end.chain }
        : end.kind === "reject"
          ? { kind: "rejected", with: end.with, by: end.by, table: w.table, chain: end.chain }
          : { kind: "undecided", reason: end.reason, at: end.at, unknowns: end.unknowns ?? [] };
    out.push(finish(p, e.st, steps, assumptions, prob, verdict, hook));
  }
}

/** The assumptions so far and those a walk took beyond the `had` the packet came in with. */
function newTaken(
  before: readonly Assumption[],
  had: number,
  after: PacketState,
): readonly Assumption[] {
  const taken = after.taken;
  if (taken === undefined || taken.length <= had) return before;
  return [...before, ...taken.slice(had).map((t) => t.assumption)];
}

function finish(
  p: PathPacket,
  st: PacketState,
  steps: StepList,
  assumptions: readonly Assumption[],
  prob: number,
  verdict: PathVerdict,
  hook: Hook,
): PathOutcome {
  const family = p.dst.family;
  const dstOut: Ip = { family, value: st.dst };
  const kind = p.origin === "host" ? "output" : hook === "INPUT" ? "local" : "forward";
  const list = toArray(steps);
  // two literals, not a spread: this runs for every outcome
  return st.dport !== undefined
    ? { steps: list, verdict, assumptions, probability: prob, dstOut, dportOut: st.dport, kind }
    : { steps: list, verdict, assumptions, probability: prob, dstOut, kind };
}

function natThenRoute(
  dump: IptablesDump,
  ctx: PathContext,
  nat: NatEvaluator,
  walkers: Walkers,
  p: PathPacket,
  x: Partial,
  inIface: string | undefined,
  out: PathOutcome[],
  notes: string[],
): void {
  const host = p.origin === "host";
  const markKnown = x.st.markKnown === FULL;
  const mark = markKnown ? x.st.mark : undefined;
  const baseFlow = natFlow(p, inIface, mark, x.st.ctstate, undefined);
  // the node's own traffic: the socket's route (evaluateOne) gives the interface its `-o` rules see
  const hostDev = host && x.st.outIface !== "" ? x.st.outIface : undefined;
  // a packet that comes in: the route to its original destination gives the interface the first
  // evaluation's POSTROUTING sees (only its PREROUTING part is read here; an unknown interface
  // would fork every -o rule for nothing)
  const inRoute = host
    ? undefined
    : decideRoute(ctx.routing ?? {}, {
        dst: p.dst,
        src: p.src,
        ...(inIface ? { iif: inIface } : {}),
        ...(markKnown ? { mark: x.st.mark } : {}),
      });
  const dev1 = host ? hostDev : inRoute?.kind === "route" ? inRoute.route.dev : undefined;
  OIF_READS.read = false;
  const t1 =
    x.st.ctstate === "UNTRACKED"
      ? untrackedTrace(baseFlow, dump.file)
      : nat.evaluate(dev1 ? natFlow(p, inIface, mark, x.st.ctstate, dev1) : baseFlow);
  const readOif = OIF_READS.read;
  for (const n of t1.notes) if (!notes.includes(n)) notes.push(n);
  const post: PostNat[] = [];
  const leaves1 = natLeaves(t1);
  let byDev = readOif;
  for (const l of leaves1) if (l.trace.decision === "masquerade") byDev = true;
  const first: FirstNat = { dev: dev1, leaves: leaves1, byDev };
  for (const leaf of first.leaves) {
    const st = cloneState(x.st);
    const pre = natSteps(dump, leaf.trace, st);
    const steps = pushAll(x.steps, pre.steps);
    const more = leaf.trace.assumptions;
    const assumptions =
      more === undefined || more.length === 0 ? x.assumptions : [...x.assumptions, ...more];
    const prob = x.prob * leaf.probability;
    const d = leaf.trace.dstOut;
    if (d) {
      st.dst = d.ip.value;
      st.dport = d.port;
      if (d.how !== "unchanged") st.dnatted = true;
    }
    if (leaf.trace.decision === "cannot-decide" || leaf.trace.decision === "dropped") {
      const u = leaf.trace.undecided;
      const verdict: PathVerdict =
        leaf.trace.decision === "dropped"
          ? {
              kind: "dropped",
              by: leaf.trace.decidingRule ?? { file: dump.file, line: 0 },
              table: "nat",
              chain: "",
            }
          : {
              kind: "undecided",
              reason: u?.reason ?? "the nat table cannot be evaluated",
              ...(u ? { at: u.rule } : {}),
              unknowns: [],
            };
      out.push(finish(p, st, steps, assumptions, prob, verdict, "PREROUTING"));
      continue;
    }
    routeAndFilter(
      dump,
      ctx,
      nat,
      walkers,
      p,
      baseFlow,
      leaf,
      {
        st,
        steps,
        assumptions,
        prob,
      },
      out,
      post,
      first,
    );
  }
}

/**
 * The packet as the nat evaluator is asked about it, leaving by `outIface` when given; built field
 * by field (in the order of the type, `outIface` last), not spread: this runs for every packet.
 */
function natFlow(
  p: PathPacket,
  inIface: string | undefined,
  mark: number | undefined,
  ctstate: CtState,
  outIface: string | undefined,
): Flow {
  const f: Mutable<Flow> = { src: p.src, dst: p.dst, proto: p.proto } as Flow;
  if (p.sport !== undefined) f.sport = p.sport;
  if (p.dport !== undefined) f.dport = p.dport;
  f.origin = p.origin;
  if (inIface) f.inIface = inIface;
  if (mark !== undefined) f.mark = mark;
  if (ctstate !== "NEW") f.ctstate = ctstate;
  if (outIface) f.outIface = outIface;
  return f;
}

function routeAndFilter(
  dump: IptablesDump,
  ctx: PathContext,
  nat: NatEvaluator,
  walkers: Walkers,
  p: PathPacket,
  flow: Flow,
  leaf: NatLeaf,
  x: Partial,
  out: PathOutcome[],
  post: PostNat[],
  first: FirstNat,
): void {
  const st = x.st;
  const family = p.dst.family;
  const dst: Ip = { family, value: st.dst };
  const host = p.origin === "host";
  const routing = ctx.routing ?? {};
  const q: { -readonly [K in keyof RoutedPacket]: RoutedPacket[K] } = { dst };
  // the node's own packet is rerouted with the source it already has (ip_route_me_harder), as
  // the nftables path does
  q.src = p.src;
  if (host) q.iif = "lo";
  else if (st.inIface) q.iif = st.inIface;
  if (st.markKnown === FULL) q.mark = st.mark;
  q.proto = st.proto;
  if (st.sport !== undefined) q.sport = st.sport;
  if (st.dport !== undefined) q.dport = st.dport;
  const r = decideRoute(routing, q);
  let steps = x.steps;
  let local = leaf.trace.delivery === "local";
  let dev: string | undefined;
  let via: Ip | undefined;
  if (r.kind === "route") {
    const route = r.route;
    if (hasLocalTable(routing.routes) || route.type === "local") local = route.type === "local";
    dev = route.dev;
    via = route.via;
    steps = push(steps, routeStep(r, dst));
  } else if (r.kind === "refused") {
    if (!local) {
      out.push(
        finish(p, st, steps, x.assumptions, x.prob, unroutedVerdict(r, routing)!, "FORWARD"),
      );
      return;
    }
  } else if (r.kind === "undecided") {
    out.push(
      finish(p, st, steps, x.assumptions, x.prob, unroutedVerdict(r, routing)!, "PREROUTING"),
    );
    return;
  }
  const dport = st.dport;
  if (local) {
    // delivered: mangle INPUT, filter INPUT; the node's own traffic first passes OUTPUT, mangle
    // POSTROUTING, and raw and mangle PREROUTING as it comes back in on lo
    const walks: [Hook, TableWalker][] = host
      ? [
          ["OUTPUT", walkers.filter],
          ["POSTROUTING", walkers.mangle],
          ["PREROUTING", walkers.raw],
          ["PREROUTING", walkers.mangle],
          ["INPUT", walkers.mangle],
          ["INPUT", walkers.filter],
        ]
      : [
          ["INPUT", walkers.mangle],
          ["INPUT", walkers.filter],
        ];
    // nat POSTROUTING on lo comes before INPUT: the source a MASQUERADE there gives (the first
    // address of scope global, lo-masquerade.ts) is what INPUT's rules see
    const run = (live0: Partial[], from: number, sink: PathOutcome[], masqDone: boolean): void => {
      let live = live0;
      for (let i = from; i < walks.length; i++) {
        const [h, w] = walks[i]!;
        if (
          !masqDone &&
          host &&
          h === "PREROUTING" &&
          w === walkers.raw &&
          st.ctstate !== "UNTRACKED"
        ) {
          const kept: Partial[] = [];
          for (const y of live) {
            const t = nat.evaluate({
              ...flow,
              outIface: "lo",
              dstLocal: false,
              ...(y.st.markKnown === FULL ? { mark: y.st.mark } : {}),
            });
            const leaves = natLeaves(t);
            const rewrites = leaves.some(
              (l) => l.trace.decision === "masquerade" || l.trace.decision === "snat",
            );
            if (!rewrites) {
              kept.push(y);
              continue;
            }
            const rule = t.decidingRule;
            const masq =
              rule !== undefined && leaves.every((l) => l.trace.decision === "masquerade");
            const m = masq ? loMasqueradeSource(ctx, family) : undefined;
            if (m === undefined || m.kind === "unknown" || rule === undefined) {
              const verdict: PathVerdict = m
                ? loMasqueradeUndecided(rule, "the node's addresses are not in evidence")
                : {
                    kind: "undecided",
                    reason: "nat POSTROUTING rewrites the source of the node's own packet on lo",
                    ...(rule ? { at: rule } : {}),
                    unknowns: [],
                  };
              sink.push({
                ...finish(p, y.st, y.steps, y.assumptions, y.prob, verdict, "INPUT"),
                kind: "output",
              });
              continue;
            }
            const stepsM = push(y.steps, loMasqueradeStep({ family, value: y.st.src }, m, rule));
            const per = (m.kind === "known" ? [m.ip] : m.ips).map((ip) => {
              const s2 = cloneState(y.st);
              s2.src = ip.value;
              const o: PathOutcome[] = [];
              run([{ ...y, st: s2, steps: stepsM }], i, o, true);
              return o;
            });
            const settled = settleCandidates(per);
            if (settled) sink.push(...settled);
            else
              sink.push({
                ...finish(
                  p,
                  y.st,
                  stepsM,
                  y.assumptions,
                  y.prob,
                  loMasqueradeUndecided(rule, "INPUT's rules tell its possible sources apart"),
                  "INPUT",
                ),
                kind: "output",
              });
          }
          live = kept;
        }
        const next: Partial[] = [];
        for (const y of live) {
          y.st.inIface = h === "INPUT" || h === "PREROUTING" ? (host ? "lo" : y.st.inIface) : "";
          y.st.outIface = h === "OUTPUT" ? (first.dev ?? "lo") : h === "POSTROUTING" ? "lo" : "";
          const ct = y.st.ctstate;
          const n0 = next.length;
          walkTable(w, h, y, sink, p, next);
          // conntrack already tracks the packet back on lo: raw's NOTRACK there changes nothing
          for (let j = n0; j < next.length; j++) next[j]!.st.ctstate = ct;
        }
        live = next;
      }
      for (const y of live) {
        sink.push({
          ...finish(
            p,
            y.st,
            y.steps,
            y.assumptions,
            y.prob,
            { kind: "delivered", dst, ...(dport !== undefined ? { port: dport } : {}) },
            "INPUT",
          ),
          kind: host ? "output" : "local",
        });
      }
    };
    run([{ st, steps, assumptions: x.assumptions, prob: x.prob }], 0, out, false);
    return;
  }
  // forwarded (or sent by the node): mangle and filter FORWARD/OUTPUT, mangle POSTROUTING
  const hook: Hook = host ? "OUTPUT" : "FORWARD";
  const markAtRoute = st.mark;
  let live: Partial[] = [{ st, steps, assumptions: x.assumptions, prob: x.prob }];
  // OUTPUT's chains all see the socket's route, FORWARD's the route just taken
  const outDev = host ? (first.dev ?? "") : dev;
  // the node's own packet met mangle OUTPUT before nat OUTPUT (evaluateOne): filter OUTPUT now
  if (!host) live = walkAll(walkers.mangle, hook, live, out, p, outDev, false);
  live = walkAll(walkers.filter, hook, live, out, p, outDev, host);
  {
    const next: Partial[] = [];
    for (const y of live) {
      y.st.inIface = "";
      walkTable(walkers.mangle, "POSTROUTING", y, out, p, next);
    }
    live = next;
  }
  if (live.length === 0) return;
  // nat POSTROUTING: the nat evaluator again, now with the interface the route chose (once per
  // interface and packet: a Service's endpoints share it)
  const unchanged = st.dst === p.dst.value;
  let leaves: NatOutcomes | undefined =
    st.ctstate === "UNTRACKED" ? first : postFor(post, dev, unchanged);
  if (leaves === undefined && (dev === first.dev || (!host && !first.byDev))) {
    // the same question as the first evaluation: told the same interface (or another one, when
    // no rule read it and nothing took its address), and either the destination was rewritten
    // (no word on it) or the node's addresses already say it is not the node's own (the word
    // "not local" then changes no answer)
    if (!unchanged || isLocalAddress(st.dst, dump.family, walkers.knowledge, undefined) === false)
      leaves = first;
  }
  if (leaves === undefined) {
    const asked: PostNat = {
      leaves: natLeaves(
        nat.evaluate({
          ...flow,
          ...(dev ? { outIface: dev } : {}),
          ...(unchanged ? { dstLocal: false } : {}),
        }),
      ),
      dev,
      unchanged,
    };
    post.push(asked);
    leaves = asked;
  }
  // the first evaluation's own leaf when the question is the same: its POSTROUTING answer holds
  // under the facts this walk took for true (another leaf with the same DNAT may assume others)
  const same =
    leaves === first && leaf.trace.delivery !== "local"
      ? leaf
      : sameOutcome(leaves, st, dnatRule(leaf.trace), x.assumptions);
  for (const y of live) {
    let ysteps = y.steps;
    let src: Ip | undefined;
    // a mark set since the routing decision (mangle/filter FORWARD or OUTPUT, mangle
    // POSTROUTING) is the one nat POSTROUTING's mark matches see: asked again with it
    const marked =
      y.st.mark !== markAtRoute && y.st.markKnown === FULL && st.ctstate !== "UNTRACKED"
        ? sameOutcome(
            {
              leaves: natLeaves(
                nat.evaluate({
                  ...flow,
                  mark: y.st.mark,
                  ...(dev ? { outIface: dev } : {}),
                  ...(st.dst === p.dst.value ? { dstLocal: false } : {}),
                }),
              ),
            },
            y.st,
            dnatRule(leaf.trace),
          )
        : same;
    if (marked) {
      const same = marked;
      const post = natSteps(dump, same.trace, y.st, "post");
      ysteps = pushAll(ysteps, post.steps);
      const so = same.trace.sourceOut;
      src = so?.ip;
      const decision = same.trace.decision;
      if (decision === "masquerade" || decision === "snat" || decision === "keep") {
        // built field by field, in the order of the type: this runs for every outcome
        const step: Mutable<SnatStep> = { kind: "snat", decision, from: p.src } as SnatStep;
        if (src) step.to = src;
        step.note = so?.note ?? decision;
        step.source = same.trace.decidingRule ?? { file: dump.file, line: 0 };
        ysteps = push(ysteps, step);
      }
    }
    const verdict: Mutable<ForwardedVerdict> = { kind: "forwarded" } as ForwardedVerdict;
    if (dev) verdict.dev = dev;
    if (via) verdict.via = via;
    if (src) verdict.src = src;
    verdict.dst = dst;
    if (dport !== undefined) verdict.port = dport;
    out.push(finish(p, y.st, ysteps, y.assumptions, y.prob, verdict, hook));
  }
}

/** Every partial packet through one table at `hook`, leaving by `outDev`. */
function walkAll(
  w: TableWalker,
  hook: Hook,
  live: Partial[],
  out: PathOutcome[],
  p: PathPacket,
  outDev: string | undefined,
  clearIn: boolean,
): Partial[] {
  const next: Partial[] = [];
  for (const y of live) {
    y.st.outIface = outDev;
    if (clearIn) y.st.inIface = "";
    walkTable(w, hook, y, out, p, next);
  }
  return next;
}

/** The nat outcomes already asked for this interface and destination, if any. */
function postFor(
  post: readonly PostNat[],
  dev: string | undefined,
  unchanged: boolean,
): PostNat | undefined {
  for (const o of post) if ((o.dev ?? "") === (dev ?? "") && o.unchanged === unchanged) return o;
  return undefined;
}

/** An untracked packet (raw's NOTRACK) never meets the nat table: it keeps both addresses. */
function untrackedTrace(flow: Flow, file: string): NatTrace {
  const note = "untracked (raw NOTRACK): the nat table is not consulted";
  return {
    flow,
    steps: [],
    decision: "keep",
    sourceOut: { ip: flow.src, how: "unchanged", note },
    dstOut: {
      ip: flow.dst,
      ...(flow.dport !== undefined ? { port: flow.dport } : {}),
      how: "unchanged",
    },
    decidingRule: { file, line: 0, text: "(raw NOTRACK)" },
    notes: [note],
  };
}

/**
 * The first outcome of a nat evaluation that forwards the packet to the same destination and
 * port through the same DNAT rule: the one whose POSTROUTING part is this packet's.
 */
function sameOutcome(
  o: NatOutcomes,
  st: PacketState,
  rule: SourceRef | undefined,
  taken?: readonly Assumption[],
): NatLeaf | undefined {
  let rules = o.rules;
  if (rules === undefined) {
    const made = new Array<SourceRef | undefined>(o.leaves.length);
    for (let i = 0; i < made.length; i++) made[i] = dnatRule(o.leaves[i]!.trace);
    rules = made;
    o.rules = made;
  }
  for (let i = 0; i < o.leaves.length; i++) {
    const t = o.leaves[i]!.trace;
    const d = t.dstOut;
    if (
      d?.ip.value === st.dst &&
      d.port === st.dport &&
      t.delivery !== "local" &&
      sameLine(rules[i], rule) &&
      consistent(t.assumptions, taken)
    )
      return o.leaves[i];
  }
  return undefined;
}

/** Whether a nat leaf takes no fact the other way from what the walk already took for true. */
function consistent(
  leaf: readonly Assumption[] | undefined,
  taken: readonly Assumption[] | undefined,
): boolean {
  if (!leaf || !taken || leaf.length === 0 || taken.length === 0) return true;
  for (const a of leaf)
    for (const b of taken) if (a.fact === b.fact && a.holds !== b.holds) return false;
  return true;
}

/** Whether two rules (or no rule, twice) are the same line of the same file. */
function sameLine(a: SourceRef | undefined, b: SourceRef | undefined): boolean {
  if (a === b) return true;
  return a !== undefined && b !== undefined && a.file === b.file && a.line === b.line;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type RouteStep = Extract<PathStep, { kind: "route" }>;
type SnatStep = Extract<PathStep, { kind: "snat" }>;
type ForwardedVerdict = Extract<PathVerdict, { kind: "forwarded" }>;

/** The routing decision as a step (built field by field: this runs for every outcome). */
function routeStep(r: Extract<RouteAnswer, { kind: "route" }>, dst: Ip): RouteStep {
  const route = r.route;
  const step: Mutable<RouteStep> = {
    kind: "route",
    dst,
    table: route.table,
    routeType: route.type,
  } as RouteStep;
  if (route.dev) step.dev = route.dev;
  if (route.via) step.via = route.via;
  if (route.src) step.src = route.src;
  if (r.rule) step.rule = r.rule.source;
  if (r.mainDiffers) {
    const main = r.mainDiffers.route;
    step.mainTable = {
      ...(main?.dev ? { dev: main.dev } : {}),
      ...(main?.via ? { via: main.via } : {}),
      ...(main ? { source: main.source } : {}),
    };
  }
  step.note = `${route.type === "local" ? "local" : "route"} in table ${route.table}${route.dev ? ` dev ${route.dev}` : ""}`;
  step.source = route.source;
  return step;
}

/** The rule that rewrote the destination on a nat trace, or undefined when none did. */
function dnatRule(t: NatTrace): SourceRef | undefined {
  const steps = t.steps;
  for (let i = 0; i < steps.length; i++) {
    const x = steps[i]!;
    if (x.kind === "dnat" || x.kind === "redirect") return x.source;
  }
  return undefined;
}
