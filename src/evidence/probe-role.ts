/**
 * @module evidence/probe-role — which hop of the outward walk (DESIGN.md case B) a probe tests:
 * the transcript's own `# role` comment, else its target placed among the addresses the evidence
 * knows (the VPN server's tunnel address, Service cluster IPs, pod ranges, the ranges pushed to
 * clients); names and DNS tools test names; a private address nothing places stays unplaced.
 */
import type { Located } from "../model/types.ts";
import { type Cidr, contains, type Ip, overlaps } from "../net/cidr.ts";
import type { ProbeCommand, ProbeRole } from "./probes.ts";

/** The addresses a probe's target is placed among. */
export interface ProbeRoleContext {
  /** The VPN server's tunnel address, when known. */
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

/** The tools that test name resolution only. */
export const DNS_TOOLS: ReadonlySet<string> = new Set(["dig", "nslookup", "host", "resolve"]);

/**
 * The hop a probe tests: the transcript's own `# role` comment, else from its target. DNS lookups
 * and probes of names test the name layer; `ip route` tests nothing; undefined when the target is
 * a private address the context does not place.
 */
export function probeRole(c: ProbeCommand, ctx: ProbeRoleContext): ProbeRole | undefined {
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
