/**
 * @module path/nft-path — the packet's whole way through a node whose rules are nftables (`nft
 * list ruleset`: kube-proxy's nftables mode, iptables-nft's tables): at each hook every base chain
 * of families ip/inet in priority order, whatever its type; the routing decision between
 * prerouting and input/forward; answered in the same steps and outcomes as path/evaluate-path.
 */
import { addressKnowledge, isLocalAddress } from "../iptables/nat-match.ts";
import type { Assumption, CtState } from "../iptables/nat-trace.ts";
import type { SourceRef } from "../model/types.ts";
import type { Ip } from "../net/cidr.ts";
import { protoNumber } from "../nftables/match.ts";
import type { NftRuleset } from "../nftables/model.ts";
import { CT_STATE_BITS } from "../nftables/values.ts";
import {
  cloneWalk,
  type NftHook,
  type NftHookBase,
  type NftHookEnd,
  type NftWalk,
  NftWalker,
} from "../nftables/walk.ts";
import type { PathContext } from "./evaluate-path.ts";
import {
  loMasqueradeSource,
  loMasqueradeStep,
  loMasqueradeUndecided,
  settleCandidates,
} from "./lo-masquerade.ts";
import type {
  Hook,
  PathEvaluator,
  PathOutcome,
  PathPacket,
  PathResult,
  PathStep,
  PathVerdict,
  RejectWith,
} from "./path-types.ts";
import { decideRoute, hasLocalTable, routeByDefaultRules } from "./route-decision.ts";
import { unroutedVerdict } from "./route-verdict.ts";
import { push, pushAll, type StepList, toArray } from "./step-list.ts";

/** A packet part-way through the node: the walk (its packet, forks, assumptions) and its steps. */
interface Live {
  readonly w: NftWalk;
  readonly steps: StepList;
  /** The connection is not tracked (`notrack`): nat chains never see it. */
  readonly untracked: boolean;
  /**
   * One of the sources a masquerade on lo may give the node's own packet when `ip addr` is not in
   * evidence: the walks of one group are settled together (lo-masquerade.ts).
   */
  readonly masqGroup?: { readonly rule: SourceRef };
}

const HOOK: { readonly [K in NftHook]: Hook } = {
  prerouting: "PREROUTING",
  input: "INPUT",
  forward: "FORWARD",
  output: "OUTPUT",
  postrouting: "POSTROUTING",
};

const CT: Readonly<Record<CtState, number>> = {
  NEW: CT_STATE_BITS["new"]!,
  ESTABLISHED: CT_STATE_BITS["established"]!,
  RELATED: CT_STATE_BITS["related"]!,
  INVALID: CT_STATE_BITS["invalid"]!,
  UNTRACKED: CT_STATE_BITS["untracked"]!,
};

/**
 * Compiles a node's nftables ruleset for whole-path questions.
 *
 * @example
 * const path = compileNftPath(ruleset, { routing: { routes, rules }, localAddresses });
 * path.evaluate({ src, dst: parseIp("10.96.0.10"), proto: "udp", dport: 53, origin: "pod" });
 */
export function compileNftPath(rs: NftRuleset, ctx: PathContext = {}): PathEvaluator {
  const ifaceAddrs = (ctx.interfaces ?? []).flatMap((i) => i.addresses ?? []);
  const k = addressKnowledge(ctx.localAddresses, ifaceAddrs, ctx.addressFacts);
  const walker = new NftWalker(rs, k);
  const order = new Map<string, NftHookBase[]>();
  const basesAt = (hook: NftHook, family: 4 | 6): NftHookBase[] => {
    const key = `${hook}${family}`;
    let b = order.get(key);
    if (!b) {
      const all = ["filter", "route", "nat"].flatMap((t) => walker.bases(hook, t, family));
      b = all
        .map((x, i) => ({ x, i }))
        .sort((a, c) => a.x.chain.base!.priority - c.x.chain.base!.priority || a.i - c.i)
        .map((y) => y.x);
      order.set(key, b);
    }
    return b;
  };
  const one = (p: PathPacket): PathResult => new NftPathRun(rs, ctx, walker, basesAt).evaluate(p);
  return {
    evaluate: (packet) => {
      if (packet.ctstate !== "unknown") return one(packet);
      // the connection's state is not given: a new connection and an established one, both
      const ref: SourceRef = { file: rs.file, line: 0, text: "(the connection's state)" };
      const outcomes = (["NEW", "ESTABLISHED"] as const).flatMap((cs) => {
        const a: Assumption = {
          fact: "the packet belongs to a connection conntrack already knows",
          rule: ref,
          reason: "the connection's state was not given",
          decide: { command: "conntrack -L   # on the node" },
          holds: cs === "ESTABLISHED",
        };
        return one({ ...packet, ctstate: cs }).outcomes.map((o) => ({
          ...o,
          assumptions: [a, ...o.assumptions],
        }));
      });
      return { packet, outcomes, notes: [] };
    },
  };
}

/** One packet's evaluation. */
class NftPathRun {
  out: PathOutcome[] = [];
  readonly rs: NftRuleset;
  readonly ctx: PathContext;
  readonly walker: NftWalker;
  readonly basesAt: (hook: NftHook, family: 4 | 6) => NftHookBase[];
  constructor(
    rs: NftRuleset,
    ctx: PathContext,
    walker: NftWalker,
    basesAt: (hook: NftHook, family: 4 | 6) => NftHookBase[],
  ) {
    this.rs = rs;
    this.ctx = ctx;
    this.walker = walker;
    this.basesAt = basesAt;
  }

  evaluate(p: PathPacket): PathResult {
    this.walker.walks = 0;
    const host = p.origin === "host";
    const routing = this.ctx.routing ?? {};
    const routes = routing.routes;
    const inIface = host
      ? ""
      : (p.inIface ?? (routes ? routeByDefaultRules(routes, p.src)?.dev : undefined));
    const ctstate: CtState = p.ctstate === undefined || p.ctstate === "unknown" ? "NEW" : p.ctstate;
    const w: NftWalk = {
      pkt: {
        family: p.dst.family,
        src: p.src.value,
        dst: p.dst.value,
        proto: protoNumber(p.proto),
        sport: p.sport,
        dport: p.dport,
        iif: inIface,
        oif: "",
        mark: (p.mark ?? 0) >>> 0,
        markKnown: 0xffffffff,
        // a connection this packet opens has mark 0 until a rule saves one
        ctmark: ctstate === "NEW" ? 0 : undefined,
        ctState: CT[ctstate],
        dnatted: false,
        premise: undefined,
        taken: new Map(),
        factsUsed: undefined,
      },
      frames: [],
      steps: [],
      probability: 1,
      assumptions: [],
    };
    let live: Live[] = [{ w, steps: undefined, untracked: ctstate === "UNTRACKED" }];
    let socketDev = "";
    if (host) {
      // the socket's route comes first: a refusal sends nothing; its device is what every
      // output chain's oifname sees
      const r0 = decideRoute(routing, {
        dst: p.dst,
        src: p.src,
        iif: "lo",
        mark: w.pkt.mark,
        proto: w.pkt.proto === 6 ? "tcp" : w.pkt.proto === 17 ? "udp" : p.proto,
        ...(p.sport !== undefined ? { sport: p.sport } : {}),
        ...(p.dport !== undefined ? { dport: p.dport } : {}),
      });
      if (r0.kind === "refused") {
        this.finish(p, live[0]!, unroutedVerdict(r0, routing)!, "OUTPUT");
        return this.result(p);
      }
      if (r0.kind === "route") socketDev = r0.route.type === "local" ? "lo" : (r0.route.dev ?? "");
      live = this.hook(p, live, "output", "", socketDev);
    } else {
      live = this.hook(p, live, "prerouting", inIface, "");
    }
    for (const x of live) this.routeOn(p, x, host);
    return this.result(p);
  }

  private result(p: PathPacket): PathResult {
    return { packet: p, outcomes: this.out, notes: [] };
  }

  /** After the first hook: the routing decision, then input or forward/postrouting. */
  private routeOn(p: PathPacket, x: Live, host: boolean): void {
    const pkt = x.w.pkt;
    const dst: Ip = { family: p.dst.family, value: pkt.dst };
    const r = decideRoute(this.ctx.routing ?? {}, {
      dst,
      // the node's own packet is rerouted with the source it already has (ip_route_me_harder)
      src: p.src,
      ...(host ? { iif: "lo" } : {}),
      ...(!host && pkt.iif ? { iif: pkt.iif } : {}),
      ...(pkt.markKnown === 0xffffffff ? { mark: pkt.mark } : {}),
      proto: p.proto,
      ...(pkt.sport !== undefined ? { sport: pkt.sport } : {}),
      ...(pkt.dport !== undefined ? { dport: pkt.dport } : {}),
    });
    if (r.kind === "refused" || r.kind === "undecided") {
      const hook = r.kind === "refused" ? "FORWARD" : "PREROUTING";
      this.finish(p, x, unroutedVerdict(r, this.ctx.routing ?? {})!, hook);
      return;
    }
    if (r.kind === "unknown") {
      // no routes in the evidence: only the node's addresses tell delivery from forwarding
      const local = isLocalAddress(pkt.dst, p.dst.family, this.walker.k, undefined);
      if (local === undefined) {
        this.finish(
          p,
          x,
          {
            kind: "undecided",
            reason: "the node's routes are not in the snapshot",
            unknowns: [],
          },
          "PREROUTING",
        );
        return;
      }
      this.after(p, x, host, dst, local, undefined, undefined);
      return;
    }
    const route = r.route;
    const routeStep: PathStep = {
      kind: "route",
      dst,
      table: route.table,
      routeType: route.type,
      ...(route.dev ? { dev: route.dev } : {}),
      ...(route.via ? { via: route.via } : {}),
      ...(r.rule ? { rule: r.rule.source } : {}),
      note: `${route.type === "local" ? "local" : "route"} in table ${route.table}${route.dev ? ` dev ${route.dev}` : ""}`,
      source: route.source,
    };
    const y: Live = { ...x, steps: push(x.steps, routeStep) };
    const routes = this.ctx.routing?.routes;
    const local =
      route.type === "local" ||
      (!hasLocalTable(routes) &&
        isLocalAddress(pkt.dst, p.dst.family, this.walker.k, undefined) === true);
    this.after(p, y, host, dst, local, route.dev, route.via);
  }

  /** Prerouting on lo (the node's own packet) and input: delivered unless a rule ends it. */
  private deliver(
    p: PathPacket,
    live0: Live[],
    host: boolean,
    dst: Ip,
    dport: number | undefined,
  ): void {
    let live = live0;
    if (host) live = this.hook(p, live, "prerouting", "lo", "", "lo-in");
    const iif = host ? "lo" : (live0[0]?.w.pkt.iif ?? "");
    live = this.hook(p, live, "input", iif, "", host ? "lo-in" : "");
    for (const z of live)
      this.finish(
        p,
        z,
        { kind: "delivered", dst, ...(dport !== undefined ? { port: dport } : {}) },
        "INPUT",
      );
  }

  /** Input (delivered) or forward and postrouting (sent on), after the routing decision. */
  private after(
    p: PathPacket,
    y: Live,
    host: boolean,
    dst: Ip,
    local: boolean,
    dev: string | undefined,
    via: Ip | undefined,
  ): void {
    const pkt = y.w.pkt;
    const dport = pkt.dport;
    if (local) {
      if (!host) {
        this.deliver(p, [y], host, dst, dport);
        return;
      }
      // the node's packet to itself: postrouting on lo, then back in through prerouting on lo
      const groups = new Map<{ readonly rule: SourceRef }, Live[]>();
      const plain: Live[] = [];
      for (const z of this.hook(p, [y], "postrouting", "", "lo", "lo-out")) {
        if (z.masqGroup === undefined) plain.push(z);
        else groups.set(z.masqGroup, [...(groups.get(z.masqGroup) ?? []), z]);
      }
      this.deliver(p, plain, host, dst, dport);
      for (const [g, members] of groups) {
        // every source the masquerade may give: decided when they all end the same way
        const save = this.out;
        const per = members.map((z) => {
          this.out = [];
          this.deliver(p, [z], host, dst, dport);
          return this.out;
        });
        this.out = save;
        const settled = settleCandidates(per);
        if (settled) this.out.push(...settled);
        else
          this.finish(
            p,
            members[0]!,
            loMasqueradeUndecided(g.rule, "INPUT's rules tell its possible sources apart"),
            "INPUT",
          );
      }
      return;
    }
    let live = [y];
    if (!host) live = this.hook(p, live, "forward", pkt.iif ?? "", dev);
    // postrouting sees the device the packet leaves by (for the node's own packet, after any
    // rerouting: output's chains saw the socket's)
    live = this.hook(p, live, "postrouting", "", dev);
    for (const z of live) {
      const src = z.w.pkt.src === p.src.value ? p.src : undefined;
      const snat = this.snatOf(z);
      const verdict: PathVerdict = {
        kind: "forwarded",
        ...(dev ? { dev } : {}),
        ...(via ? { via } : {}),
        ...(snat ? (snat.to ? { src: snat.to } : {}) : src ? { src } : {}),
        dst,
        ...(z.w.pkt.dport !== undefined ? { port: z.w.pkt.dport } : {}),
      };
      this.finish(p, z, verdict, host ? "OUTPUT" : "FORWARD");
    }
  }

  /** The source rewrite recorded on a walk's steps (see {@link hook}), if any. */
  private snatOf(x: Live): { to?: Ip } | undefined {
    for (let l = x.steps; l !== undefined; l = l.prev) {
      if (l.step.kind === "snat") return l.step.to ? { to: l.step.to } : {};
    }
    return undefined;
  }

  /**
   * Every base chain of `hook` in priority order: accept ends one chain, drop/reject/undecided the
   * packet (into `out`); nat chains for a tracked connection (a later packet keeps the translation
   * its first packet got: the chains are read as for that one), and after one translated, no other
   * nat chain of the hook. `loop`: the node's packet to itself on lo (its
   * nat was decided at output; a source rewrite on lo is not followed).
   */
  private hook(
    p: PathPacket,
    live0: readonly Live[],
    hook: NftHook,
    iif: string | undefined,
    oif: string | undefined,
    loop: "" | "lo-out" | "lo-in" = "",
  ): Live[] {
    const bases = this.basesAt(hook, p.dst.family);
    let live = live0.map((x) => ({ x, natDone: false }));
    for (const base of bases) {
      const isNat = base.chain.base!.type === "nat";
      const next: { x: Live; natDone: boolean }[] = [];
      for (const { x, natDone } of live) {
        const pkt = x.w.pkt;
        if (isNat && (natDone || x.untracked || pkt.ctState === CT.INVALID || loop === "lo-in")) {
          next.push({ x, natDone });
          continue;
        }
        pkt.iif = iif;
        pkt.oif = oif;
        const n = x.w.steps.length;
        const ct = pkt.ctState;
        // a later packet keeps its connection's translation, chosen when the nat chains saw the
        // first packet (state new): what they give a new connection now
        const later = isNat && ct !== CT.NEW;
        if (later) pkt.ctState = CT.NEW;
        const key0 = `${pkt.mark}|${pkt.src}|${pkt.dst}`;
        for (const e of this.walker.runBases(x.w, hook, base.chain.base!.type, [base])) {
          const w = e.w;
          w.frames = [];
          const steps = pushAll(x.steps, this.steps(w, n, base, hook));
          let untracked = x.untracked;
          if (w.notrack && !untracked && (hook === "prerouting" || hook === "output")) {
            untracked = loop !== "lo-in";
            if (untracked) w.pkt.ctState = CT.UNTRACKED;
          }
          if (loop === "lo-in" || later) w.pkt.ctState = ct;
          const y: Live = { w, steps, untracked };
          switch (e.kind) {
            case "accept":
              if (base.chain.base!.type === "route" && this.rerouteFails(p, key0, y, hook)) break;
              next.push({ x: y, natDone });
              break;
            case "nat": {
              const s = e.nat!;
              if (s.kind === "snat" || s.kind === "masquerade") {
                if (loop === "lo-out") {
                  // what INPUT sees: the first address of scope global (lo-masquerade.ts)
                  const m =
                    s.kind === "masquerade"
                      ? loMasqueradeSource(this.ctx, p.dst.family)
                      : undefined;
                  if (m === undefined || m.kind === "unknown") {
                    this.finish(
                      p,
                      y,
                      m
                        ? loMasqueradeUndecided(e.ref, "the node's addresses are not in evidence")
                        : {
                            kind: "undecided",
                            reason:
                              "nat postrouting rewrites the source of the node's own packet on lo",
                            at: e.ref,
                            unknowns: [],
                          },
                      "INPUT",
                    );
                    break;
                  }
                  const from: Ip = { family: p.dst.family, value: y.w.pkt.src };
                  const steps = push(y.steps, loMasqueradeStep(from, m, e.ref));
                  const group = m.kind === "candidates" ? { rule: e.ref } : undefined;
                  for (const ip of m.kind === "known" ? [m.ip] : m.ips) {
                    const w2 = cloneWalk(y.w);
                    w2.pkt.src = ip.value;
                    const x2: Live = { ...y, w: w2, steps, ...(group ? { masqGroup: group } : {}) };
                    next.push({ x: x2, natDone: true });
                  }
                  break;
                }
                const to = this.snatTo(s, oif);
                next.push({
                  x: {
                    ...y,
                    steps: push(y.steps, {
                      kind: "snat",
                      decision: s.kind === "masquerade" ? "masquerade" : "snat",
                      from: p.src,
                      ...(to ? { to } : {}),
                      note: s.kind === "masquerade" ? `masquerade out of ${oif ?? "?"}` : "snat",
                      source: e.ref,
                    }),
                  },
                  natDone: true,
                });
                break;
              }
              // the node's packet given a new destination is routed again at once (nf_nat)
              if (this.rerouteFails(p, key0, y, hook)) break;
              next.push({ x: y, natDone: true });
              break;
            }
            case "drop":
            case "reject": {
              const chain = w.steps.at(-1)?.chain ?? base.chain.name;
              const table = `${base.table.family} ${base.table.name}`;
              const by = e.ref;
              if (e.kind === "drop") {
                this.finish(
                  p,
                  {
                    ...y,
                    steps: push(y.steps, verdictStep(table, chain, w, "DROP", by)),
                  },
                  { kind: "dropped", by, table, chain },
                  HOOK[hook],
                );
              } else {
                const rw = rejectWithNft(e.rejectWith, p.dst.family);
                this.finish(
                  p,
                  {
                    ...y,
                    steps: push(y.steps, {
                      ...verdictStep(table, chain, w, "REJECT", by),
                      rejectWith: rw,
                    }),
                  },
                  { kind: "rejected", with: rw, by, table, chain },
                  HOOK[hook],
                );
              }
              break;
            }
            case "undecided":
              this.finish(
                p,
                y,
                { kind: "undecided", reason: e.reason ?? "undecided", at: e.ref, unknowns: [] },
                HOOK[hook],
              );
              break;
          }
        }
      }
      live = next;
    }
    return live.map((l) => l.x);
  }

  /**
   * A route chain (`type route hook output`) that changed the packet's mark or addresses, or a
   * DNAT at output, has the kernel route it again at once (ip_route_me_harder): a refusal there
   * ends the packet before the chains after it. True when it ended (the outcome is in `out`).
   */
  private rerouteFails(p: PathPacket, was: string, y: Live, hook: NftHook): boolean {
    const a = y.w.pkt;
    if (hook !== "output" || `${a.mark}|${a.src}|${a.dst}` === was) return false;
    const r = decideRoute(this.ctx.routing ?? {}, {
      dst: { family: p.dst.family, value: a.dst },
      src: { family: p.dst.family, value: a.src },
      iif: "lo",
      ...(a.markKnown === 0xffffffff ? { mark: a.mark } : {}),
      proto: p.proto,
      ...(a.sport !== undefined ? { sport: a.sport } : {}),
      ...(a.dport !== undefined ? { dport: a.dport } : {}),
    });
    const ended = unroutedVerdict(r, this.ctx.routing ?? {});
    if (ended) this.finish(p, y, ended, "OUTPUT");
    return ended !== undefined;
  }

  /** The source a snat/masquerade statement gives: its fixed address, or the device's primary. */
  private snatTo(s: NonNullable<NftHookEnd["nat"]>, oif: string | undefined): Ip | undefined {
    if (s.kind === "snat") {
      const a = s.to?.kind === "fixed" ? s.to.addr : undefined;
      return a?.kind === "range" && a.lo === a.hi
        ? { family: this.familyOf(), value: a.lo }
        : undefined;
    }
    return this.ctx.interfaces?.find((i) => i.name === oif)?.primary;
  }

  private familyOf(): 4 | 6 {
    return this.rs.tables.some((t) => t.family === "ip6") &&
      !this.rs.tables.some((t) => t.family === "ip")
      ? 6
      : 4;
  }

  /** The walk's steps since `n` as path steps. */
  private steps(w: NftWalk, n: number, base: NftHookBase, hook: NftHook): PathStep[] {
    const table = `${base.table.family} ${base.table.name}`;
    const out: PathStep[] = [];
    for (let i = n; i < w.steps.length; i++) {
      const s = w.steps[i]!;
      switch (s.kind) {
        case "enter":
          out.push({ kind: "hook", table, hook: HOOK[hook], source: s.source });
          break;
        case "dnat":
          out.push({
            kind: "dnat",
            chain: s.chain,
            ruleIndex: s.ruleIndex,
            to: { family: w.pkt.family, value: w.pkt.dst },
            ...(w.pkt.dport !== undefined ? { port: w.pkt.dport } : {}),
            note: s.note,
            source: s.source,
          });
          break;
        case "masquerade":
        case "snat":
        case "drop":
          break;
        default:
          out.push({
            kind: "rule",
            table,
            chain: s.chain,
            ruleIndex: s.ruleIndex,
            note: s.note,
            source: s.source,
          });
      }
    }
    return out;
  }

  private finish(p: PathPacket, x: Live, verdict: PathVerdict, hook: Hook): void {
    const pkt = x.w.pkt;
    const kind = p.origin === "host" ? "output" : hook === "INPUT" ? "local" : "forward";
    const dstOut: Ip = { family: p.dst.family, value: pkt.dst };
    this.out.push({
      steps: toArray(x.steps),
      verdict,
      assumptions: x.w.assumptions,
      probability: x.w.probability,
      dstOut,
      ...(pkt.dport !== undefined ? { dportOut: pkt.dport } : {}),
      kind,
    });
  }
}

function verdictStep(
  table: string,
  chain: string,
  w: NftWalk,
  verdict: "DROP" | "REJECT",
  by: SourceRef,
): Extract<PathStep, { kind: "verdict" }> {
  const last = w.steps.at(-1);
  return {
    kind: "verdict",
    table,
    chain,
    ruleIndex: last?.ruleIndex ?? 0,
    verdict,
    note: last?.note ?? verdict.toLowerCase(),
    source: by,
  };
}

const NFT_REJECT: Readonly<Record<string, RejectWith>> = {
  "net-unreachable": "icmp-net-unreachable",
  "host-unreachable": "icmp-host-unreachable",
  "port-unreachable": "icmp-port-unreachable",
  "prot-unreachable": "icmp-proto-unreachable",
  "net-prohibited": "icmp-net-prohibited",
  "host-prohibited": "icmp-host-prohibited",
  "admin-prohibited": "icmp-admin-prohibited",
  // icmpx's no-route, on an IPv4 packet (nft_reject_icmpx_code)
  "no-route": "icmp-net-unreachable",
};

const NFT_REJECT6: Readonly<Record<string, RejectWith>> = {
  "no-route": "icmp6-no-route",
  "admin-prohibited": "icmp6-adm-prohibited",
  "addr-unreachable": "icmp6-addr-unreachable",
  "port-unreachable": "icmp6-port-unreachable",
  "host-unreachable": "icmp6-addr-unreachable",
  "policy-fail": "icmp6-policy-fail",
  "reject-route": "icmp6-reject-route",
};

/**
 * What an nftables `reject` answers: `with tcp reset`, `with icmp[x] [type] NAME`; without
 * `with`, port unreachable (nft_reject).
 */
export function rejectWithNft(w: string | undefined, family: 4 | 6): RejectWith {
  if (w === "tcp reset") return "tcp-reset";
  const name = w?.split(" ").at(-1) ?? "port-unreachable";
  const m = family === 6 ? NFT_REJECT6 : NFT_REJECT;
  return m[name] ?? (family === 6 ? "icmp6-port-unreachable" : "icmp-port-unreachable");
}
