/**
 * @module cases/vpn/hops — the outward walk of DESIGN.md case B over probe results: the probes
 * grouped by the hop they test (peer → pod IP → Service VIP → public target; names apart; which hop
 * a probe tests is `evidence/probe-role`), whether each hop answered, and the first hop that stayed
 * silent with the layer it names.
 */

import { DNS_TOOLS, type ProbeRoleContext, probeRole } from "../../evidence/probe-role.ts";
import type { ProbeCommand, ProbeRole, ProbeTranscript } from "../../evidence/probes.ts";

/** The order of the walk; names are judged apart (they test DNS, not a hop). */
export const HOP_ORDER = [
  "peer",
  "pod-ip",
  "service-ip",
  "public",
] as const satisfies readonly ProbeRole[];
export type Hop = (typeof HOP_ORDER)[number];

/** What each hop's silence points at. */
export const LAYER_OF: {
  readonly [H in Hop]: { readonly layer: string; readonly explain: string };
} = {
  peer: {
    layer: "tunnel",
    explain:
      "the tunnel itself: the client's connection to the VPN server, its tun device or the route to the server's tunnel address",
  },
  "pod-ip": {
    layer: "vpn-pod-forwarding",
    explain:
      "forwarding inside the VPN pod's network namespace (net.ipv4.ip_forward there) or the return path to the client pool (masquerade or a route back)",
  },
  "service-ip": {
    layer: "service",
    explain:
      "the Service layer: the Service range not pushed to clients, kube-proxy's translation, or the Service's endpoints",
  },
  public: {
    layer: "egress",
    explain:
      "egress from the cluster to public addresses: the cluster's NAT for outbound traffic, or the client not sending it through the tunnel",
  },
};

export type HopState = "answered" | "silent" | "error";

/** How a probe result reads as a hop: answered (anything came back from the target's side). */
export function hopState(c: ProbeCommand): HopState {
  switch (c.result) {
    case "replies":
    case "ok":
    case "refused": // a RST came back: the path works up to the target
    case "nxdomain": // the DNS server answered
      return "answered";
    case "timeout":
    case "no-server":
      return "silent";
    default:
      return "error";
  }
}

/** The addresses the walk places probe targets among. */
export type HopContext = ProbeRoleContext;

export interface HopResult {
  readonly hop: Hop;
  readonly state: HopState;
  /** The probes of this hop; the deciding one first. */
  readonly commands: readonly ProbeCommand[];
}

export interface Walk {
  readonly hops: readonly HopResult[];
  /** The first hop (in walk order) that did not answer, and the last one that did before it. */
  readonly firstFailed?: HopResult;
  readonly lastAnswered?: HopResult;
  readonly names: readonly ProbeCommand[];
  /** Names probed with a non-DNS tool but failing at resolution (curl (6), ping unknown host). */
  readonly nameFailures: readonly ProbeCommand[];
}

function isNameFailure(c: ProbeCommand): boolean {
  if (DNS_TOOLS.has(c.tool)) return c.result !== "ok";
  return c.targetIp === undefined && (c.result === "nxdomain" || c.result === "no-server");
}

/** Groups probes by hop. A hop answered when any of its probes did. */
export function walkHops(transcripts: readonly ProbeTranscript[], ctx: HopContext): Walk {
  const byHop = new Map<Hop, ProbeCommand[]>();
  const names: ProbeCommand[] = [];
  for (const t of transcripts) {
    for (const c of t.commands) {
      const role = probeRole(c, ctx);
      if (role === undefined) continue;
      if (role === "name") {
        names.push(c);
        continue;
      }
      // a name that resolved and was then probed tests the hop of its address
      if (c.targetIp === undefined && (c.result === "nxdomain" || c.result === "no-server")) {
        names.push(c);
        continue;
      }
      const list = byHop.get(role) ?? [];
      list.push(c);
      byHop.set(role, list);
    }
  }
  const hops: HopResult[] = [];
  for (const hop of HOP_ORDER) {
    const cmds = byHop.get(hop);
    if (!cmds || cmds.length === 0) continue;
    const answered = cmds.find((c) => hopState(c) === "answered");
    const silent = cmds.find((c) => hopState(c) === "silent");
    const state: HopState = answered ? "answered" : silent ? "silent" : "error";
    const first = answered ?? silent ?? cmds[0]!;
    hops.push({ hop, state, commands: [first, ...cmds.filter((c) => c !== first)] });
  }
  const idx = hops.findIndex((h) => h.state !== "answered");
  const firstFailed = idx >= 0 ? hops[idx] : undefined;
  const lastAnswered = idx > 0 ? hops[idx - 1] : idx < 0 ? hops.at(-1) : undefined;
  return {
    hops,
    ...(firstFailed ? { firstFailed } : {}),
    ...(lastAnswered ? { lastAnswered } : {}),
    names,
    nameFailures: names.filter(isNameFailure),
  };
}
