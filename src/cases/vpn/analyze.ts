/**
 * @module cases/vpn/analyze — the VPN-pod findings (DESIGN.md case B): the first silent hop of the
 * client's outward walk, DNS versus forwarding, ip_forward in the pod's own namespace and whether
 * the manifest makes it durable, the client pool's return path, policies and allowlists judged
 * on the source after translation, the smaller Service-VIP design, and admission of the fixes.
 * Pure: snapshot pieces in ({@link VpnInput}), findings and missing evidence out.
 */

import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { ProbeCommand } from "../../evidence/probes.ts";
import {
  type Diagnostic,
  type Evidence,
  type Finding,
  type Located,
  type Missing,
  refToEvidence,
  type SourceRef,
} from "../../model/types.ts";
import { type Cidr, contains, formatCidr, formatIp, type Ip, overlaps } from "../../net/cidr.ts";
import { translationEffect } from "../../policy/ip-block-match.ts";
import { parseLabelSelector, selectorMatches } from "../../policy/label-selector.ts";
import { readNetworkPolicies } from "../../policy/network-policy.ts";
import { sh, whole } from "../../report/shell-quote.ts";
import { admissionFindings } from "./admission.ts";
import { forwardingSetters, IP_FORWARD } from "./durable.ts";
import { LAYER_OF, type Walk, walkHops } from "./hops.ts";
import {
  clusterPodRanges,
  execIn,
  rangeContaining,
  resolveVpn,
  serviceIps,
  type VpnContext,
  type VpnInput,
} from "./input.ts";
import { type MasqueradeVerdict, masqueradeOf } from "./masquerade.ts";
import { notTunnelledFindings } from "./not-tunnelled.ts";
import { tunnelDownFindings } from "./tunnel-down.ts";

export type { VpnInput } from "./input.ts";

export interface VpnAnswer {
  readonly findings: readonly Finding[];
  readonly missing: readonly Missing[];
  readonly context?: VpnContext;
  /** The outward walk the findings were decided on (`cases/vpn/paths.ts` draws it). */
  readonly walk?: Walk;
  /** ip_forward in the VPN pod's namespace as read (unknown: not in the snapshot). */
  readonly forwarding?: Forwarding;
  /** The pod's nat decision for a client-pool packet, and the packet it was asked about. */
  readonly masquerade?: { readonly verdict: MasqueradeVerdict; readonly src: Ip; readonly dst: Ip };
}

const ev = (r: SourceRef): Evidence => refToEvidence(r);
const cmdText = (c: ProbeCommand) => `${c.command} → ${c.result}`;

/** The VPN findings for a snapshot. See {@link analyzeVpn} for the missing-evidence list too. */
export function vpnFindings(input: VpnInput): Finding[] {
  return [...analyzeVpn(input).findings];
}

/** Findings plus what is missing, and the resolved VPN pod. */
export function analyzeVpn(input: VpnInput): VpnAnswer {
  const findings: Finding[] = [];
  const missing: Missing[] = [];
  const ctx = resolveVpn(input);
  const services = serviceIps(input.objects);
  const podRanges = clusterPodRanges(input.objects);
  const pushed = ctx?.kind.pushedRoutes.map((r) => r.value) ?? [];
  const walk = walkHops(input.probes, {
    ...(ctx?.peer ? { peer: ctx.peer.value } : {}),
    podRanges,
    serviceIps: services.map((s) => s.ip),
    pushed,
  });
  const clientName = input.probes.find((p) => p.client)?.client?.name ?? "client";

  if (input.probes.length === 0) {
    missing.push({
      file: "probes/client.txt",
      would_decide:
        "which hop from the client outward stops answering, and whether names or forwarding fail",
      command: `podpath probe --peer ${ctx?.peer ? formatIp(ctx.peer.value) : "PEER"} --pod-ip POD_IP --service-ip SERVICE_IP --public 1.1.1.1 --name kubernetes.default.svc.cluster.local --out probes/client.txt`,
    });
  }
  firstSilentHop(walk, clientName, findings);
  dnsLayer(walk, ctx, clientName, findings);
  if (!ctx) return { findings, missing, walk };

  const subject = `pod/${ctx.namespace}/${ctx.name}`;
  const forwarding = forwardingState(ctx, walk, subject, findings, missing);
  if (forwarding === "on") notDurable(ctx, input, subject, findings);
  const masq = returnPath(ctx, input, walk, subject, findings, missing);
  if (masq) clientNetworksReturnPath(ctx, input, masq.dst, subject, findings);
  policySource(ctx, input, masq?.verdict, subject, findings);
  serviceVip(ctx, walk, subject, findings);
  const asked = {
    walk,
    subject,
    forwarding,
    ...(masq ? { masquerade: masq.verdict } : {}),
  };
  findings.push(
    ...tunnelDownFindings(ctx.kind, subject),
    ...notTunnelledFindings(ctx.kind, walk, subject),
    ...ctx.kind.findings(asked),
  );
  missing.push(...ctx.kind.missing(asked));
  const needsFix = findings.some(
    (f) => f.id === "vpn/forwarding-disabled" || f.id === "vpn/forwarding-not-durable",
  );
  if (ctx.workload) findings.push(...admissionFindings(ctx, input, needsFix));
  return {
    findings,
    missing,
    context: ctx,
    walk,
    forwarding,
    ...(masq ? { masquerade: masq } : {}),
  };
}

function firstSilentHop(walk: Walk, client: string, findings: Finding[]): void {
  const failed = walk.firstFailed;
  if (!failed) return;
  const c = failed.commands[0]!;
  const layer = LAYER_OF[failed.hop];
  const before = walk.lastAnswered;
  const later = walk.hops.slice(walk.hops.indexOf(failed) + 1).find((h) => h.state === "answered");
  const how =
    failed.state === "silent" ? "stays silent (timeouts, no ICMP error)" : `fails (${c.result})`;
  findings.push({
    id: "vpn/first-silent-hop",
    severity: "error",
    title: `First hop without an answer: ${failed.hop} (${layer.layer})`,
    subject: `client/${client}`,
    explanation:
      `Walking outward from the client, ${before ? `the ${before.hop} hop answers but ` : ""}the ${failed.hop} hop ${how}: ` +
      `${cmdText(c)}. The layer this points to is ${layer.explain}.` +
      (later
        ? ` A later hop answers (${cmdText(later.commands[0]!)}), so the tunnel forwards: look at what is particular to this destination, such as a NetworkPolicy or firewall judging the translated source.`
        : ""),
    evidence: [
      ...(before ? [ev(before.commands[0]!.resultSource)] : []),
      ev(c.source),
      ev(c.resultSource),
      ...(later ? [ev(later.commands[0]!.resultSource)] : []),
    ],
    next: [`Look at ${layer.layer} first; probes past this hop say nothing until it answers.`],
  });
}

function dnsLayer(
  walk: Walk,
  ctx: VpnContext | undefined,
  client: string,
  findings: Finding[],
): void {
  const failing = walk.nameFailures[0];
  const rawOk = walk.hops.find((h) => h.hop !== "peer" && h.state === "answered");
  if (!failing || !rawOk) return;
  const pushedDns = ctx?.kind.pushedDns ?? [];
  const server = failing.dnsServer;
  const notPushed =
    server !== undefined &&
    pushedDns.length > 0 &&
    !pushedDns.some((d) => d.value.value === server.value);
  findings.push({
    id: "vpn/dns-layer",
    severity: "error",
    title: "Names fail while raw addresses answer: DNS wiring, not forwarding",
    subject: `client/${client}`,
    explanation:
      `${cmdText(failing)}, yet ${cmdText(rawOk.commands[0]!)}. Forwarding works for raw addresses, so the ` +
      `break is in name resolution: the DNS server the client uses${server ? ` (${formatIp(server)})` : ""}, ` +
      `whether the server pushes one (dhcp-option DNS), and whether the client applies it.` +
      (notPushed ? ` The client asked ${formatIp(server!)}, which the server does not push.` : ""),
    evidence: [
      ev(failing.source),
      ev(failing.resultSource),
      ev(rawOk.commands[0]!.resultSource),
      ...pushedDns.map((d) => ev(d.source)),
    ],
    next: [
      `dig @${pushedDns[0] ? formatIp(pushedDns[0].value) : "CLUSTER_DNS_IP"} kubernetes.default.svc.cluster.local`,
      "On the client: check that the pushed DNS server is applied (resolvectl status / scutil --dns / ipconfig /all)",
    ],
  });
}

export type Forwarding = "on" | "off" | "unknown";

function forwardingState(
  ctx: VpnContext,
  walk: Walk,
  subject: string,
  findings: Finding[],
  missing: Missing[],
): Forwarding {
  const read = execIn(ctx, `sysctl ${IP_FORWARD}`);
  const sys = ctx.evidence?.sysctl;
  const entry = sys?.values.get(IP_FORWARD);
  if (entry) {
    if (entry.value.trim() === "0") {
      findings.push({
        id: "vpn/forwarding-disabled",
        severity: "error",
        title: "Forwarding is off in the VPN pod's own network namespace",
        subject,
        explanation:
          `${IP_FORWARD} reads 0 inside ${ctx.namespace}/${ctx.name}. Decapsulated client packets arrive on the ` +
          `tunnel device and Linux will not route them on to eth0, so everything past the server's own tunnel ` +
          `address is silent. It is a per-namespace setting: the node's value says nothing about the pod's.`,
        evidence: [
          ev(entry.source),
          ...(walk.firstFailed ? [ev(walk.firstFailed.commands[0]!.resultSource)] : []),
        ],
        next: [
          sh`podpath plan vpn SNAPSHOT --pod ${`${ctx.namespace}/${ctx.name}`}`,
          `After the rollout: ${read} (must read 1 in the new pod)`,
        ],
      });
      return "off";
    }
    return entry.value.trim() === "1" ? "on" : "unknown";
  }
  missing.push({
    file: `pods/${ctx.namespace}/${ctx.name}/sysctl.txt`,
    would_decide: `whether ${IP_FORWARD} is 0 in the VPN pod's own network namespace`,
    command: `${read} > pods/${ctx.namespace}/${ctx.name}/sysctl.txt`,
  });
  // Without the file: everything past the peer silent, with no ICMP errors, is the pattern.
  const hops = walk.hops;
  const peer = hops.find((h) => h.hop === "peer");
  const past = hops.filter((h) => h.hop !== "peer");
  if (peer?.state === "answered" && past.length > 0 && past.every((h) => h.state === "silent")) {
    findings.push({
      id: "vpn/forwarding-disabled",
      severity: "warning",
      title: "The probe pattern points to forwarding in the VPN pod's namespace",
      subject,
      explanation:
        `The server's tunnel address answers and everything past it times out without an ICMP error ` +
        `(${past.map((h) => h.hop).join(", ")}): the pattern of net.ipv4.ip_forward=0 in the VPN pod. ` +
        `The pod's own sysctl decides it (pods/${ctx.namespace}/${ctx.name}/sysctl.txt is not in the snapshot): ${read}`,
      evidence: [
        ev(peer.commands[0]!.resultSource),
        ...past.map((h) => ev(h.commands[0]!.resultSource)),
      ],
      next: [read],
    });
  }
  return "unknown";
}

function notDurable(ctx: VpnContext, input: VpnInput, subject: string, findings: Finding[]): void {
  const entry = ctx.evidence?.sysctl?.values.get(IP_FORWARD);
  if (!entry || !ctx.workload) return;
  const setters = forwardingSetters(ctx.workload, ctx.kind.extraSetters);
  if (setters.length > 0) return;
  findings.push({
    id: "vpn/forwarding-not-durable",
    severity: "warning",
    title: "Forwarding is on now, but nothing in the manifest sets it",
    subject,
    explanation:
      `${IP_FORWARD} reads 1 in the running pod, but ${ctx.workload.kind} ${ctx.workload.name} has no init ` +
      `container writing it, no securityContext.sysctls entry for it${ctx.kind.notDurableExtra}. ` +
      `A value set by hand (kubectl exec … sysctl -w) lives only as long as this pod's network namespace: ` +
      `the next restart starts from the default again and the tunnel goes silent past the peer.`,
    evidence: [
      ev(entry.source),
      ev(ctx.workload.source),
      ...(ctx.chartValues?.ipForwardInitContainer && ctx.kind.kind === "openvpn"
        ? [ev(ctx.chartValues.ipForwardInitContainer.source)]
        : []),
    ],
    next: [sh`podpath plan vpn SNAPSHOT --pod ${`${ctx.namespace}/${ctx.name}`}`],
  });
  void input;
}

function representativeDst(ctx: VpnContext, walk: Walk, input: VpnInput): Ip | undefined {
  for (const h of walk.hops) {
    if (h.hop === "peer") continue;
    const ip = h.commands[0]?.targetIp;
    if (ip) return ip;
  }
  const svc = serviceIps(input.objects)[0];
  if (svc) return svc.ip;
  return ctx.podIp?.value;
}

function returnPath(
  ctx: VpnContext,
  input: VpnInput,
  walk: Walk,
  subject: string,
  findings: Finding[],
  missing: Missing[],
): { verdict: MasqueradeVerdict; src: Ip; dst: Ip } | undefined {
  const pool = ctx.pool;
  if (!pool) {
    missing.push(ctx.kind.configMissing);
    return undefined;
  }
  if (!ctx.evidence?.iptables) {
    missing.push({
      file: `pods/${ctx.namespace}/${ctx.name}/iptables-save.txt`,
      would_decide: `whether the VPN pod masquerades the client pool ${formatCidr(pool.value)}`,
      command: whole(
        `${execIn(ctx, "iptables-save -t nat")} > ${sh`${`pods/${ctx.namespace}/${ctx.name}/iptables-save.txt`}`}`,
      ),
    });
    return undefined;
  }
  const client: Ip = { family: pool.value.family, value: pool.value.start + 2n };
  const dst = representativeDst(ctx, walk, input) ?? { family: 4, value: 0x0a000001n };
  const verdict = masqueradeOf(ctx.evidence.iptables, {
    src: client,
    dst,
    outIface: "eth0",
    inIface: ctx.kind.tunnelDevice,
  });
  const asked = { verdict, src: client, dst };
  if (verdict.kind === "masqueraded" || verdict.kind === "unknown") return asked;
  const routed = (input.nodeRoutes ?? []).flatMap((n) =>
    n.routes
      .filter(
        (r) => r.dst !== "default" && r.dst.family === pool.value.family && contains(r.dst, client),
      )
      .map((r) => ({ node: n.node, route: r })),
  );
  if (routed.length > 0) return asked;
  const fix = ctx.kind.masqueradeFix(pool.value);
  const nat = ctx.evidence.iptables.tables.get("nat");
  findings.push({
    id: "vpn/client-pool-unroutable",
    severity: "error",
    title: `The client pool ${formatCidr(pool.value)} has no way back`,
    subject,
    explanation:
      `Client packets leave the VPN pod with their pool source (${formatIp(client)} → ${formatIp(dst)}): nothing in ` +
      `the pod's nat POSTROUTING masquerades ${formatCidr(pool.value)}, and ${input.nodeRoutes?.length ? "no node routes it" : "no node routing table in the snapshot routes it"}. ` +
      `The cluster network does not know the pool, so replies never reach the tunnel. Forwarding is necessary, not sufficient.`,
    evidence: [
      ev(pool.source),
      ...(nat?.source ? [ev(nat.source)] : []),
      ...(verdict.kind === "not-masqueraded" && verdict.last ? [ev(verdict.last)] : []),
    ],
    next: [
      fix.next,
      "or route the pool to the VPN pod in the cluster network (and keep client addresses visible)",
    ],
  });
  if (!input.nodeRoutes?.length) {
    missing.push({
      file: "nodes/NODE/ip-route.txt",
      would_decide: `whether the cluster routes ${formatCidr(pool.value)} back to the VPN pod`,
      command: "ip route (on each node)",
    });
  }
  return asked;
}

/**
 * Networks behind clients (OpenVPN `iroute`) arrive through the tunnel with their own sources:
 * the pod's masquerade or a node route must cover them as it covers the pool.
 */
function clientNetworksReturnPath(
  ctx: VpnContext,
  input: VpnInput,
  dst: Ip,
  subject: string,
  findings: Finding[],
): void {
  const dump = ctx.evidence?.iptables;
  if (!dump) return;
  for (const net of ctx.kind.clientNetworks ?? []) {
    if (ctx.pool && contains(ctx.pool.value, net.value)) continue;
    const src: Ip = { family: net.value.family, value: net.value.start + 1n };
    if (src.family !== dst.family) continue;
    const verdict = masqueradeOf(dump, {
      src,
      dst,
      outIface: "eth0",
      inIface: ctx.kind.tunnelDevice,
    });
    if (verdict.kind === "masqueraded" || verdict.kind === "unknown") continue;
    const routed = (input.nodeRoutes ?? []).some((n) =>
      n.routes.some(
        (r) => r.dst !== "default" && r.dst.family === src.family && contains(r.dst, src),
      ),
    );
    if (routed) continue;
    const fix = ctx.kind.masqueradeFix(net.value);
    const nat = dump.tables.get("nat");
    findings.push({
      id: "vpn/client-pool-unroutable",
      severity: "error",
      title: `The network ${formatCidr(net.value)} behind a client has no way back`,
      subject,
      explanation:
        `Packets from ${formatCidr(net.value)} (a network behind a client, routed through the tunnel) leave the VPN pod with ` +
        `their own source (${formatIp(src)} → ${formatIp(dst)}): nothing in the pod's nat POSTROUTING masquerades it, and ` +
        `${input.nodeRoutes?.length ? "no node routes it" : "no node routing table in the snapshot routes it"}. ` +
        `Covering the client pool alone does not bring these replies back.`,
      evidence: [
        ev(net.source),
        ...(nat?.source ? [ev(nat.source)] : []),
        ...(verdict.kind === "not-masqueraded" && verdict.last ? [ev(verdict.last)] : []),
      ],
      next: [fix.next, `or route ${formatCidr(net.value)} to the VPN pod in the cluster network`],
    });
  }
}

/** Does a NetworkPolicy peer's selector, as written at `path`, select these labels? */
function peerSelects(
  np: KubeObject,
  raw: unknown,
  path: readonly (string | number)[],
  labels: Readonly<Record<string, string>>,
): boolean {
  const problems: Diagnostic[] = []; // the policy's own reader reports them
  return selectorMatches(parseLabelSelector(raw, np.locate(path) ?? np.source, problems), labels);
}

/** What the policy checks share: the pool, the translated source and the rule that translates. */
interface Translation {
  readonly ctx: VpnContext;
  readonly pool: Located<Cidr>;
  readonly after: Ip;
  readonly masqEvidence: Evidence;
  readonly subject: string;
}

function policySource(
  ctx: VpnContext,
  input: VpnInput,
  masq: MasqueradeVerdict | undefined,
  subject: string,
  findings: Finding[],
): void {
  const pool = ctx.pool;
  if (!pool || masq?.kind !== "masqueraded" || !ctx.podIp) return;
  const t: Translation = {
    ctx,
    pool,
    after: ctx.podIp.value,
    masqEvidence: ev(masq.source),
    subject,
  };
  findings.push(
    ...ipBlockFindings(t, input),
    ...selectorFindings(t, input),
    ...allowlistFindings(t, input),
  );
}

/** ipBlocks: the rules that saw the pool and those that see the translated source. */
function ipBlockFindings(t: Translation, input: VpnInput): Finding[] {
  const { ctx, pool, after, masqEvidence, subject } = t;
  const policies = readNetworkPolicies(input.objects).value;
  const effect = translationEffect(policies, pool.value, after, { direction: "ingress" });
  const out = effect.lost.map((m) =>
    policyFinding(m.policy, m.source, ctx, pool, after, masqEvidence, subject, "no-longer-matches"),
  );
  const forPool = new Set([...effect.lost, ...effect.kept].map((m) => m.policy));
  for (const m of effect.gained.filter((g) => forPool.has(g.policy))) {
    out.push(
      policyFinding(m.policy, m.source, ctx, pool, after, masqEvidence, subject, "admits-more"),
    );
  }
  return out;
}

/** Selectors: a peer that admits the VPN pod by its labels now admits every client as that pod. */
function selectorFindings(t: Translation, input: VpnInput): Finding[] {
  const { ctx, pool } = t;
  const out: Finding[] = [];
  for (const np of input.objects.filter((o) => o.kind === "NetworkPolicy")) {
    const spec = (np.raw["spec"] ?? {}) as Record<string, unknown>;
    if (!ctx.pod || !JSON.stringify(spec).includes(formatCidr(pool.value))) continue;
    const rules = Array.isArray(spec["ingress"])
      ? (spec["ingress"] as Record<string, unknown>[])
      : [];
    rules.forEach((rule, ri) => {
      const peers = Array.isArray(rule?.["from"])
        ? (rule["from"] as Record<string, unknown>[])
        : [];
      peers.forEach((peer, pi) => {
        if (peerSelectsVpnPod(np, peer, ["spec", "ingress", ri, "from", pi], ctx)) {
          const where = np.locate(["spec", "ingress", ri, "from", pi]) ?? np.source;
          const name = `${np.namespace ?? "default"}/${np.name}`;
          out.push(
            policyFinding(
              name,
              where,
              ctx,
              pool,
              t.after,
              t.masqEvidence,
              t.subject,
              "admits-more",
            ),
          );
        }
      });
    });
  }
  return out;
}

/** Does this `from` peer (at `path`) select the VPN pod by its namespace's and its own labels? */
function peerSelectsVpnPod(
  np: KubeObject,
  peer: Record<string, unknown> | undefined,
  path: readonly (string | number)[],
  ctx: VpnContext,
): boolean {
  if (!peer?.["podSelector"] && !peer?.["namespaceSelector"]) return false;
  const nsOk = peer["namespaceSelector"]
    ? peerSelects(
        np,
        peer["namespaceSelector"],
        [...path, "namespaceSelector"],
        ctx.namespaceObject?.labels ?? { "kubernetes.io/metadata.name": ctx.namespace },
      )
    : (np.namespace ?? "default") === ctx.namespace;
  const podOk = peer["podSelector"]
    ? peerSelects(np, peer["podSelector"], [...path, "podSelector"], ctx.pod!.labels)
    : true;
  return nsOk && podOk;
}

/** Far-side allowlists that name the client pool, which the far side no longer sees. */
function allowlistFindings(t: Translation, input: VpnInput): Finding[] {
  const { pool, after, masqEvidence } = t;
  const out: Finding[] = [];
  for (const site of input.remotes ?? []) {
    for (const al of site.allowlists) {
      const forPool = al.sources.find((s) => overlaps(s.value, pool.value));
      if (forPool && !al.sources.some((s) => contains(s.value, after))) {
        out.push({
          id: "vpn/policy-source-mismatch",
          severity: "error",
          title: `Allowlist ${al.name} names the client pool, but clients now arrive as ${formatIp(after)}`,
          subject: `remote/${site.name}`,
          explanation:
            `${site.name}'s allowlist ${al.name} admits ${formatCidr(forPool.value)} (the client pool ${formatCidr(pool.value)}), ` +
            `but the VPN pod masquerades the pool, so packets carry ${formatIp(after)} (or the node's address further out). ` +
            `The rule silently stops matching.`,
          evidence: [ev(forPool.source), masqEvidence],
          next: [
            `Add the post-translation source to ${al.name}, or stop masquerading and route the pool instead`,
          ],
        });
      }
    }
  }
  return out;
}

function policyFinding(
  name: string,
  where: SourceRef,
  ctx: VpnContext,
  pool: Located<Cidr>,
  after: Ip,
  masqEvidence: Evidence,
  subject: string,
  kind: "no-longer-matches" | "admits-more",
): Finding {
  return kind === "no-longer-matches"
    ? {
        id: "vpn/policy-source-mismatch",
        severity: "error",
        title: `NetworkPolicy ${name} admits the client pool, which no longer arrives`,
        subject,
        explanation:
          `The policy's ipBlock covers the client pool ${formatCidr(pool.value)}, but NetworkPolicy sees the source after ` +
          `translation: the VPN pod masquerades the pool to its own address ${formatIp(after)}, which this ipBlock does not ` +
          `admit. Client traffic is dropped by a rule that looks right.`,
        evidence: [ev(where), masqEvidence, ...(ctx.podIp ? [ev(ctx.podIp.source)] : [])],
        next: [
          `Admit the VPN pod (podSelector for ${ctx.namespace}/${ctx.name}) instead of the pool, knowing that admits every client`,
          "or stop masquerading and route the pool back to the VPN pod, so the pool rule matches again",
        ],
      }
    : {
        id: "vpn/policy-source-mismatch",
        severity: "warning",
        title: `NetworkPolicy ${name} admits more than the client pool after translation`,
        subject,
        explanation:
          `After masquerade every VPN client carries the VPN pod's address ${formatIp(after)}. This rule admits that ` +
          `address (or the pod by its labels), so it admits every client of the tunnel, and with them anything else it ` +
          `covers, not only ${formatCidr(pool.value)}.`,
        evidence: [ev(where), masqEvidence],
        next: [
          "Narrow the rule, or keep client addresses (route the pool) so per-client rules remain possible",
        ],
      };
}

function serviceVip(ctx: VpnContext, walk: Walk, subject: string, findings: Finding[]): void {
  if (!ctx.kind.onlyServicesRouted) return;
  const targets = walk.hops.filter((h) => h.hop !== "peer");
  const onlyServices = targets.length > 0 && targets.every((h) => h.hop === "service-ip");
  if (!onlyServices) return;
  const routes = ctx.kind.pushedRoutes;
  findings.push({
    id: "vpn/service-vip-suffices",
    severity: "info",
    title:
      "Clients only reach in-cluster Services: ending the VPN at the Service VIP is the smaller design",
    subject,
    explanation:
      `The client probes only Service addresses and the server pushes no redirect-gateway` +
      `${routes.length ? ` (pushed routes: ${routes.map((r) => formatCidr(r.value)).join(", ")})` : ""}. ` +
      `Routing the client pool into the pod network needs forwarding, a return path and policies for translated sources; ` +
      `terminating at the Service VIP keeps the pool out of the CNI's routing entirely.`,
    evidence: [...routes.map((r) => ev(r.source)), ev(targets[0]!.commands[0]!.resultSource)],
    next: ["Push only the Service range (or the Services' addresses) to clients"],
  });
  void rangeContaining;
}
