/**
 * @module cases/vpn/proof — the change record for a VPN-pod forwarding change: two snapshots,
 * before and after, compared where case B decides. Forwarding read in the VPN pod's own network
 * namespace (`pods/<ns>/<pod>/sysctl.txt`) on both sides, whether the after manifest makes it
 * durable (`durable.ts`), the client's outward walk on both sides (`hops.ts`: the first silent hop
 * before and after), and whether the pod masquerades the client pool (`masquerade.ts`). The change
 * did what it intended when forwarding is on after and the first silent hop moved outward or
 * vanished.
 */

import type { Diagnostic, Evidence, Missing, SourceRef } from "../../model/types.ts";
import { refToEvidence } from "../../model/types.ts";
import { formatCidr, formatIp, type Ip } from "../../net/cidr.ts";
import { sh, whole } from "../../report/shell-quote.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { ProofVerdict } from "../case.ts";
import { forwardingSetters, IP_FORWARD } from "./durable.ts";
import {
  HOP_ORDER,
  type Hop,
  type HopResult,
  type HopState,
  LAYER_OF,
  type Walk,
  walkHops,
} from "./hops.ts";
import {
  clusterPodRanges,
  execIn,
  resolveVpn,
  serviceIps,
  type VpnContext,
  type VpnInput,
} from "./input.ts";
import { masqueradeOf } from "./masquerade.ts";
import { vpnInputFromSnapshot } from "./snapshot-input.ts";

export type VpnPhase = "before" | "after";

/** `net.ipv4.ip_forward` in the VPN pod's own namespace, on one side. */
export interface ForwardingSide {
  /** `NS/NAME` of the VPN pod on this side. */
  readonly pod?: string;
  readonly state: "on" | "off" | "unknown";
  /** The value as the file reads it. */
  readonly value?: string;
  readonly evidence?: Evidence;
}

/** One hop of the client's outward walk, as its deciding probe shows it. */
export interface HopSide {
  readonly hop: Hop;
  readonly state: HopState;
  /** The address or name probed. */
  readonly target?: string;
  readonly command: string;
  readonly result: string;
  /** The output line that decided the result. */
  readonly evidence: Evidence;
}

/**
 * How the first silent hop moved: outward (a later hop is now the first silent one), vanished
 * (none is silent after), same, inward, appeared (none was silent before), none (none on either
 * side), unknown (the probes of a side are missing).
 */
export type HopMove = "outward" | "vanished" | "same" | "inward" | "appeared" | "none" | "unknown";

export interface MasqueradeSide {
  readonly state: "masqueraded" | "not-masqueraded" | "unknown";
  readonly why?: string;
  readonly evidence?: Evidence;
}

export interface VpnChangeRecord {
  readonly schemaVersion: 1;
  readonly tool: "podpath";
  readonly question: "verify";
  readonly case: "vpn";
  readonly before: string;
  readonly after: string;
  /** The one line that proves (or disproves) the change. */
  readonly proof: string;
  readonly verdict: ProofVerdict;
  readonly verdictText: string;
  readonly forwarding: { readonly before: ForwardingSide; readonly after: ForwardingSide };
  /** Whether the after manifest sets forwarding when the pod is created. */
  readonly durable: {
    readonly state: "yes" | "no" | "unknown";
    readonly workload?: string;
    readonly setters: readonly {
      readonly kind: string;
      readonly value: string;
      readonly evidence: Evidence;
    }[];
  };
  readonly firstSilentHop: {
    readonly before?: HopSide;
    readonly after?: HopSide;
    readonly moved: HopMove;
  };
  /** The client's probes, one per hop, on each side. */
  readonly client: { readonly before: readonly HopSide[]; readonly after: readonly HopSide[] };
  /** Whether the pod masquerades the client pool on its way out of eth0. */
  readonly masquerade: {
    readonly pool?: string;
    readonly before: MasqueradeSide;
    readonly after: MasqueradeSide;
  };
  readonly evidence: readonly Evidence[];
  readonly missing: readonly Missing[];
  readonly diagnostics: readonly Diagnostic[];
}

interface Side {
  readonly phase: VpnPhase;
  readonly snap: Snapshot;
  readonly input: VpnInput;
  readonly ctx?: VpnContext;
  readonly walk: Walk;
  readonly diagnostics: readonly Diagnostic[];
}

const ev = (r: SourceRef): Evidence => refToEvidence(r);
const at = (e: Evidence | undefined) => (e ? `${e.file}:${e.line}` : "not read");
const podName = (ctx: VpnContext | undefined) => (ctx ? `${ctx.namespace}/${ctx.name}` : undefined);

function readSide(phase: VpnPhase, snap: Snapshot): Side {
  const { input, diagnostics } = vpnInputFromSnapshot(snap);
  const ctx = resolveVpn(input);
  const walk = walkHops(input.probes, {
    ...(ctx?.peer ? { peer: ctx.peer.value } : {}),
    podRanges: clusterPodRanges(input.objects),
    serviceIps: serviceIps(input.objects).map((s) => s.ip),
    pushed: ctx?.kind.pushedRoutes.map((r) => r.value) ?? [],
  });
  return { phase, snap, input, ...(ctx ? { ctx } : {}), walk, diagnostics };
}

/** Does this snapshot hold a VPN pod (named by its config, a tunnel device or the chart)? */
export function holdsVpnPod(snap: Snapshot): boolean {
  return resolveVpn(vpnInputFromSnapshot(snap).input) !== undefined;
}

function forwardingOf(s: Side, missing: Missing[]): ForwardingSide {
  const pod = podName(s.ctx);
  const entry = s.ctx?.evidence?.sysctl?.values.get(IP_FORWARD);
  if (!entry) {
    if (s.ctx) {
      const file = `pods/${s.ctx.namespace}/${s.ctx.name}/sysctl.txt`;
      missing.push({
        file: `${s.phase}: ${file}`,
        would_decide: `${IP_FORWARD} in the VPN pod's own network namespace ${s.phase} the change`,
        command: whole(`${execIn(s.ctx, `sysctl ${IP_FORWARD}`)} > ${sh`${file}`}`),
      });
    }
    return { ...(pod ? { pod } : {}), state: "unknown" };
  }
  const value = entry.value.trim();
  return {
    ...(pod ? { pod } : {}),
    state: value === "1" ? "on" : value === "0" ? "off" : "unknown",
    value,
    evidence: ev(entry.source),
  };
}

function hopSide(h: HopResult): HopSide {
  const c = h.commands[0]!;
  const target = c.targetIp ? formatIp(c.targetIp) : c.target;
  return {
    hop: h.hop,
    state: h.state,
    ...(target !== undefined ? { target } : {}),
    command: c.command,
    result: c.result,
    evidence: ev(c.resultSource),
  };
}

function moveOf(b: Side, a: Side): HopMove {
  if (b.walk.hops.length === 0 || a.walk.hops.length === 0) return "unknown";
  const fb = b.walk.firstFailed;
  const fa = a.walk.firstFailed;
  if (!fb && !fa) return "none";
  if (!fb) return "appeared";
  if (!fa) return "vanished";
  const rb = HOP_ORDER.indexOf(fb.hop);
  const ra = HOP_ORDER.indexOf(fa.hop);
  return ra > rb ? "outward" : ra === rb ? "same" : "inward";
}

/** A client address of the pool and a destination past the pod, as the diagnosis picks them. */
function flowOf(s: Side): { client: Ip; dst: Ip } | undefined {
  const pool = s.ctx?.pool;
  if (!pool) return undefined;
  const client: Ip = { family: pool.value.family, value: pool.value.start + 2n };
  let dst: Ip | undefined;
  for (const h of s.walk.hops) {
    if (h.hop === "peer") continue;
    dst = h.commands[0]?.targetIp;
    if (dst) break;
  }
  dst ??= serviceIps(s.input.objects)[0]?.ip ?? s.ctx?.podIp?.value;
  return { client, dst: dst ?? { family: 4, value: 0x0a000001n } };
}

function masqueradeSide(s: Side, missing: Missing[]): MasqueradeSide {
  if (!s.ctx) return { state: "unknown", why: "no VPN pod in this snapshot" };
  const flow = flowOf(s);
  if (!flow) return { state: "unknown", why: "the client pool is not known (no server config)" };
  const dump = s.ctx.evidence?.iptables;
  if (!dump) {
    const file = `pods/${s.ctx.namespace}/${s.ctx.name}/iptables-save.txt`;
    missing.push({
      file: `${s.phase}: ${file}`,
      would_decide: `whether the VPN pod masquerades the client pool ${s.phase} the change`,
      command: whole(`${execIn(s.ctx, "iptables-save -t nat")} > ${sh`${file}`}`),
    });
    return { state: "unknown", why: `no ${file}` };
  }
  const v = masqueradeOf(dump, { src: flow.client, dst: flow.dst, outIface: "eth0" });
  switch (v.kind) {
    case "masqueraded":
      return { state: "masqueraded", evidence: ev(v.source) };
    case "not-masqueraded":
      return { state: "not-masqueraded", ...(v.last ? { evidence: ev(v.last) } : {}) };
    case "unknown":
      return { state: "unknown", why: v.why, evidence: ev(v.source) };
    default:
      return { state: "not-masqueraded", why: "the pod's iptables-save has no nat table" };
  }
}

const HOP_NAME: { readonly [H in Hop]: string } = {
  peer: "the tunnel peer",
  "pod-ip": "the pod IP",
  "service-ip": "the Service IP",
  public: "the public address",
};

const hopText = (h: HopSide) => `${HOP_NAME[h.hop]}${h.target ? ` ${h.target}` : ""}`;

function forwardingClause(fb: ForwardingSide, fa: ForwardingSide): string {
  const pods =
    fb.pod && fa.pod && fb.pod !== fa.pod
      ? `${fb.pod} → ${fa.pod}`
      : (fa.pod ?? fb.pod ?? "(no VPN pod)");
  const eb = fb.evidence;
  const ea = fa.evidence;
  const where =
    eb && ea && eb.file === ea.file ? `${at(eb)} → …:${ea.line}` : `${at(eb)} → ${at(ea)}`;
  return `${IP_FORWARD} ${fb.value ?? "?"} → ${fa.value ?? "?"} in pod ${pods} (${where})`;
}

function hopClause(b: Side, a: Side, moved: HopMove): string {
  if (moved === "unknown") {
    const gone = [b, a].filter((s) => s.walk.hops.length === 0).map((s) => s.phase);
    return `no client probes ${gone.join(" and ")} the change`;
  }
  const fb = b.walk.firstFailed ? hopSide(b.walk.firstFailed) : undefined;
  if (!fb) {
    const fa = a.walk.firstFailed ? hopSide(a.walk.firstFailed) : undefined;
    return fa
      ? `no hop was silent before; ${hopText(fa)} is silent after (${at(fa.evidence)})`
      : "no hop is silent before or after the change";
  }
  const now = a.walk.hops.find((h) => h.hop === fb.hop);
  if (!now) return `${hopText(fb)} was silent before (${at(fb.evidence)}) and is not probed after`;
  const n = hopSide(now);
  if (n.state === "answered") return `${hopText(n)} now answers the client (${at(n.evidence)})`;
  return `${hopText(n)} still does not answer the client (${at(n.evidence)})`;
}

function verdictOf(
  fbw: ForwardingSide,
  fa: ForwardingSide,
  moved: HopMove,
  b: Side,
  a: Side,
  durable: VpnChangeRecord["durable"],
  masqAfter: MasqueradeSide,
): { verdict: ProofVerdict; text: string } {
  const pod = fa.pod ?? "the VPN pod";
  const still = fbw.state === "off";
  if (fa.state !== "on") {
    return {
      verdict: "not-intended",
      text:
        fa.state === "off"
          ? `${IP_FORWARD} ${still ? "still " : ""}reads ${fa.value} in ${pod} after the change (${at(fa.evidence)}): the pod forwards nothing.`
          : fa.value !== undefined
            ? `${IP_FORWARD} reads ${fa.value} in ${pod} after the change (${at(fa.evidence)}), neither 0 nor 1.`
            : `${IP_FORWARD} is not read in ${pod}'s own namespace after the change: the after snapshot does not show forwarding on (see what is missing).`,
    };
  }
  const fb = b.walk.firstFailed ? hopSide(b.walk.firstFailed) : undefined;
  const fa2 = a.walk.firstFailed ? hopSide(a.walk.firstFailed) : undefined;
  const caveat =
    durable.state === "no"
      ? ` But nothing in ${durable.workload ?? "the manifest"} sets it: the next restart of the pod turns it off again.`
      : durable.state === "unknown"
        ? " Whether the manifest sets it at the next restart is not known (no workload manifest)."
        : "";
  switch (moved) {
    case "vanished":
      return {
        verdict: "intended",
        text: `Forwarding is on in ${pod} and no hop is silent any more (before: ${hopText(fb!)}, ${at(fb!.evidence)}): the change did what it said.${caveat}`,
      };
    case "outward":
      return {
        verdict: "intended",
        text: `Forwarding is on in ${pod} and the first silent hop moved outward, from ${hopText(fb!)} to ${hopText(fa2!)} (${at(fa2!.evidence)}): the change did what it said; the next layer to look at is ${LAYER_OF[fa2!.hop].layer}.${caveat}`,
      };
    case "same":
      return {
        verdict: "not-intended",
        text:
          `Forwarding is on in ${pod}, but ${hopText(fa2!)} is still the first hop without an answer (${at(fa2!.evidence)}): what stops the client is not (only) forwarding.` +
          (masqAfter.state === "not-masqueraded"
            ? ` The pod does not masquerade the client pool${masqAfter.evidence ? ` (${at(masqAfter.evidence)})` : ""}: replies have no way back unless the cluster routes the pool.`
            : ""),
      };
    case "inward":
      return {
        verdict: "not-intended",
        text: `The first silent hop moved inward, from ${hopText(fb!)} to ${hopText(fa2!)} (${at(fa2!.evidence)}): the client reaches less than before.`,
      };
    case "appeared":
      return {
        verdict: "not-intended",
        text: `No hop was silent before the change, and ${hopText(fa2!)} is silent after (${at(fa2!.evidence)}).`,
      };
    case "none":
      return {
        verdict: "not-intended",
        text: "No hop is silent before or after the change: the probes show nothing the change fixed.",
      };
    default:
      return {
        verdict: "not-intended",
        text: "Forwarding is on after the change, but without the client's probes on both sides nothing shows a hop that now answers (see what is missing).",
      };
  }
}

/** Whether the after manifest sets forwarding when the pod is created, and what sets it. */
function durableOf(a: Side): VpnChangeRecord["durable"] {
  const wl = a.ctx?.workload;
  const setters = a.ctx ? forwardingSetters(wl, a.ctx.kind.extraSetters) : [];
  return {
    state: setters.length > 0 ? "yes" : wl ? "no" : "unknown",
    ...(wl ? { workload: `${wl.kind} ${wl.namespace ?? "default"}/${wl.name}` } : {}),
    setters: setters.map((s) => ({ kind: s.kind, value: s.value, evidence: ev(s.source) })),
  };
}

/** A side without the client's probes: what would decide its first silent hop. */
function probesMissing(s: Side, missing: Missing[]): void {
  if (s.walk.hops.length > 0) return;
  missing.push({
    file: `${s.phase}: probes/client.txt`,
    would_decide: `which hop from the client outward is the first silent one ${s.phase} the change`,
    command: `podpath probe --peer ${s.ctx?.peer ? formatIp(s.ctx.peer.value) : "PEER"} --pod-ip POD_IP --service-ip SERVICE_IP --public 1.1.1.1 --out probes/client.txt`,
  });
}

/**
 * The record's evidence, each tagged with its side: forwarding, the first silent hop before and
 * the same hop after (else the first silent one after), what sets forwarding, the masquerade.
 */
function recordEvidence(
  r: Pick<VpnChangeRecord, "forwarding" | "durable" | "firstSilentHop" | "client" | "masquerade">,
): Evidence[] {
  const evidence: Evidence[] = [];
  const tag = (phase: VpnPhase, e: Evidence | undefined) => {
    if (e) evidence.push({ ...e, file: `${phase}:${e.file}` });
  };
  tag("before", r.forwarding.before.evidence);
  tag("after", r.forwarding.after.evidence);
  tag("before", r.firstSilentHop.before?.evidence);
  const silentBefore = r.firstSilentHop.before;
  const answered = silentBefore
    ? r.client.after.find((h) => h.hop === silentBefore.hop)
    : undefined;
  tag("after", answered?.evidence ?? r.firstSilentHop.after?.evidence);
  for (const s of r.durable.setters) tag("after", s.evidence);
  tag("before", r.masquerade.before.evidence);
  tag("after", r.masquerade.after.evidence);
  return evidence;
}

/** The change record, or undefined when neither snapshot holds a VPN pod. */
export function verifyVpnChange(before: Snapshot, after: Snapshot): VpnChangeRecord | undefined {
  const b = readSide("before", before);
  const a = readSide("after", after);
  if (!b.ctx && !a.ctx) return undefined;
  const missing: Missing[] = [];

  const forwarding = { before: forwardingOf(b, missing), after: forwardingOf(a, missing) };

  const durable = durableOf(a);
  for (const s of [b, a]) probesMissing(s, missing);
  const moved = moveOf(b, a);
  const firstSilentHop = {
    ...(b.walk.firstFailed ? { before: hopSide(b.walk.firstFailed) } : {}),
    ...(a.walk.firstFailed ? { after: hopSide(a.walk.firstFailed) } : {}),
    moved,
  };
  const client = { before: b.walk.hops.map(hopSide), after: a.walk.hops.map(hopSide) };

  const pool = a.ctx?.pool ?? b.ctx?.pool;
  const masquerade = {
    ...(pool ? { pool: formatCidr(pool.value) } : {}),
    before: masqueradeSide(b, missing),
    after: masqueradeSide(a, missing),
  };

  const proof = `${forwardingClause(forwarding.before, forwarding.after)}; ${hopClause(b, a, moved)}`;
  const { verdict, text } = verdictOf(
    forwarding.before,
    forwarding.after,
    moved,
    b,
    a,
    durable,
    masquerade.after,
  );

  const evidence = recordEvidence({ forwarding, durable, firstSilentHop, client, masquerade });
  return {
    schemaVersion: 1,
    tool: "podpath",
    question: "verify",
    case: "vpn",
    before: before.name,
    after: after.name,
    proof,
    verdict,
    verdictText: text,
    forwarding,
    durable,
    firstSilentHop,
    client,
    masquerade,
    evidence,
    missing,
    diagnostics: [
      ...before.diagnostics.filter((d) => d.severity === "error"),
      ...after.diagnostics.filter((d) => d.severity === "error"),
      ...b.diagnostics,
      ...a.diagnostics,
    ],
  };
}
