/**
 * @module cases/vpn/paths — case B's traced paths: for each destination the client's probes tried
 * (pod IP, Service VIP, public target, the DNS server), client → tunnel → the VPN pod's forwarding
 * → its nat → the destination, drawn from the walk and the decisions `analyze.ts` made. The
 * source address is shown as it leaves each hop; a hop that rests on evidence cites its line.
 */

import type { ProbeCommand } from "../../evidence/probes.ts";
import type { SysctlEntry } from "../../evidence/sysctl.ts";
import {
  clusterFacts,
  podAddresses,
  podRangesOf,
  type ServiceAddress,
  serviceAddresses,
} from "../../k8s/cluster-facts.ts";
import type { PodView } from "../../k8s/objects.ts";
import type { PathHop, PathView } from "../../model/answer.ts";
import type { SourceRef } from "../../model/types.ts";
import { type Cidr, contains, formatCidr, formatIp, type Ip, sameIp } from "../../net/cidr.ts";
import type { VpnAnswer, VpnInput } from "./analyze.ts";
import { IP_FORWARD } from "./durable.ts";
import { type Hop, type HopResult, hopState, LAYER_OF } from "./hops.ts";
import type { VpnContext } from "./input.ts";
import { type MasqueradeVerdict, masqueradeOf } from "./masquerade.ts";

const DNS_TOOLS = new Set(["dig", "nslookup", "host", "resolve"]);
const TCP_TOOLS = new Set(["curl", "wget", "telnet", "tcp-connect"]);

const cmdText = (c: ProbeCommand) => `${c.command} → ${c.result}`;
const withEvidence = (r: SourceRef | undefined) => (r ? { evidence: r } : {});

/** One destination the probes tried: its hop in the walk (or the name layer) and its probes. */
interface Destination {
  readonly ip: Ip;
  readonly hop: Hop | "name";
  /** The deciding probe first: one that answered, else one that stayed silent. */
  readonly commands: readonly ProbeCommand[];
}

function decidingFirst(cmds: readonly ProbeCommand[]): ProbeCommand[] {
  const first =
    cmds.find((c) => hopState(c) === "answered") ??
    cmds.find((c) => hopState(c) === "silent") ??
    cmds[0]!;
  return [first, ...cmds.filter((c) => c !== first)];
}

function byTarget(cmds: readonly ProbeCommand[], ipOf: (c: ProbeCommand) => Ip | undefined) {
  const groups: { ip: Ip; commands: ProbeCommand[] }[] = [];
  for (const c of cmds) {
    const ip = ipOf(c);
    if (!ip) continue;
    const g = groups.find((x) => sameIp(x.ip, ip));
    if (g) g.commands.push(c);
    else groups.push({ ip, commands: [c] });
  }
  return groups;
}

/** The destinations in walk order, then the in-cluster DNS servers the lookups asked. */
function destinations(
  hops: readonly HopResult[],
  names: readonly ProbeCommand[],
  inCluster: (ip: Ip) => boolean,
): Destination[] {
  const out: Destination[] = [];
  for (const h of hops) {
    if (h.hop === "peer") continue;
    for (const g of byTarget(h.commands, (c) => c.targetIp)) {
      out.push({ ip: g.ip, hop: h.hop, commands: decidingFirst(g.commands) });
    }
  }
  const lookups = names.filter((c) => DNS_TOOLS.has(c.tool));
  for (const g of byTarget(lookups, (c) => c.dnsServer)) {
    if (inCluster(g.ip)) out.push({ ip: g.ip, hop: "name", commands: decidingFirst(g.commands) });
  }
  return out;
}

type DestState = PathHop["state"];

/** How the destination's probes read: a lookup answered when it resolved or the name is unknown. */
function destState(d: Destination): DestState {
  const c = d.commands[0]!;
  if (d.hop === "name") return c.result === "ok" || c.result === "nxdomain" ? "ok" : "stops";
  const s = hopState(c);
  if (s === "answered") return "ok";
  if (s === "silent" || c.result === "unreachable") return "stops";
  return "unknown";
}

function protocolOf(d: Destination): { protocol?: string; port?: number } {
  const c = d.commands[0]!;
  if (d.hop === "name") return { protocol: "udp", port: 53 };
  if (c.tool === "ping") return { protocol: "icmp" };
  const port = c.port === undefined ? {} : { port: c.port };
  return TCP_TOOLS.has(c.tool) ? { protocol: "tcp", ...port } : port;
}

/** `service/demo/web`, `pod/demo/web-0` (never a host-network pod: its address is its node's), else the address. */
function nameOf(facts: NamingFacts, ip: Ip): string {
  const svc = facts.services.find((s) => sameIp(s.ip, ip));
  if (svc) return `service/${svc.service.namespace}/${svc.service.name}`;
  const pod = facts.pods.find((p) => podAddresses(p).some((a) => sameIp(a.ip, ip)));
  return pod ? `pod/${pod.namespace}/${pod.name}` : formatIp(ip);
}

interface NamingFacts {
  readonly services: readonly ServiceAddress[];
  readonly pods: readonly PodView[];
}

/** The address a masquerading rule writes: SNAT's --to-source, else the pod's eth0 address. */
function rewrittenTo(v: MasqueradeVerdict, podIp: Ip | undefined): string | undefined {
  if (v.kind !== "masqueraded") return undefined;
  const to = v.source.text?.match(/--to-source\s+([0-9.]+)/)?.[1];
  if (to) return to;
  return podIp ? formatIp(podIp) : undefined;
}

/** What every path of one answer shares: who the client is, the tunnel and the pod's forwarding. */
interface Shared {
  readonly answer: VpnAnswer;
  readonly names: NamingFacts;
  readonly clientAt: string;
  readonly clientIp?: Ip;
  /** The client's address, or the pool it comes from. */
  readonly clientText?: string;
  readonly podAt: string;
  readonly peerHop?: HopResult;
  readonly peerIp?: Ip;
  /** The first hop past the peer that answered: the tunnel and the pod's forwarding work. */
  readonly anyAnswered?: HopResult;
  readonly unroutable: boolean;
  readonly sysctl?: SysctlEntry;
  readonly clientHop: PathHop;
  readonly tunnelHop: PathHop;
  readonly forwardHop: PathHop;
}

const sourceOf = (sh: { readonly clientText?: string }) =>
  sh.clientText ? { source: sh.clientText } : {};

function tunnelHopOf(
  sh: Pick<Shared, "peerHop" | "peerIp" | "anyAnswered" | "clientText">,
  ctx: VpnContext | undefined,
): PathHop {
  const at = `tunnel/${sh.peerIp ? formatIp(sh.peerIp) : "?"}`;
  if (sh.peerHop) {
    const c = sh.peerHop.commands[0]!;
    const ok = sh.peerHop.state === "answered";
    return {
      at,
      label: ok
        ? `the server's tunnel address answers (${cmdText(c)})`
        : `the server's tunnel address does not answer (${cmdText(c)})`,
      ...sourceOf(sh),
      state: ok ? "ok" : "stops",
      evidence: c.resultSource,
    };
  }
  if (sh.anyAnswered) {
    const c = sh.anyAnswered.commands[0]!;
    return {
      at,
      label: `carries packets: a destination past it answers (${cmdText(c)})`,
      ...sourceOf(sh),
      state: "ok",
      evidence: c.resultSource,
    };
  }
  return {
    at,
    label: "not probed: whether the tunnel carries packets is not known",
    ...sourceOf(sh),
    state: "unknown",
    ...withEvidence(ctx?.peer?.source),
  };
}

function forwardHopOf(
  sh: Pick<Shared, "answer" | "podAt" | "sysctl" | "anyAnswered" | "clientText">,
): PathHop {
  const { answer, podAt, sysctl } = sh;
  if (answer.forwarding === "off" && sysctl) {
    return {
      at: podAt,
      label: `${IP_FORWARD} = ${sysctl.value} in the pod's namespace: forwards nothing`,
      state: "stops",
      evidence: sysctl.source,
    };
  }
  if (answer.forwarding === "on" && sysctl) {
    return {
      at: podAt,
      label: `forwards from the tunnel to eth0 (${IP_FORWARD} = ${sysctl.value})`,
      ...sourceOf(sh),
      state: "ok",
      evidence: sysctl.source,
    };
  }
  if (sh.anyAnswered) {
    const c = sh.anyAnswered.commands[0]!;
    return {
      at: podAt,
      label: `forwards: a destination past it answers (${cmdText(c)}); ${IP_FORWARD} not read`,
      ...sourceOf(sh),
      state: "ok",
      evidence: c.resultSource,
    };
  }
  return {
    at: podAt,
    label: sysctl
      ? `${IP_FORWARD} = ${sysctl.value}: whether the pod forwards is not decided`
      : `${IP_FORWARD} in the pod's namespace not read: whether it forwards is not known`,
    ...sourceOf(sh),
    state: "unknown",
    ...withEvidence(sysctl?.source),
  };
}

/** The nat hop for one destination, and the source the destination sees. */
function natHop(sh: Shared, dst: Ip): { hop: PathHop; wire?: string } | undefined {
  const ctx = sh.answer.context;
  if (!ctx) return undefined;
  const { podAt } = sh;
  const dump = ctx.evidence?.iptables;
  if (!dump) {
    return {
      hop: {
        at: podAt,
        label: "nat POSTROUTING: the pod's iptables-save is not in the snapshot",
        state: "unknown",
      },
    };
  }
  const asked = sh.answer.masquerade;
  const src = sh.clientIp ?? asked?.src;
  if (!src) return undefined;
  const verdict =
    asked && sameIp(asked.src, src) && sameIp(asked.dst, dst)
      ? asked.verdict
      : masqueradeOf(dump, { src, dst, outIface: "eth0" });
  const srcText = sh.clientText ?? formatIp(src);
  switch (verdict.kind) {
    case "masqueraded": {
      const to = rewrittenTo(verdict, ctx.podIp?.value);
      return {
        hop: {
          at: podAt,
          label: `nat POSTROUTING rewrites the client's source${to ? ` to ${to}` : ""}`,
          ...(to ? { source: to } : {}),
          state: "changes",
          evidence: verdict.source,
        },
        ...(to ? { wire: to } : {}),
      };
    }
    case "not-masqueraded":
      return {
        hop: {
          at: podAt,
          label: `nat POSTROUTING: no rule rewrites the source; it leaves as ${srcText}`,
          source: srcText,
          state: "ok",
          ...withEvidence(verdict.last),
        },
        wire: srcText,
      };
    case "no-nat-table":
      return {
        hop: {
          at: podAt,
          label: `the pod's iptables-save shows no nat table: the source leaves as ${srcText}`,
          source: srcText,
          state: "ok",
          // the dump as a whole (empty, or without *nat) is the evidence
          evidence: { file: dump.file, line: 1 },
        },
        wire: srcText,
      };
    case "unknown":
      return {
        hop: {
          at: podAt,
          label: `nat POSTROUTING: not decided (${verdict.why})`,
          state: "unknown",
          evidence: verdict.source,
        },
      };
  }
}

/** The destination's own hop: it answers, stays silent, or the output says neither. */
function reachedHop(sh: Shared, d: Destination, wire: string | undefined): PathHop {
  const c = d.commands[0]!;
  const state = destState(d);
  const name = nameOf(sh.names, d.ip);
  return {
    at: d.hop === "name" ? `dns ${name}` : name,
    label:
      d.hop === "name"
        ? state === "ok"
          ? `answers the lookup (${cmdText(c)})`
          : `does not answer the lookup (${cmdText(c)})`
        : state === "ok"
          ? `answers (${cmdText(c)})`
          : state === "stops"
            ? `no answer comes back (${cmdText(c)})`
            : `${cmdText(c)}: the output shows neither an answer nor silence`,
    ...(wire ? { source: wire } : {}),
    state,
    evidence: c.resultSource,
  };
}

/** How a path that got past the pod ends, with what the evidence leaves open on the way. */
function reachedVerdict(
  sh: Shared,
  d: Destination,
  nat: { hop: PathHop; wire?: string } | undefined,
): string {
  const c = d.commands[0]!;
  const dstText = formatIp(d.ip);
  const state = destState(d);
  const wire = nat?.wire;
  const sees = wire ? ` sees ${wire} and` : "";
  let verdict: string;
  if (d.hop === "name") {
    verdict =
      state === "ok"
        ? `the DNS server ${dstText} answers the lookup through the tunnel`
        : `the DNS server ${dstText} does not answer the lookup (${cmdText(c)})`;
  } else if (state === "ok") {
    verdict = `${dstText}${sees} answers (${cmdText(c)})`;
  } else if (state === "unknown") {
    verdict = `${dstText}: not decided, ${cmdText(c)} shows neither an answer nor silence`;
  } else if (sh.unroutable && nat?.hop.state === "ok") {
    verdict = `${dstText}${sees} its replies have no way back: nothing masquerades or routes the client pool (${cmdText(c)})`;
  } else if (sh.anyAnswered) {
    verdict = `${dstText}${wire ? ` sees ${wire} but` : ""} gives no answer (${cmdText(c)}) while another destination answers: something particular to it drops the packet or its reply`;
  } else {
    verdict = `${dstText} gives no answer (${cmdText(c)}): look at ${LAYER_OF[d.hop].explain}`;
  }
  // what the evidence leaves open on the way makes the path undecided
  const open = [
    ...(sh.tunnelHop.state === "unknown" ? ["whether the tunnel carries packets"] : []),
    ...(sh.forwardHop.state === "unknown"
      ? [`whether the VPN pod forwards (${IP_FORWARD} not read)`]
      : []),
    ...(nat?.hop.state === "unknown" ? ["the source the destination sees"] : []),
  ];
  return open.length > 0 ? `${verdict}; not decided: ${open.join(", ")}` : verdict;
}

/** One destination's path: it stops at the tunnel, at the pod, or reaches the destination. */
function destinationPath(sh: Shared, d: Destination): PathView {
  const c = d.commands[0]!;
  const dstText = formatIp(d.ip);
  const hops: PathHop[] = [sh.clientHop, sh.tunnelHop];
  const base = { from: sh.clientAt, to: dstText, ...protocolOf(d) };
  if (sh.tunnelHop.state === "stops") {
    return {
      ...base,
      hops,
      verdict: `the tunnel does not answer (${sh.peerHop ? cmdText(sh.peerHop.commands[0]!) : "not probed"}), so ${dstText} is not reached`,
    };
  }
  hops.push(sh.forwardHop);
  if (sh.forwardHop.state === "stops") {
    return {
      ...base,
      hops,
      verdict: `stops at the VPN pod: ${IP_FORWARD} = ${sh.sysctl?.value ?? "0"} in its namespace, so ${dstText} is never reached (${cmdText(c)})`,
    };
  }
  const nat = natHop(sh, d.ip);
  if (nat) hops.push(nat.hop);
  const wire = nat?.wire;
  hops.push(reachedHop(sh, d, wire));
  return {
    ...base,
    hops,
    ...(wire && destState(d) !== "unknown" ? { sourceOnWire: wire } : {}),
    verdict: reachedVerdict(sh, d, nat),
  };
}

/** The client, tunnel and forwarding hops every path of the answer starts with. */
function sharedOf(input: VpnInput, answer: VpnAnswer, names: NamingFacts): Shared {
  const walk = answer.walk!;
  const ctx = answer.context;
  const peerHop = walk.hops.find((h) => h.hop === "peer");
  const client = input.probes.find((p) => p.client)?.client;
  const clientIp = client?.vpnAddress;
  const clientText = clientIp
    ? formatIp(clientIp)
    : ctx?.pool
      ? `an address in ${formatCidr(ctx.pool.value)}`
      : undefined;
  const peerIp = ctx?.peer?.value ?? peerHop?.commands[0]?.targetIp;
  const parts = {
    answer,
    names,
    clientAt: `client/${client?.name ?? "client"}`,
    ...(clientIp ? { clientIp } : {}),
    ...(clientText ? { clientText } : {}),
    podAt: ctx ? `pod/${ctx.namespace}/${ctx.name}` : "the VPN server",
    ...(peerHop ? { peerHop } : {}),
    ...(peerIp ? { peerIp } : {}),
    ...optional(
      "anyAnswered",
      walk.hops.find((h) => h.hop !== "peer" && h.state === "answered"),
    ),
    unroutable: answer.findings.some((f) => f.id === "vpn/client-pool-unroutable"),
    ...optional("sysctl", ctx?.evidence?.sysctl?.values.get(IP_FORWARD)),
  };
  const clientHop: PathHop = {
    at: parts.clientAt,
    label: "sends into the tunnel",
    ...sourceOf(parts),
    state: "ok",
    ...withEvidence(client?.source),
  };
  return {
    ...parts,
    clientHop,
    tunnelHop: tunnelHopOf(parts, ctx),
    forwardHop: forwardHopOf(parts),
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

/**
 * The paths of case B, one per destination the probes tried; none without probes. Decisions come
 * from `answer` (the walk, ip_forward, the nat verdict); only the nat question is asked again for
 * a destination or client address other than the one `analyze.ts` asked about.
 */
export function vpnPaths(input: VpnInput, answer: VpnAnswer): PathView[] {
  const walk = answer.walk;
  if (!walk) return [];
  const facts = clusterFacts(input.objects);
  const services = serviceAddresses(input.objects).value;
  const pushed: readonly Cidr[] = answer.context?.kind.pushedRoutes.map((r) => r.value) ?? [];
  const podRanges = podRangesOf(facts);
  const inCluster = (ip: Ip) =>
    services.some((s) => sameIp(s.ip, ip)) ||
    podRanges.some((r) => contains(r.value, ip)) ||
    pushed.some((r) => contains(r, ip));
  const dests = destinations(walk.hops, walk.names, inCluster);
  const peerHop = walk.hops.find((h) => h.hop === "peer");
  if (dests.length === 0 && !peerHop) return [];
  const sh = sharedOf(input, answer, { services, pods: facts.pods });
  if (dests.length === 0) {
    if (!sh.peerIp) return [];
    const c = peerHop!.commands[0]!;
    return [
      {
        from: sh.clientAt,
        to: formatIp(sh.peerIp),
        hops: [sh.clientHop, sh.tunnelHop],
        verdict:
          sh.tunnelHop.state === "ok"
            ? `the server's tunnel address ${formatIp(sh.peerIp)} answers (${cmdText(c)}); no probe tried a destination past it`
            : `the tunnel does not answer (${cmdText(c)})`,
      },
    ];
  }
  return dests.map((d) => destinationPath(sh, d));
}
