/**
 * @module cases/vpn/paths — case B's traced paths: for each destination the client's probes tried
 * (pod IP, Service VIP, public target, the DNS server), client → tunnel → the VPN pod's forwarding
 * → its nat → the destination, drawn from the walk and the decisions `analyze.ts` made. The
 * source address is shown as it leaves each hop; a hop that rests on evidence cites its line.
 */

import type { ProbeCommand } from "../../evidence/probes.ts";
import type { PathHop, PathView } from "../../model/answer.ts";
import type { SourceRef } from "../../model/types.ts";
import { type Cidr, contains, formatCidr, formatIp, type Ip, tryParseIp } from "../../net/cidr.ts";
import type { VpnAnswer, VpnInput } from "./analyze.ts";
import { IP_FORWARD } from "./durable.ts";
import { type Hop, type HopResult, hopState, LAYER_OF } from "./hops.ts";
import { clusterPodRanges, serviceIps } from "./input.ts";
import { type MasqueradeVerdict, masqueradeOf } from "./masquerade.ts";

const DNS_TOOLS = new Set(["dig", "nslookup", "host", "resolve"]);
const TCP_TOOLS = new Set(["curl", "wget", "telnet", "tcp-connect"]);

const sameIp = (a: Ip, b: Ip) => a.family === b.family && a.value === b.value;
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

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** `pod/demo/web-0`, `service/demo/web`, else the address. */
function nameOf(input: VpnInput, ip: Ip): string {
  const svc = serviceIps(input.objects).find((s) => sameIp(s.ip, ip));
  if (svc) return `service/${svc.service.namespace ?? "default"}/${svc.service.name}`;
  const pod = input.objects.find((o) => {
    if (o.kind !== "Pod") return false;
    const status = o.raw["status"];
    const podIp =
      typeof status === "object" && status !== null
        ? str((status as Record<string, unknown>)["podIP"])
        : undefined;
    const parsed = podIp === undefined ? undefined : tryParseIp(podIp);
    return parsed !== undefined && sameIp(parsed, ip);
  });
  return pod ? `pod/${pod.namespace ?? "default"}/${pod.name}` : formatIp(ip);
}

/** The address a masquerading rule writes: SNAT's --to-source, else the pod's eth0 address. */
function rewrittenTo(v: MasqueradeVerdict, podIp: Ip | undefined): string | undefined {
  if (v.kind !== "masqueraded") return undefined;
  const to = v.source.text?.match(/--to-source\s+([0-9.]+)/)?.[1];
  if (to) return to;
  return podIp ? formatIp(podIp) : undefined;
}

/**
 * The paths of case B, one per destination the probes tried; none without probes. Decisions come
 * from `answer` (the walk, ip_forward, the nat verdict); only the nat question is asked again for
 * a destination or client address other than the one `analyze.ts` asked about.
 */
export function vpnPaths(input: VpnInput, answer: VpnAnswer): PathView[] {
  const walk = answer.walk;
  if (!walk) return [];
  const ctx = answer.context;
  const pushed: readonly Cidr[] = ctx?.evidence?.openvpn?.pushedRoutes.map((r) => r.value) ?? [];
  const podRanges = clusterPodRanges(input.objects);
  const services = serviceIps(input.objects);
  const inCluster = (ip: Ip) =>
    services.some((s) => sameIp(s.ip, ip)) ||
    podRanges.some((r) => contains(r.value, ip)) ||
    pushed.some((r) => contains(r, ip));
  const dests = destinations(walk.hops, walk.names, inCluster);
  const peerHop = walk.hops.find((h) => h.hop === "peer");
  if (dests.length === 0 && !peerHop) return [];

  const transcript = input.probes.find((p) => p.client);
  const client = transcript?.client;
  const clientAt = `client/${client?.name ?? "client"}`;
  const clientIp = client?.vpnAddress;
  const clientText = clientIp
    ? formatIp(clientIp)
    : ctx?.pool
      ? `an address in ${formatCidr(ctx.pool.value)}`
      : undefined;
  const peerIp = ctx?.peer?.value ?? peerHop?.commands[0]?.targetIp;
  const podAt = ctx ? `pod/${ctx.namespace}/${ctx.name}` : "the VPN server";
  const anyAnswered = walk.hops.find((h) => h.hop !== "peer" && h.state === "answered");
  const unroutable = answer.findings.some((f) => f.id === "vpn/client-pool-unroutable");

  const clientHop: PathHop = {
    at: clientAt,
    label: "sends into the tunnel",
    ...(clientText ? { source: clientText } : {}),
    state: "ok",
    ...withEvidence(client?.source),
  };

  const tunnelHop = ((): PathHop => {
    const at = `tunnel/${peerIp ? formatIp(peerIp) : "?"}`;
    const src = clientText ? { source: clientText } : {};
    if (peerHop) {
      const c = peerHop.commands[0]!;
      const ok = peerHop.state === "answered";
      return {
        at,
        label: ok
          ? `the server's tunnel address answers (${cmdText(c)})`
          : `the server's tunnel address does not answer (${cmdText(c)})`,
        ...src,
        state: ok ? "ok" : "stops",
        evidence: c.resultSource,
      };
    }
    if (anyAnswered) {
      const c = anyAnswered.commands[0]!;
      return {
        at,
        label: `carries packets: a destination past it answers (${cmdText(c)})`,
        ...src,
        state: "ok",
        evidence: c.resultSource,
      };
    }
    return {
      at,
      label: "not probed: whether the tunnel carries packets is not known",
      ...src,
      state: "unknown",
      ...withEvidence(ctx?.peer?.source),
    };
  })();

  const sysctl = ctx?.evidence?.sysctl?.values.get(IP_FORWARD);
  const forwardHop = ((): PathHop => {
    const src = clientText ? { source: clientText } : {};
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
        ...src,
        state: "ok",
        evidence: sysctl.source,
      };
    }
    if (anyAnswered) {
      const c = anyAnswered.commands[0]!;
      return {
        at: podAt,
        label: `forwards: a destination past it answers (${cmdText(c)}); ${IP_FORWARD} not read`,
        ...src,
        state: "ok",
        evidence: c.resultSource,
      };
    }
    return {
      at: podAt,
      label: sysctl
        ? `${IP_FORWARD} = ${sysctl.value}: whether the pod forwards is not decided`
        : `${IP_FORWARD} in the pod's namespace not read: whether it forwards is not known`,
      ...src,
      state: "unknown",
      ...withEvidence(sysctl?.source),
    };
  })();

  /** The nat hop for one destination, and the source the destination sees. */
  const natHop = (dst: Ip): { hop: PathHop; wire?: string } | undefined => {
    if (!ctx) return undefined;
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
    const asked = answer.masquerade;
    const src = clientIp ?? asked?.src;
    if (!src) return undefined;
    const verdict =
      asked && sameIp(asked.src, src) && sameIp(asked.dst, dst)
        ? asked.verdict
        : masqueradeOf(dump, { src, dst, outIface: "eth0" });
    const srcText = clientText ?? formatIp(src);
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
  };

  const paths: PathView[] = [];
  if (dests.length === 0 && peerHop && peerIp) {
    const c = peerHop.commands[0]!;
    paths.push({
      from: clientAt,
      to: formatIp(peerIp),
      hops: [clientHop, tunnelHop],
      verdict:
        tunnelHop.state === "ok"
          ? `the server's tunnel address ${formatIp(peerIp)} answers (${cmdText(c)}); no probe tried a destination past it`
          : `the tunnel does not answer (${cmdText(c)})`,
    });
    return paths;
  }

  for (const d of dests) {
    const c = d.commands[0]!;
    const dstText = formatIp(d.ip);
    const hops: PathHop[] = [clientHop, tunnelHop];
    const base = { from: clientAt, to: dstText, ...protocolOf(d) };
    if (tunnelHop.state === "stops") {
      paths.push({
        ...base,
        hops,
        verdict: `the tunnel does not answer (${peerHop ? cmdText(peerHop.commands[0]!) : "not probed"}), so ${dstText} is not reached`,
      });
      continue;
    }
    hops.push(forwardHop);
    if (forwardHop.state === "stops") {
      paths.push({
        ...base,
        hops,
        verdict: `stops at the VPN pod: ${IP_FORWARD} = ${sysctl?.value ?? "0"} in its namespace, so ${dstText} is never reached (${cmdText(c)})`,
      });
      continue;
    }
    const nat = natHop(d.ip);
    if (nat) hops.push(nat.hop);
    const wire = nat?.wire;
    const state = destState(d);
    const reached: PathHop = {
      at: d.hop === "name" ? `dns ${nameOf(input, d.ip)}` : nameOf(input, d.ip),
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
    hops.push(reached);
    const sees = wire ? ` sees ${wire} and` : "";
    // what the evidence leaves open on the way, said in the verdict (it makes the path undecided)
    const open = [
      ...(tunnelHop.state === "unknown" ? ["whether the tunnel carries packets"] : []),
      ...(forwardHop.state === "unknown"
        ? [`whether the VPN pod forwards (${IP_FORWARD} not read)`]
        : []),
      ...(nat?.hop.state === "unknown" ? ["the source the destination sees"] : []),
    ];
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
    } else if (unroutable && nat?.hop.state === "ok") {
      verdict = `${dstText}${sees} its replies have no way back: nothing masquerades or routes the client pool (${cmdText(c)})`;
    } else if (anyAnswered) {
      verdict = `${dstText}${wire ? ` sees ${wire} but` : ""} gives no answer (${cmdText(c)}) while another destination answers: something particular to it drops the packet or its reply`;
    } else {
      verdict = `${dstText} gives no answer (${cmdText(c)}): look at ${LAYER_OF[d.hop].explain}`;
    }
    if (open.length > 0) verdict += `; not decided: ${open.join(", ")}`;
    paths.push({
      ...base,
      hops,
      ...(wire && state !== "unknown" ? { sourceOnWire: wire } : {}),
      verdict,
    });
  }
  return paths;
}
