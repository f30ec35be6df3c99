/**
 * @module cases/vpn/hops — the outward walk of DESIGN.md case B over probe results: which hop
 * (peer → pod IP → Service VIP → public target; names apart) each probe tests, whether the hop
 * answered, and the first hop that stayed silent with the layer it names.
 */

import type { ProbeCommand, ProbeRole, ProbeTranscript } from "../../evidence/probes.ts";
import type { Located } from "../../model/types.ts";
import { type Cidr, contains, type Ip, overlaps } from "../../net/cidr.ts";

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

export interface HopContext {
  readonly peer?: Ip;
  readonly podRanges: readonly Located<Cidr>[];
  readonly serviceIps: readonly Ip[];
  /** Ranges the server pushes to clients: addresses inside them are in-cluster. */
  readonly pushed: readonly Cidr[];
}

const PRIVATE: readonly Cidr[] = [
  { family: 4, start: 0x0a000000n, end: 0x0affffffn, prefix: 8 },
  { family: 4, start: 0xac100000n, end: 0xac1fffffn, prefix: 12 },
  { family: 4, start: 0xc0a80000n, end: 0xc0a8ffffn, prefix: 16 },
  { family: 4, start: 0x64400000n, end: 0x647fffffn, prefix: 10 },
];

const DNS_TOOLS = new Set(["dig", "nslookup", "host", "resolve"]);

/**
 * The hop a probe tests: the transcript's own `# role` comment, else from its target. DNS lookups
 * and probes of names test the name layer; `ip route` tests nothing.
 */
export function roleOf(c: ProbeCommand, ctx: HopContext): ProbeRole | undefined {
  if (c.role) return c.role;
  if (c.tool === "ip-route" || c.tool === "unknown") return undefined;
  if (DNS_TOOLS.has(c.tool)) return "name";
  const ip = c.target === undefined ? undefined : c.targetIp;
  if (ip === undefined) return c.target === undefined ? undefined : "name";
  if (ctx.peer && ip.family === ctx.peer.family && ip.value === ctx.peer.value) return "peer";
  if (ctx.serviceIps.some((s) => s.family === ip.family && s.value === ip.value))
    return "service-ip";
  if (ctx.podRanges.some((r) => contains(r.value, ip))) return "pod-ip";
  // A pushed route that covers the pod network makes its other addresses in-cluster too.
  const pushedPods = ctx.pushed.find((r) => contains(r, ip));
  if (pushedPods && ctx.podRanges.some((p) => overlaps(pushedPods, p.value))) return "pod-ip";
  if (PRIVATE.some((r) => contains(r, ip))) return undefined; // a private address we cannot place
  return "public";
}

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
      const role = roleOf(c, ctx);
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
