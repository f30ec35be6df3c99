/**
 * @module cases/masquerade/remote-allowlist — the far side's firewall allowlists (`remote/*.yaml`)
 * toward one destination, and whether they admit the source address a flow arrives with. An
 * allowlist applies when its destinations hold the address (or it names none) and its ports hold
 * the flow's (or it names none); when some apply and none of their sources holds the arriving
 * address, the firewall drops the flow: `masq/remote-allowlist-rejects`. No allowlist toward the
 * destination says nothing (the site file does not describe that firewall).
 */
import type { PacketRef } from "../../capture/conversation.ts";
import type { Allowlist, PortEntry, RemoteSite } from "../../evidence/remote-site.ts";
import { type Finding, refToEvidence } from "../../model/types.ts";
import { type Cidr, contains, formatCidr, formatIp, type Ip, sameIp } from "../../net/cidr.ts";
import type { TracedDestination } from "./destinations.ts";
import type { WireCapture } from "./wire-findings.ts";

/**
 * The first reply any capture shows from `target` to `source` (for TCP, the SYN-ACK): proof on
 * the wire that the far side's firewall let that source through, whatever the site file says.
 */
export function answeredOnWire(
  captures: readonly WireCapture[],
  target: TracedDestination,
  source: Ip,
): PacketRef | undefined {
  for (const cap of captures) {
    for (const c of cap.conversations) {
      if (!sameIp(c.initiator.ip, source) || !sameIp(c.responder.ip, target.ip)) continue;
      if (target.port !== undefined && c.responder.port !== target.port) continue;
      const answered = c.protocol === "tcp" ? (c.tcp?.synAckCount ?? 0) > 0 : c.replied;
      if (answered && c.firstReply) return c.firstReply;
    }
  }
  return undefined;
}

const portHolds = (p: PortEntry, target: TracedDestination): boolean =>
  p.protocol === "all" ||
  (p.protocol === target.protocol &&
    (p.from === undefined || target.port === undefined
      ? true
      : p.from <= target.port && target.port <= (p.to ?? p.from)));

/** The allowlists of `site` that apply to flows toward `target`. */
export function allowlistsToward(site: RemoteSite, target: TracedDestination): Allowlist[] {
  return site.allowlists.filter(
    (a) =>
      a.sources.length > 0 &&
      (a.destinations.length === 0 || a.destinations.some((d) => contains(d.cidr, target.ip))) &&
      (a.ports.length === 0 || a.ports.some((p) => portHolds(p, target))),
  );
}

/** How the far side's allowlists take a flow from `source` toward `target`. */
export type AllowlistVerdict =
  | { readonly kind: "none" }
  | { readonly kind: "admits"; readonly by: Allowlist }
  | {
      readonly kind: "rejects";
      readonly allowlists: readonly Allowlist[];
      /** Every source the allowlists admit. */
      readonly admitted: readonly Cidr[];
    };

export function allowlistVerdict(
  site: RemoteSite,
  target: TracedDestination,
  source: Ip,
): AllowlistVerdict {
  const lists = allowlistsToward(site, target);
  if (lists.length === 0) return { kind: "none" };
  const by = lists.find((a) => a.sources.some((s) => contains(s.cidr, source)));
  if (by) return { kind: "admits", by };
  return {
    kind: "rejects",
    allowlists: lists,
    admitted: lists.flatMap((a) => a.sources.map((s) => s.cidr)),
  };
}

/**
 * `masq/remote-allowlist-rejects`: pod traffic to `target` arrives at `site` from `wireSource`
 * (the node's address, once masqueraded), and the site's allowlists toward it admit only other
 * sources (the pod range, typically): the firewall drops the request.
 */
export function allowlistRejectsFinding(
  site: RemoteSite,
  target: TracedDestination,
  podIp: Ip,
  wireSource: Ip,
  verdict: Extract<AllowlistVerdict, { kind: "rejects" }>,
  answered?: PacketRef,
): Finding {
  const dstText = `${formatIp(target.ip)}${target.port ? `:${target.port}` : ""}`;
  const admitted = verdict.admitted.map(formatCidr).join(", ");
  const names = verdict.allowlists.map((a) => a.name).join(", ");
  const podAdmitted = verdict.admitted.some((c) => contains(c, podIp));
  const listed = verdict.allowlists.flatMap((a) => [
    refToEvidence(a.source),
    ...a.sources.map((s) => refToEvidence(s.source)),
  ]);
  if (answered) {
    // the wire outranks the description: the request got through
    const at = `${answered.ref.file}:${answered.ref.line}`;
    return {
      id: "masq/remote-allowlist-rejects",
      severity: "warning",
      title: `${site.name}'s allowlist ${names} does not admit ${formatIp(wireSource)} to ${dstText}, but the wire shows it answered`,
      subject: `remote/${site.name}`,
      explanation:
        `${site.source.file} says the firewall allowlist ${names} toward ${dstText} admits only ${admitted}, so the traffic arriving from ${formatIp(wireSource)} would be dropped; ` +
        `but ${formatIp(target.ip)} answered ${formatIp(wireSource)} (${at}): what the site file describes is not what decides these packets, or it is out of date. ` +
        `The wire decides: the connection works today. Correct the site file, or find the firewall the file means before relying on it (it may drop the traffic once it is enforced).`,
      evidence: [refToEvidence(answered.ref), ...listed],
      next: [
        `show the firewall's rules for ${dstText}   # on the far side: which sources it admits`,
      ],
    };
  }
  return {
    id: "masq/remote-allowlist-rejects",
    severity: "error",
    title: `${site.name}'s allowlist ${names} does not admit ${formatIp(wireSource)} to ${dstText}`,
    subject: `remote/${site.name}`,
    explanation:
      `Pod traffic to ${dstText} arrives at ${site.name} from ${formatIp(wireSource)}, but the firewall allowlist ${names} toward it admits only ${admitted} (as ${site.source.file} describes it; no capture shows the request answered). ` +
      (podAdmitted
        ? `It admits the pod's own address (${formatIp(podIp)}), which masquerading now replaces with the node's: the request is dropped before it reaches ${dstText}. `
        : "The request is dropped before it reaches the destination. ") +
      `Fix: add the nodes' addresses (${formatIp(wireSource)}, or the node subnet) to the allowlist's sources, or keep pod identity toward ${formatIp(target.ip)} (exempt it again and teach the far side the pod range).`,
    evidence: listed,
    next: [
      `show the firewall's rules for ${dstText}   # on the far side: which sources it admits`,
      `tcpdump -ni any host ${formatIp(target.ip)}   # on the node: SYNs from ${formatIp(wireSource)} and no answer`,
    ],
  };
}
