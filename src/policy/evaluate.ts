/**
 * @module policy/evaluate — Kubernetes NetworkPolicy semantics: a pod is isolated for a direction
 * when any policy of that type selects it; then only the union of those policies' rules is
 * allowed; a connection needs both the source's egress and the destination's ingress. Each verdict
 * cites the policies and rules (file and line) that decided it, in netpol-analyzer's words.
 *
 * ipBlock peers match external addresses. Whether they also match pod IPs is left to the network
 * plugin by Kubernetes (Calico and Cilium differ; netpol-analyzer says no): off by default,
 * `ipBlockMatchesPodIps` turns it on.
 *
 * Written here because no JavaScript library evaluates NetworkPolicy; the semantics follow the
 * Kubernetes API reference and are checked against netpol-analyzer's goldens (netpol-goldens.test.ts).
 */
import type { Diagnostic, SourceRef } from "../model/types.ts";
import { type Cidr, formatIp, type Ip, overlaps, tryParseIp } from "../net/cidr.ts";
import { adminTier } from "./admin-tier.ts";
import {
  ALL_CONNECTIONS,
  type ConnectionSet,
  connectionSet,
  formatConnections,
  hasPort,
  intersect,
  isEmpty,
  NO_CONNECTIONS,
  subtract,
  union,
} from "./connection-set.ts";
import { selectorMatches } from "./label-selector.ts";
import type {
  NetworkPolicy,
  PolicyObject,
  PolicyPeer,
  PolicyRule,
  Protocol,
} from "./network-policy.ts";
import {
  buildPolicyWorld,
  type Endpoint,
  type PodEndpoint,
  type PolicyWorld,
} from "./policy-world.ts";

export interface EvaluateOptions {
  /** Let ipBlock peers match pod IPs too (CNI-specific; default false). */
  readonly ipBlockMatchesPodIps?: boolean;
}

type Direction = "ingress" | "egress";
const Title: Record<Direction, string> = { ingress: "Ingress", egress: "Egress" };

/** One policy's part in a direction's verdict. */
export interface PolicyCitation {
  readonly policy: string;
  /** 1-based rule number when a rule is meant. */
  readonly rule?: number;
  readonly effect:
    | "allows"
    | "ports-do-not-match"
    | "selects-without-matching-rule"
    /** An AdminNetworkPolicy rule denied or passed it (see `text`). */
    | "denied-by-admin";
  readonly connections: ConnectionSet;
  readonly source: SourceRef;
  readonly text: string;
}

export interface DirectionVerdict {
  readonly direction: Direction;
  /** True when a policy of this type selects the pod on this side (default deny applies). */
  readonly isolated: boolean;
  readonly allowed: ConnectionSet;
  readonly citations: readonly PolicyCitation[];
}

export interface ConnectionsBetween {
  readonly connections: ConnectionSet;
  readonly egress: DirectionVerdict;
  readonly ingress: DirectionVerdict;
}

const inBlock = (peer: Extract<PolicyPeer, { kind: "ipBlock" }>, lo: Ip, hi: bigint): boolean => {
  const range: Cidr = { family: lo.family, start: lo.value, end: hi, prefix: 0 };
  if (peer.cidr.family !== lo.family) return false;
  if (!(peer.cidr.start <= lo.value && hi <= peer.cidr.end)) return false;
  return !peer.except.some((e) => overlaps(e, range));
};

function peerMatches(
  world: PolicyWorld,
  policy: NetworkPolicy,
  peer: PolicyPeer,
  ep: Endpoint,
  opts: EvaluateOptions,
): boolean {
  if (peer.kind === "ipBlock") {
    if (ep.kind === "external") return inBlock(peer, ep.ip, ep.end ?? ep.ip.value);
    return opts.ipBlockMatchesPodIps === true && ep.ips.some((ip) => inBlock(peer, ip, ip.value));
  }
  if (ep.kind !== "pod") return false;
  if (peer.namespaceSelector === undefined) {
    if (ep.namespace !== policy.namespace) return false;
  } else if (!selectorMatches(peer.namespaceSelector, world.namespaces.get(ep.namespace) ?? {})) {
    return false;
  }
  return peer.podSelector === undefined || selectorMatches(peer.podSelector, ep.labels);
}

/** The ports a rule opens towards `dst`; named ports resolve against dst's container ports. */
function rulePorts(rule: PolicyRule, dst: Endpoint): ConnectionSet {
  if (rule.ports === undefined) return ALL_CONNECTIONS;
  const parts: Record<Protocol, [number, number][]> = { TCP: [], UDP: [], SCTP: [] };
  for (const p of rule.ports) {
    if (p.port === undefined) parts[p.protocol].push([1, 65535]);
    else if (typeof p.port === "number") parts[p.protocol].push([p.port, p.endPort ?? p.port]);
    else if (dst.kind === "pod") {
      for (const cp of dst.ports) {
        if (cp.name === p.port && cp.protocol === p.protocol)
          parts[p.protocol].push([cp.port, cp.port]);
      }
    }
  }
  return connectionSet(parts);
}

function selects(policy: NetworkPolicy, direction: Direction, pod: Endpoint): pod is PodEndpoint {
  if (pod.kind !== "pod" || policy.namespace !== pod.namespace) return false;
  if (direction === "ingress" ? !policy.affectsIngress : !policy.affectsEgress) return false;
  return selectorMatches(policy.podSelector, pod.labels);
}

/** A peer as netpol-analyzer names it: `ns/workload[Kind]`, `a.b.c.d-e.f.g.h[External]`. */
const label = (ep: Endpoint): string =>
  ep.kind === "pod"
    ? `${ep.namespace}/${ep.workload.name}[${ep.workload.kind}]`
    : ep.end === undefined || ep.end === ep.ip.value
      ? `${formatIp(ep.ip)}[External]`
      : `${formatIp(ep.ip)}-${formatIp({ family: ep.ip.family, value: ep.end })}[External]`;

/**
 * One direction: AdminNetworkPolicies first (by priority), then the NetworkPolicies selecting the
 * pod on that side, then the BaselineAdminNetworkPolicy for what no NetworkPolicy isolates.
 */
export function directionVerdict(
  world: PolicyWorld,
  direction: Direction,
  src: Endpoint,
  dst: Endpoint,
  opts: EvaluateOptions = {},
): DirectionVerdict {
  const subject = direction === "ingress" ? dst : src;
  const peer = direction === "ingress" ? src : dst;
  if (subject.kind !== "pod") {
    return { direction, isolated: false, allowed: ALL_CONNECTIONS, citations: [] };
  }
  const citations: PolicyCitation[] = [];
  const admin = world.adminPolicies ?? [];
  const anp = adminTier(
    world,
    admin.filter((p) => p.kind === "AdminNetworkPolicy"),
    direction,
    subject,
    peer,
    dst,
    ALL_CONNECTIONS,
    citations,
    opts,
  );
  const rest = union(anp.undecided, anp.passed);
  const np = networkPolicyVerdict(world, direction, subject, peer, dst, opts);
  let allowed = anp.allowed;
  if (np.isolated) {
    allowed = union(allowed, intersect(rest, np.allowed));
    // NetworkPolicy only speaks for what the AdminNetworkPolicies left undecided or passed on
    for (const c of np.citations) {
      const part = intersect(c.connections, rest);
      if (!isEmpty(part)) citations.push({ ...c, connections: part });
    }
  } else {
    const banp = adminTier(
      world,
      admin.filter((p) => p.kind === "BaselineAdminNetworkPolicy"),
      direction,
      subject,
      peer,
      dst,
      rest,
      citations,
      opts,
    );
    allowed = union(allowed, union(banp.allowed, union(banp.passed, banp.undecided)));
    return { direction, isolated: anp.matched || banp.matched, allowed, citations };
  }
  return { direction, isolated: true, allowed, citations };
}

/** The NetworkPolicy tier alone: the policies selecting the pod, and what their rules allow. */
function networkPolicyVerdict(
  world: PolicyWorld,
  direction: Direction,
  subject: PodEndpoint,
  peer: Endpoint,
  dst: Endpoint,
  opts: EvaluateOptions,
): DirectionVerdict {
  const selecting = world.policies.filter((p) => selects(p, direction, subject));
  if (selecting.length === 0) {
    return { direction, isolated: false, allowed: ALL_CONNECTIONS, citations: [] };
  }
  let allowed = NO_CONNECTIONS;
  const citations: PolicyCitation[] = [];
  for (const policy of selecting) {
    const rules = direction === "ingress" ? policy.ingress : policy.egress;
    const id = `${policy.namespace}/${policy.name}`;
    let any = false;
    for (const rule of rules) {
      if (
        rule.peers !== undefined &&
        !rule.peers.some((x) => peerMatches(world, policy, x, peer, opts))
      ) {
        continue;
      }
      const ports = rulePorts(rule, dst);
      const n = rule.index + 1;
      any = true;
      if (!isEmpty(ports)) {
        allowed = union(allowed, ports);
        citations.push({
          policy: id,
          rule: n,
          effect: "allows",
          connections: ports,
          source: rule.source,
          text: `NetworkPolicy '${id}' allows connections by ${Title[direction]} rule #${n}`,
        });
      }
      const rest = subtract(ALL_CONNECTIONS, ports);
      const unresolvedNamedPorts =
        isEmpty(ports) && (rule.ports ?? []).some((p) => typeof p.port === "string");
      if (!isEmpty(rest)) {
        // the rule names the peer, but not these protocols and ports
        citations.push({
          policy: id,
          rule: n,
          effect: "ports-do-not-match",
          connections: rest,
          source: rule.source,
          text: `NetworkPolicy '${id}' selects ${label(subject)}, and ${Title[direction]} rule #${n} selects ${label(peer)}, but ${unresolvedNamedPorts ? "named ports of the rule have no match in the configuration of the destination peer" : "the protocols and ports do not match"}`,
        });
      }
    }
    if (!any) {
      citations.push({
        policy: id,
        effect: "selects-without-matching-rule",
        connections: NO_CONNECTIONS,
        source: policy.source,
        text: `NetworkPolicy '${id}' selects ${label(subject)}, but ${label(peer)} is not allowed by any ${Title[direction]} rule${rules.length === 0 ? " (no rules defined)" : ""}`,
      });
    }
  }
  // a policy that does not allow something only matters for what no other rule allows
  const deciding = citations.flatMap((c): PolicyCitation[] => {
    if (c.effect === "allows") return [c];
    const denied = subtract(
      c.effect === "selects-without-matching-rule" ? ALL_CONNECTIONS : c.connections,
      allowed,
    );
    return isEmpty(denied) ? [] : [{ ...c, connections: denied }];
  });
  return { direction, isolated: true, allowed, citations: deciding };
}

/** Everything src may open to dst: the source's egress intersected with the destination's ingress. */
export function connectionsBetween(
  world: PolicyWorld,
  src: Endpoint,
  dst: Endpoint,
  opts: EvaluateOptions = {},
): ConnectionsBetween {
  if (src === dst) {
    // a pod talking to itself never meets a policy (as netpol-analyzer's pod-to-pod map has it)
    const self: DirectionVerdict = {
      direction: "egress",
      isolated: false,
      allowed: ALL_CONNECTIONS,
      citations: [],
    };
    return {
      connections: ALL_CONNECTIONS,
      egress: self,
      ingress: { ...self, direction: "ingress" },
    };
  }
  const egress = directionVerdict(world, "egress", src, dst, opts);
  const ingress = directionVerdict(world, "ingress", src, dst, opts);
  return { connections: intersect(egress.allowed, ingress.allowed), egress, ingress };
}

/** An endpoint as callers name it: a pod (`ns/name`, or its workload's name), an IP, or a model. */
export type EndpointRef = Endpoint | string;

export interface FlowQuery {
  readonly from: EndpointRef;
  readonly to: EndpointRef;
  /** Absent: any port of the protocol. */
  readonly port?: number;
  /** Default TCP. */
  readonly protocol?: Protocol;
}

export interface PolicyVerdict {
  readonly allowed: boolean;
  readonly from: Endpoint;
  readonly to: Endpoint;
  readonly protocol: Protocol;
  readonly port?: number;
  /** Everything the pair may use, e.g. `TCP 8080`. */
  readonly connections: ConnectionSet;
  readonly egress: DirectionVerdict;
  readonly ingress: DirectionVerdict;
  /** netpol-analyzer-style explanation lines. */
  readonly explanation: readonly string[];
  readonly diagnostics: readonly Diagnostic[];
}

/** Thrown for an endpoint name that is neither a known pod nor an IP (caller misuse). */
export class EndpointError extends Error {
  override readonly name = "EndpointError";
  readonly code = "ERR_UNKNOWN_ENDPOINT";
}

export function resolveEndpoint(world: PolicyWorld, ref: EndpointRef): Endpoint {
  if (typeof ref !== "string") return ref;
  const ip = tryParseIp(ref);
  if (ip) {
    const pod = world.pods.find((p) =>
      p.ips.some((x) => x.family === ip.family && x.value === ip.value),
    );
    return pod ?? { kind: "external", ip };
  }
  const [ns, name] = ref.includes("/") ? ref.split("/", 2) : ["default", ref];
  const pod =
    world.pods.find((p) => p.namespace === ns && p.name === name) ??
    world.pods.find((p) => p.namespace === ns && p.workload.name === name);
  if (!pod)
    throw new EndpointError(
      `no pod or workload ${ns}/${name} in the manifests, and not an IP address`,
    );
  return pod;
}

function isWorld(x: unknown): x is PolicyWorld {
  return typeof x === "object" && x !== null && "policies" in x && "pods" in x && "namespaces" in x;
}

/**
 * May `from` reach `to` on `protocol`/`port` under the NetworkPolicies in `input` (manifest
 * objects or a prepared world)? Cites the deciding policies and rules.
 *
 * @example
 * evaluateNetworkPolicies(objects, { from: "default/frontend", to: "default/backend", port: 9090 })
 *   .allowed  // true, cited by "NetworkPolicy 'default/backend-netpol' allows connections by Ingress rule #1"
 */
export function evaluateNetworkPolicies(
  input: readonly PolicyObject[] | PolicyWorld,
  query: FlowQuery,
  opts: EvaluateOptions = {},
): PolicyVerdict {
  let world: PolicyWorld;
  let diagnostics: Diagnostic[] = [];
  if (isWorld(input)) world = input;
  else {
    const built = buildPolicyWorld(input);
    world = built.value;
    diagnostics = built.diagnostics;
  }
  const from = resolveEndpoint(world, query.from);
  const to = resolveEndpoint(world, query.to);
  const protocol = query.protocol ?? "TCP";
  const between = connectionsBetween(world, from, to, opts);
  const allowed =
    query.port === undefined
      ? between.connections[protocol].length > 0
      : hasPort(between.connections, protocol, query.port);
  const want = query.port === undefined ? protocol : `${protocol} ${query.port}`;
  const explanation: string[] = [
    `${label(from)} => ${label(to)} ${want}: ${allowed ? "allowed" : "denied"} (allowed between them: ${formatConnections(between.connections)})`,
  ];
  for (const v of [between.egress, between.ingress]) {
    const ok =
      query.port === undefined
        ? v.allowed[protocol].length > 0
        : hasPort(v.allowed, protocol, query.port);
    if (!v.isolated) {
      explanation.push(`${Title[v.direction]} (Allowed) due to the system default (Allow all)`);
      continue;
    }
    explanation.push(`${Title[v.direction]} (${ok ? "Allowed" : "Denied"})`);
    const covers = (c: ConnectionSet) =>
      query.port === undefined ? c[protocol].length > 0 : hasPort(c, protocol, query.port);
    for (const c of v.citations) {
      const shown = ok
        ? c.effect === "allows" && covers(c.connections)
        : c.effect === "selects-without-matching-rule" ||
          (c.effect !== "allows" && covers(c.connections));
      if (!shown) continue;
      const opens = v.citations.find(
        (x) => x.effect === "allows" && x.policy === c.policy && x.rule === c.rule,
      );
      const hint =
        c.effect === "ports-do-not-match" && opens
          ? ` (rule #${c.rule} opens ${formatConnections(opens.connections)})`
          : "";
      explanation.push(`  ${c.text}${hint} [${c.source.file}:${c.source.line}]`);
    }
  }
  return {
    allowed,
    from,
    to,
    protocol,
    ...(query.port === undefined ? {} : { port: query.port }),
    connections: between.connections,
    egress: between.egress,
    ingress: between.ingress,
    explanation,
    diagnostics,
  };
}
