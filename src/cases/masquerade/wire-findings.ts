/**
 * @module cases/masquerade/wire-findings — findings from the wire: which source address a request to the
 * destination carried (the pod's own or the node's), and whether replies came back.
 *
 * - `masq/wire-pod-source`: the pod address leaves toward the destination. With no reply this
 *   closes the case (error): the far side has no route back to the pod range.
 * - `masq/wire-node-source`: the request leaves translated to a node address and replies come
 *   back (info): after a fix, the healthy sign.
 * - `masq/reply-missing`: the request leaves translated and no reply returns (error): a routing
 *   or firewall problem on the far side, not masquerade.
 *
 * Every observation of the source address (e.g. on the node and on the far side) is listed side
 * by side in each finding's explanation.
 *
 * A node capture on every interface shows a pod's packet twice: arriving on its veth and leaving on
 * eth0 (capture/packet-copies.ts pairs them). The copy before the node's NAT is never read as the
 * pod address leaving: the pair is reported as the translation it shows, with both packets; a pair
 * with the pod address on both sides is the proof that the node did not masquerade.
 */

import {
  type Conversation,
  type CopyRefs,
  type PacketRef,
  packetPair,
  type Translation,
} from "../../capture/conversation.ts";
import { describeBasis } from "../../capture/packet-copies.ts";
import type { Evidence, Finding } from "../../model/types.ts";
import { type Cidr, contains, formatIp, type Ip } from "../../net/cidr.ts";

export interface WireCapture {
  /** Snapshot-relative file, as cited. */
  readonly file: string;
  /** From `captures/<name>.yaml`: `point` (node/N, pod/NS/N, remote/SITE, client), `phase`. */
  readonly meta?: { readonly point?: string; readonly phase?: "before" | "after" };
  readonly conversations: readonly Conversation[];
}

export interface WireInput {
  readonly captures: readonly WireCapture[];
  readonly podCidrs: readonly Cidr[];
  readonly nodeAddresses: readonly Ip[];
  /** The destination in question; absent: every conversation leaving the pod and node ranges. */
  readonly dest?: { readonly ip: Ip; readonly port?: number };
  /** Pod addresses known individually (e.g. from pod status), beyond the pod CIDRs. */
  readonly podIps?: readonly Ip[];
  /** The fix and next steps in the words of the pod source's owner, when it is not ip-masq-agent. */
  readonly ownerWording?: { readonly fix: string; readonly next: readonly string[] };
}

type SourceClass = "pod" | "node";

/** One capture's view of one source address talking to one destination. */
interface Observation {
  readonly capture: WireCapture;
  readonly src: Ip;
  readonly dst: Ip;
  readonly cls: SourceClass;
  readonly conversations: readonly Conversation[];
  readonly replied: boolean;
  readonly first: PacketRef;
  readonly firstReply?: PacketRef;
  /** The packets were seen leaving (direction out, or a far-side capture), or direction unknown. */
  readonly leaving: "seen-leaving" | "far-side" | "unknown-direction" | "arriving-only";
  /**
   * What the copies of its packets say: `before-nat` — the pod side of a translated pair (the
   * packet left with another address); `translated-pod` — the node address on the wire as the
   * translation of a pod's packet; `unpaired` — nothing paired, or copies not rewritten.
   */
  readonly origin: "before-nat" | "translated-pod" | "unpaired";
}

const same = (a: Ip, b: Ip) => a.family === b.family && a.value === b.value;

function classify(ip: Ip, input: WireInput): SourceClass | undefined {
  if (input.nodeAddresses.some((n) => same(n, ip))) return "node";
  if (input.podIps?.some((p) => same(p, ip)) || input.podCidrs.some((c) => contains(c, ip)))
    return "pod";
  return undefined;
}

function isDestination(c: Conversation, input: WireInput): boolean {
  const d = input.dest;
  if (d !== undefined) {
    if (!same(c.responder.ip, d.ip)) return false;
    return d.port === undefined || c.responder.port === undefined || c.responder.port === d.port;
  }
  // Without a destination: anything leaving the cluster's pod and node addresses.
  return classify(c.responder.ip, input) === undefined;
}

function leavingOf(c: WireCapture, convs: readonly Conversation[]): Observation["leaving"] {
  if (c.meta?.point?.startsWith("remote/")) return "far-side";
  const seen = convs.flatMap((x) => x.seenOn);
  if (seen.length === 0) return "unknown-direction";
  if (seen.some((s) => / out$/.test(s) || s === "out")) return "seen-leaving";
  // pcapng/tcpdump -i any on a node: "in" on a veth is the pod handing the packet to the node.
  return "arriving-only";
}

function earliest(refs: readonly PacketRef[]): PacketRef | undefined {
  return [...refs].sort((a, b) => a.index - b.index)[0];
}

/** What the copies say about a conversation (see {@link Observation.origin}). */
function originOf(c: Conversation, input: WireInput): Observation["origin"] {
  const t = c.translation;
  if (t === undefined) return "unpaired";
  if (t.side === "before") return "before-nat";
  if (t.source !== undefined && classify(t.source.from.ip, input) === "pod")
    return "translated-pod";
  return "unpaired";
}

function observe(input: WireInput): Observation[] {
  const out: Observation[] = [];
  for (const cap of input.captures) {
    const groups = new Map<string, { origin: Observation["origin"]; convs: Conversation[] }>();
    for (const c of cap.conversations) {
      if (!isDestination(c, input)) continue;
      if (classify(c.initiator.ip, input) === undefined) continue;
      const origin = originOf(c, input);
      const k = `${c.initiator.ip.value}|${c.responder.ip.value}|${origin}`;
      const g = groups.get(k);
      if (g) g.convs.push(c);
      else groups.set(k, { origin, convs: [c] });
    }
    for (const { origin, convs } of groups.values()) {
      const c0 = convs[0]!;
      const replied = convs.some((c) => c.replied);
      const firstReply = convs
        .map((c) => c.firstReply)
        .filter((r): r is PacketRef => r !== undefined)
        .sort((a, b) => a.index - b.index)[0];
      out.push({
        capture: cap,
        src: c0.initiator.ip,
        dst: c0.responder.ip,
        cls: classify(c0.initiator.ip, input)!,
        conversations: convs,
        replied,
        // The packet that left (outgoing on the node) is the evidence, not its copy on the veth.
        first: earliest(convs.map((c) => c.firstLeaving ?? c.first))!,
        ...(firstReply === undefined ? {} : { firstReply }),
        leaving: leavingOf(cap, convs),
        origin,
      });
    }
  }
  return out;
}

function where(o: Observation): string {
  const point = o.capture.meta?.point ?? "capture point not stated";
  const phase = o.capture.meta?.phase === undefined ? "" : `, ${o.capture.meta.phase}`;
  return `${o.capture.file} (${point}${phase})`;
}

function describe(o: Observation): string {
  const c = o.conversations[0]!;
  const port = c.responder.port === undefined ? "" : `:${c.responder.port}`;
  const verdicts = [...new Set(o.conversations.map((x) => x.verdict))].join(" | ");
  const n = o.conversations.length;
  const what =
    o.origin === "before-nat"
      ? `${o.cls} address as it reached the node, before its NAT`
      : o.origin === "translated-pod"
        ? `${o.cls} address, the node's translation of a pod's packets`
        : `${o.cls} address`;
  return (
    `${where(o)}, ${o.first.ref.text}: source ${formatIp(o.src)} → ${formatIp(o.dst)}${port} ` +
    `(${what}; ${n} conversation${n === 1 ? "" : "s"}: ${verdicts})`
  );
}

/** `packets 7 and 8 (ifindex 3 in, then ifindex 2 out)`; the places only where the capture says. */
function pairWithPlaces(pair: CopyRefs): string {
  const place = (r: PacketRef) => [r.iface, r.direction].filter(Boolean).join(" ");
  const a = place(pair.first);
  const b = place(pair.again);
  const where = a === "" || b === "" ? "" : ` (${a}, then ${b})`;
  return `${packetPair(pair.first, pair.again)}${where}`;
}

function pairEvidence(file: string, pair: CopyRefs, first: string, again: string): Evidence[] {
  return [
    { file, line: pair.first.ref.line, text: `${pair.first.ref.text}: ${first}` },
    { file, line: pair.again.ref.line, text: `${pair.again.ref.text}: ${again}` },
  ];
}

/** Evidence without repeating a line already cited. */
function addEvidence(list: Evidence[], more: readonly Evidence[]): Evidence[] {
  const seen = new Set(list.map((e) => `${e.file}:${e.line}`));
  for (const e of more) {
    const k = `${e.file}:${e.line}`;
    if (seen.has(k)) continue;
    seen.add(k);
    list.push(e);
  }
  return list;
}

/** The unchanged copies of a pod's packet: the node forwarded it with the pod address. */
function untranslatedCopies(o: Observation): { text: string; evidence: Evidence[] } | undefined {
  const c = o.conversations.find((x) => x.copies !== undefined);
  if (c?.copies === undefined) return undefined;
  const { pair, basis, ipId } = c.copies;
  const src = formatIp(o.src);
  const by =
    basis === "id"
      ? ` (${describeBasis(basis, ipId)}: the capture does not say on which interface each copy was seen)`
      : "";
  return {
    text:
      ` The same packet is on this capture as it reached the node and again as it went on, ${pairWithPlaces(pair)}${by}, ` +
      `with the pod address ${src} both times: the node did not masquerade it.`,
    evidence: pairEvidence(
      o.capture.file,
      pair,
      `${src} → ${formatIp(o.dst)} as it reached the node`,
      `the same packet again, source still ${src}`,
    ),
  };
}

/** The translation a node-address observation shows, as people read it, with its packets. */
function translationNote(
  o: Observation,
  input: WireInput,
): { text: string; evidence: Evidence[]; t: Translation } | undefined {
  const t = o.conversations.find((x) => x.translation?.source !== undefined)?.translation;
  if (t?.source === undefined) return undefined;
  const point = o.capture.meta?.point;
  const at =
    point === undefined ? "on the capturing host (its point is not stated)" : `on ${point}`;
  const from = formatIp(t.source.from.ip);
  const to = formatIp(t.source.to.ip);
  const kind = (ip: typeof t.source.to.ip) => classify(ip, input) ?? "other";
  const pair = t.request ?? t.reply;
  const packets = pair === undefined ? "" : ` (${packetPair(pair.first, pair.again)})`;
  const by =
    t.basis === "id"
      ? ` The copies were ${describeBasis(t.basis, t.ipId)}: the capture does not say on which interface each was seen.`
      : "";
  const evidence: Evidence[] = [];
  if (t.request !== undefined)
    evidence.push(
      ...pairEvidence(
        o.capture.file,
        t.request,
        `${from} → ${formatIp(o.dst)} as it reached the node`,
        `the same packet leaving as ${to} → ${formatIp(o.dst)}`,
      ),
    );
  if (t.reply !== undefined)
    evidence.push(
      ...pairEvidence(
        o.capture.file,
        t.reply,
        `reply from ${formatIp(o.dst)} to ${to}`,
        `the same reply handed back to ${from}`,
      ),
    );
  return {
    text: `${kind(t.source.from.ip)} address ${from} → ${kind(t.source.to.ip)} address ${to} ${at}${packets}.${by}`,
    evidence,
    t,
  };
}

function sideBySide(all: readonly Observation[], dst: Ip): string {
  const mine = all.filter((o) => same(o.dst, dst));
  if (mine.length === 0) return "";
  return `\nSource address toward ${formatIp(dst)}, as each capture saw it:\n${mine
    .map((o) => `  - ${describe(o)}`)
    .join("\n")}`;
}

function evidenceOf(o: Observation): Evidence[] {
  const ev: Evidence[] = [
    {
      file: o.capture.file,
      line: o.first.ref.line,
      text: `${o.first.ref.text}: ${formatIp(o.src)} → ${formatIp(o.dst)}`,
    },
  ];
  if (o.firstReply !== undefined)
    ev.push({
      file: o.capture.file,
      line: o.firstReply.ref.line,
      text: `${o.firstReply.ref.text}: reply from ${formatIp(o.dst)}`,
    });
  return ev;
}

/**
 * The wire findings for every capture. Pure: conversations in, findings out.
 *
 * @example
 * wireFindings({ captures: [{ file: "captures/node.pcap", meta: { point: "node/gke-a-1" },
 *   conversations }], podCidrs: [parseCidr("10.4.0.0/14")], nodeAddresses: [parseIp("10.128.0.20")],
 *   dest: { ip: parseIp("10.20.30.40"), port: 5432 } });
 */
export function wireFindings(input: WireInput): Finding[] {
  const all = observe(input);
  const findings: Finding[] = [];
  for (const o of all) {
    const subject = `flow/${formatIp(o.src)}->${formatIp(o.dst)}`;
    const table = sideBySide(all, o.dst);
    if (o.cls === "pod") {
      const found = podSourceFinding(o, input, subject, table);
      if (found) findings.push(found);
      continue;
    }
    if (o.origin === "translated-pod") {
      findings.push(translatedFinding(o, input, subject, table));
      continue;
    }
    findings.push(nodeSourceFinding(o, all, subject, table));
  }
  return findings;
}

/**
 * The finding for a node address on the wire: a pod's packet after masquerade or the node's own
 * traffic, with or without a reply.
 */
function nodeSourceFinding(
  o: Observation,
  all: readonly Observation[],
  subject: string,
  table: string,
): Finding {
  // Node address: a pod's packet after masquerade, or the node's own traffic. On a node capture
  // that records directions, the pod's copy arriving from its veth tells the two apart.
  const podCopy = all.some(
    (x) =>
      x.capture === o.capture &&
      x.cls === "pod" &&
      same(x.dst, o.dst) &&
      x.leaving === "arriving-only" &&
      x.origin === "unpaired",
  );
  const directional = o.leaving === "seen-leaving" || o.leaving === "arriving-only";
  const origin = podCopy
    ? "the pod's packets arrive from the pod with its own address and leave with the node address: masquerade is applied"
    : directional
      ? "no pod packet toward this destination is on this capture, so this is the node's own traffic (a node can reach the far side even when its pods cannot), not evidence about the pods' path"
      : "the node address as source: the pod's packet after masquerade, or the node's own traffic";
  if (o.replied) {
    return {
      id: "masq/wire-node-source",
      severity: "info",
      title: `Requests to ${formatIp(o.dst)} leave with the node address ${formatIp(o.src)} and replies come back`,
      subject,
      explanation:
        `The wire shows ${origin}; the far side answered (${o.firstReply?.ref.text ?? "reply seen"}). ` +
        (podCopy || !directional
          ? "After a masquerade fix this is the healthy sign; record this line in the change record."
          : "") +
        table,
      evidence: evidenceOf(o),
      next: [],
    };
  } else {
    return {
      id: "masq/reply-missing",
      severity: "error",
      title: `Requests leave translated (${formatIp(o.src)} → ${formatIp(o.dst)}) and no reply returns`,
      subject,
      explanation:
        `The request carries the node address, so masquerade did its job; no reply came back. ` +
        `That is a routing or firewall problem on the far side (a route back to the node range, an allowlist), not masquerade.` +
        table,
      evidence: evidenceOf(o),
      next: [
        `tcpdump -ni any host ${formatIp(o.dst)}   # on the far side: does ${formatIp(o.src)} arrive, does a reply leave?`,
        "check remote/*.yaml: routesBack and allowlists must include the node range",
      ],
    };
  }
}

/**
 * The finding for a pod address on the wire: untranslated, with or without a reply; undefined for
 * the pod's copy before masquerade.
 */
function podSourceFinding(
  o: Observation,
  input: WireInput,
  subject: string,
  table: string,
): Finding | undefined {
  const phase = o.capture.meta?.phase;
  // A pod address only arriving from the pod's veth is the packet before masquerade; so is
  // the pod's copy of a pair whose other copy left with another address.
  if (o.leaving === "arriving-only" || o.origin === "before-nat") return undefined;
  const copies = o.leaving === "far-side" ? undefined : untranslatedCopies(o);
  const assumed =
    o.leaving === "unknown-direction" && copies === undefined
      ? " The capture does not record directions; the packet is taken to be leaving toward the destination (a node capture with -i any also shows the pod's packet on its veth before masquerade: check for the same request with the node address)."
      : "";
  const seenAt =
    o.leaving === "far-side" ? "arrived at the far side" : "left toward the destination";
  const afterNote =
    phase === "after"
      ? " This capture is marked phase: after — the pod address still on the wire means the rules never changed (is the agent running on this node, did it reload?)."
      : "";
  return {
    id: "masq/wire-pod-source",
    severity: o.replied ? "info" : "error",
    title: o.replied
      ? `The pod address ${formatIp(o.src)} reaches ${formatIp(o.dst)} untranslated, and replies come back`
      : `The pod address ${formatIp(o.src)} leaves toward ${formatIp(o.dst)} untranslated and no reply returns`,
    subject,
    explanation:
      `The wire shows the request with the pod's own source address: it ${seenAt} without masquerade, ` +
      (o.replied
        ? `and the far side answered (${o.firstReply?.ref.text ?? "reply seen"}): it routes the pod range back.`
        : "and nothing came back. The far side (or the VPN's traffic selectors) has no route back to the pod range: " +
          "this closes the case — neither the tunnel nor the CNI is at fault. Either masquerade this destination " +
          `${input.ownerWording?.fix ?? "(narrow the ip-masq-agent exception list)"} or teach the far side a route back to the pod range.`) +
      (copies?.text ?? "") +
      assumed +
      afterNote +
      table,
    evidence: addEvidence(evidenceOf(o), copies?.evidence ?? []),
    next: o.replied
      ? []
      : [
          ...(input.ownerWording?.next ?? [
            "kubectl -n kube-system get configmap ip-masq-agent -o yaml",
            "podpath plan masquerade <snapshot>",
          ]),
          `tcpdump -ni any host ${formatIp(o.dst)}   # on the far side: does ${formatIp(o.src)} arrive, does a reply leave?`,
        ],
  };
}

/**
 * A pod's packets seen on both sides of the node, the source rewritten to the node address: the
 * masquerade itself, with both packets. Replies are the translated conversation's (they come back
 * to the node address first); whether they reached the pod is its peer's.
 */
function translatedFinding(
  o: Observation,
  input: WireInput,
  subject: string,
  table: string,
): Finding {
  const note = translationNote(o, input)!;
  const pod = formatIp(note.t.source!.from.ip);
  const node = formatIp(o.src);
  const dst = formatIp(o.dst);
  const toPod = note.t.peer;
  // the pair first (as it reached the node, as it left), then the first reply and its copy
  const evidence = addEvidence([...note.evidence], evidenceOf(o));
  const head = `The same packets are on this capture on both sides of the node's NAT: ${note.text}`;
  if (o.replied) {
    const delivered = toPod.replied
      ? ` The replies went back to the pod as ${dst} → ${pod} (${toPod.firstReply?.ref.text ?? "reply seen"}).`
      : ` None of the replies is seen going back to the pod (${pod}): they reached the node and stopped there (conntrack, a policy, or a capture filter).`;
    return {
      id: "masq/wire-node-source",
      severity: "info",
      title: `The pod address ${pod} leaves toward ${dst} as the node address ${node}, and replies come back`,
      subject,
      explanation:
        `${head} Masquerade is applied; the far side answered the node address (${o.firstReply?.ref.text ?? "reply seen"}).` +
        delivered +
        " After a masquerade fix this is the healthy sign; record this line in the change record." +
        table,
      evidence,
      next: [],
    };
  }
  return {
    id: "masq/reply-missing",
    severity: "error",
    title: `The pod address ${pod} leaves toward ${dst} as the node address ${node}, and no reply returns`,
    subject,
    explanation:
      `${head} Masquerade did its job; no reply came back to the node address. ` +
      `That is a routing or firewall problem on the far side (a route back to the node range, an allowlist), not masquerade.` +
      table,
    evidence,
    next: [
      `tcpdump -ni any host ${dst}   # on the far side: does ${node} arrive, does a reply leave?`,
      "check remote/*.yaml: routesBack and allowlists must include the node range",
    ],
  };
}
