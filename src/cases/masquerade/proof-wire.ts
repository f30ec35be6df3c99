/**
 * @module cases/masquerade/proof-wire — the known request as the captures of one snapshot show it:
 * per capture point, the source address it left with (pod or node), how far it got (replies, TCP
 * handshake, data, clean close), and the node it left from. A node address counts as a pod's
 * translated request only where the node's own capture shows a pod's request entering, since the
 * node's own traffic (its ping) carries the same address.
 */
import type { Conversation, TcpProgress } from "../../capture/conversations.ts";
import type { Diagnostic, Evidence } from "../../model/types.ts";
import { contains, formatIp, type Ip } from "../../net/cidr.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { ClusterFacts } from "./facts.ts";
import { readWireCaptures } from "./wire.ts";

export interface WireObservation {
  readonly phase: "before" | "after";
  readonly capture: string;
  readonly point?: string;
  /** The node the request left from: the capture's node, or the node owning the source. */
  readonly node?: string;
  /** The pod that sent it, when the capture shows it (its own address, or the leg before NAT). */
  readonly pod?: string;
  /**
   * On a node capture, the same request on the pod's side of the NAT: whether the replies were
   * seen going back to the pod (the reverse direction, after de-NAT).
   */
  readonly toSender?: {
    readonly replied: boolean;
    readonly progress: string;
    readonly evidence?: Evidence;
  };
  readonly source: string;
  readonly sourceKind: "pod" | "node" | "other";
  readonly replied: boolean;
  /** TCP progress or reply summary, as the conversation's verdict says. */
  readonly progress: string;
  /** How far TCP got, when the request is TCP. */
  readonly tcpProgress?: TcpProgress;
  /** Both sides closed with FIN and nobody reset the connection. */
  readonly cleanClose?: boolean;
  readonly completed: boolean;
  readonly evidence: Evidence;
}

export function classify(
  ip: Ip,
  facts: readonly ClusterFacts[],
  nodeIps: readonly Ip[],
): "pod" | "node" | "other" {
  if (nodeIps.some((n) => n.value === ip.value)) return "node";
  for (const f of facts) {
    if (f.podRanges.some((r) => contains(r, ip))) return "pod";
    if (f.pods.some((p) => !p.hostNetwork && p.podIPs.some((x) => x.ip.value === ip.value)))
      return "pod";
  }
  return "other";
}

/**
 * The exchange finished: replies came back and, for TCP, the handshake completed and data moved
 * (an application exchange, not only a SYN or a bare connect).
 */
function completedOf(c: Conversation): boolean {
  if (c.tcp)
    return c.replied && (c.tcp.progress === "data-one-way" || c.tcp.progress === "data-both-ways");
  return c.replied;
}

/** Rank of an observation's progress: a later stage of the same request says more. */
const PROGRESS_RANK: Record<TcpProgress, number> = {
  "mid-stream": 0,
  "syn-only": 1,
  "syn-ack": 2,
  established: 3,
  "data-one-way": 4,
  "data-both-ways": 5,
};
function rankOf(o: WireObservation): number {
  if (o.tcpProgress) return PROGRESS_RANK[o.tcpProgress] + (o.cleanClose ? 0.5 : 0);
  return o.replied ? 5 : 0;
}

/** The node that owns an address: its InternalIP, its pod range, or a pod scheduled on it. */
function nodeOfIp(ip: Ip, facts: readonly ClusterFacts[]): string | undefined {
  for (const f of facts) {
    const n =
      f.nodes.find((x) => x.internalIPs.some((a) => a.ip.value === ip.value)) ??
      f.nodes.find((x) => x.podCIDRs.some((r) => contains(r.cidr, ip)));
    if (n) return n.name;
    const p = f.pods.find(
      (x) => !x.hostNetwork && x.nodeName && x.podIPs.some((a) => a.ip.value === ip.value),
    );
    if (p?.nodeName) return p.nodeName;
  }
  return undefined;
}

/**
 * The pod's copy of a request whose other copy left the node with another source address
 * (capture/packet-copies.ts paired them): the leg before NAT, even where directions are unknown.
 */
const isBeforeNat = (c: Conversation) =>
  c.translation?.side === "before" && c.translation.source !== undefined;

/** The node a capture was taken on, from its point (`node/NAME`). */
const captureNode = (cap: WireCapture): string | undefined =>
  cap.meta?.point?.startsWith("node/") ? cap.meta.point.slice(5) : undefined;

type WireCapture = Awaited<ReturnType<typeof readWireCaptures>>[number];

interface PodLeg {
  readonly pod: string;
  readonly conversation: Conversation;
}

/**
 * Node-level captures whose pod legs show a pod's request entering the node and not leaving it
 * with the pod address (so it left translated): a node address toward the destination counts
 * as that pod's translated request only with one, otherwise it may be the node's own traffic
 * (its ping works either way).
 */
function podLegsByNode(
  caps: readonly WireCapture[],
  isRequest: (c: Conversation) => boolean,
  facts: readonly ClusterFacts[],
  nodeIps: readonly Ip[],
): Map<string, PodLeg[]> {
  const podLegs = new Map<string, PodLeg[]>();
  for (const cap of caps) {
    const node = captureNode(cap);
    if (!node) continue;
    const legs = podLegs.get(node) ?? [];
    for (const c of cap.conversations) {
      if (!isRequest(c) || classify(c.initiator.ip, facts, nodeIps) !== "pod") continue;
      if (!isBeforeNat(c) && c.seenOn.some((x) => / out$/.test(x))) continue;
      legs.push({ pod: formatIp(c.initiator.ip), conversation: c });
    }
    podLegs.set(node, legs);
  }
  return podLegs;
}

/** The replies on their last hop, going back out to the pod (the reverse direction). */
function toSenderOf(leg: Conversation): NonNullable<WireObservation["toSender"]> {
  return {
    replied: leg.replied,
    progress: leg.verdict,
    ...(leg.firstReply
      ? {
          evidence: {
            file: leg.firstReply.ref.file,
            line: leg.firstReply.ref.line,
            ...(leg.firstReply.ref.text ? { text: leg.firstReply.ref.text } : {}),
          },
        }
      : {}),
  };
}

/** One conversation of a capture as an observation of the request. */
function observation(
  phase: "before" | "after",
  cap: WireCapture,
  c: Conversation,
  seen: { kind: "pod" | "node"; node?: string; pod?: string; leg?: Conversation },
): WireObservation {
  const { kind, node, pod, leg } = seen;
  return {
    phase,
    ...(leg ? { toSender: toSenderOf(leg) } : {}),
    capture: cap.file,
    ...(cap.meta?.point ? { point: cap.meta.point } : {}),
    ...(node ? { node } : {}),
    ...(pod ? { pod } : {}),
    source: formatIp(c.initiator.ip),
    sourceKind: kind,
    replied: c.replied,
    progress: c.verdict,
    ...(c.tcp
      ? {
          tcpProgress: c.tcp.progress,
          cleanClose: c.tcp.finFrom.length === 2 && c.tcp.rstFrom.length === 0,
        }
      : {}),
    completed: completedOf(c),
    evidence: {
      file: c.first.ref.file,
      line: c.first.ref.line,
      ...(c.first.ref.text ? { text: c.first.ref.text } : {}),
    },
  };
}

export async function observe(
  snap: Snapshot,
  phase: "before" | "after",
  dest: { ip: Ip; port?: number },
  facts: readonly ClusterFacts[],
  nodeIps: readonly Ip[],
  diagnostics: Diagnostic[],
): Promise<WireObservation[]> {
  const out: WireObservation[] = [];
  const caps = await readWireCaptures(snap, diagnostics, dest.ip);
  const isRequest = (c: Conversation) =>
    c.responder.ip.value === dest.ip.value &&
    // the known request: the same port when one is given (a ping is not the request)
    (dest.port === undefined ? c.protocol === "icmp" : c.responder.port === dest.port);
  const podLegs = podLegsByNode(caps, isRequest, facts, nodeIps);
  // A snapshot is one moment; its captures' phase labels only sort out a snapshot that holds
  // both. A rollback pair passes an "after" snapshot as the state before the rollback.
  const mixed =
    caps.some((c) => c.meta?.phase === "before") && caps.some((c) => c.meta?.phase === "after");
  for (const cap of caps) {
    if (mixed && cap.meta?.phase && cap.meta.phase !== phase) continue;
    const capNode = captureNode(cap);
    for (const c of cap.conversations) {
      if (!isRequest(c)) continue;
      const kind = classify(c.initiator.ip, facts, nodeIps);
      if (kind === "other") continue;
      // On a node capture (-i any) the pod's packet is also seen arriving from its veth before
      // NAT; only a pod address seen leaving the node says the rules did not rewrite it.
      if (kind === "pod" && isBeforeNat(c)) continue;
      if (kind === "pod" && capNode && c.seenOn.length > 0) {
        if (!c.seenOn.some((x) => / out$/.test(x))) continue;
      }
      const node = capNode ?? nodeOfIp(c.initiator.ip, facts);
      const legs = node ? podLegs.get(node) : undefined;
      if (kind === "node" && legs && legs.length === 0) continue;
      const pod =
        kind === "pod"
          ? formatIp(c.initiator.ip)
          : legs && new Set(legs.map((l) => l.pod)).size === 1
            ? legs[0]!.pod
            : undefined;
      // the replies on their last hop: going back out to the pod (the reverse direction)
      const leg = kind === "node" && legs?.length === 1 && pod ? legs[0]!.conversation : undefined;
      out.push(
        observation(phase, cap, c, {
          kind,
          ...(node ? { node } : {}),
          ...(pod ? { pod } : {}),
          ...(leg ? { leg } : {}),
        }),
      );
    }
  }
  return out;
}

/** The observation in a few words for the proof line. */
export function summarise(o: WireObservation): string {
  switch (o.tcpProgress) {
    case undefined:
      return o.replied ? "replied" : "no reply";
    case "data-both-ways":
      return o.cleanClose ? "handshake and data completed" : "handshake and data, not closed";
    case "data-one-way":
      // one side's data acknowledged and both sides closed: the exchange the request was for
      return o.cleanClose ? "handshake and data completed" : "handshake completed, data one way";
    case "established":
      return "handshake completed, no data";
    case "syn-ack":
      return "SYN-ACK came back, handshake not completed";
    case "syn-only":
      return "SYN only, no reply";
    default:
      return o.replied ? "seen mid-stream" : "seen mid-stream, no reply";
  }
}

/** The observation that speaks for the request: a pod's one first (the case), then the node's. */
export function pick(
  list: readonly WireObservation[],
  preferPoint?: string,
): WireObservation | undefined {
  const order = (o: WireObservation) =>
    (o.point?.startsWith("node/") ? 0 : o.point?.startsWith("remote/") ? 1 : 2) +
    (preferPoint && o.point === preferPoint ? -10 : 0);
  const best = [...list].sort((a, b) => order(a) - order(b))[0];
  if (!best) return undefined;
  // the same request seen at several points: its source from the best point, its progress from
  // the point that saw it get furthest (a capture stopped early misses the last packets)
  const same = list.filter((o) => o.source === best.source);
  const furthest = same.reduce((a, b) => (rankOf(b) > rankOf(a) ? b : a), best);
  return furthest === best
    ? best
    : {
        ...best,
        replied: furthest.replied,
        progress: furthest.progress,
        completed: furthest.completed,
        ...(furthest.tcpProgress ? { tcpProgress: furthest.tcpProgress } : {}),
        ...(furthest.cleanClose !== undefined ? { cleanClose: furthest.cleanClose } : {}),
      };
}
