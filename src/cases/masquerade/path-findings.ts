/**
 * @module cases/masquerade/path-findings — what the packet's whole way through its node shows
 * beyond the source address: `masq/filter-blocks` (a filter DROP or REJECT on the path, with who
 * likely wrote it), `masq/service-no-endpoints` (kube-proxy's REJECT for a Service without
 * endpoints), `masq/service-node-rejects` (a Service DNATed to the node itself, whose INPUT
 * rejects it) and `masq/policy-route-elsewhere` (`ip rule` sends the packet another way than the
 * main table says); and the path's hops (DNAT, the route, the verdict) for the diagram.
 */
import type { Rule } from "../../iptables/dump.ts";
import type { AddressFact } from "../../iptables/nat-trace.ts";
import { type Attribution, attributeBlockingRule, ruleAtLine } from "../../iptables/owners.ts";
import type { NodeView } from "../../k8s/objects.ts";
import type { PathHop } from "../../model/answer.ts";
import { type Finding, type Missing, refToEvidence, type SourceRef } from "../../model/types.ts";
import { type Family, formatCidr, formatIp, type Ip } from "../../net/cidr.ts";
import { nodeDump } from "../../path/node-context.ts";
import { nftPathRuleset, nodePathEvaluator } from "../../path/node-path.ts";
import type { PathOutcome, PathResult, PathStep } from "../../path/path-types.ts";
import { REJECT_SEEN_AS } from "../../path/reject-with.ts";
import { sh } from "../../report/shell-quote.ts";
import type { NodeEvidence } from "../../snapshot/load.ts";
import type { TracedDestination } from "./destinations.ts";
import type { ClusterFacts } from "./facts.ts";
import type { Source } from "./sources.ts";

/** What the whole path adds to one traced flow. */
export interface PathReading {
  /** The hops after the sender's (DNAT, a policy route, the verdict), in order. */
  readonly hops: readonly PathHop[];
  readonly findings: readonly Finding[];
  /** Set when every outcome stops on the node (rejected, dropped, unroutable): the sentence. */
  readonly stops?: string;
  /** Every outcome is delivered to the node itself: it never walks nat POSTROUTING. */
  readonly local: boolean;
  /** Every outcome's destination was rewritten (a Service): where it goes instead. */
  readonly rewrittenTo?: readonly Ip[];
  /**
   * What would decide the ways the rules leave open (a chain cut off or not shown, an `ip rule`
   * testing what is not known): the file, the command, and which flow it decides.
   */
  readonly missing: readonly Missing[];
}

type Dnat = Extract<PathStep, { kind: "dnat" }>;
type Verdict = Extract<PathStep, { kind: "verdict" }>;

const at = (r: SourceRef) => `${r.file}:${r.line}`;
/** `ip:port`, `[ip]:port` for IPv6 (whose address has colons of its own). */
const dstText = (ip: Ip, port: number | undefined) =>
  port ? (ip.family === 6 ? `[${formatIp(ip)}]:${port}` : `${formatIp(ip)}:${port}`) : formatIp(ip);

function commentOf(rule: Rule | undefined): string | undefined {
  for (const m of rule?.matches ?? []) if (m.kind === "comment") return m.comment;
  return undefined;
}

/** The fix, in the words of whoever wrote the rule (ip6tables' for an IPv6 packet). */
function fixOf(
  a: Attribution,
  chain: string,
  podRange: string,
  port: number | undefined,
  family: Family,
): { say: string; next: string[] } {
  const ipt = family === 6 ? "ip6tables" : "iptables";
  const input = chain === "INPUT";
  const what = input && port ? `tcp/${port}` : `the pod range ${podRange}`;
  switch (a.owner) {
    case "distribution":
      return {
        say: `This is the distribution's default firewall (iptables-services' /etc/sysconfig/iptables), loaded at boot before Kubernetes' rules. Let ${what} through above it, or stop the service so kube-proxy and the CNI own the rules.`,
        next: input
          ? [
              `${ipt} -I INPUT -p tcp --dport ${port ?? "<port>"} -j ACCEPT && service ${ipt} save   # on the node`,
              "systemctl disable --now iptables   # or: stop iptables-services (its REJECT comes back at boot otherwise)",
            ]
          : [
              `${ipt} -I FORWARD -s ${podRange} -j ACCEPT; ${ipt} -I FORWARD -d ${podRange} -j ACCEPT; service ${ipt} save   # on the node`,
              "systemctl disable --now iptables   # or: stop iptables-services (its REJECT comes back at boot otherwise)",
            ],
      };
    case "firewalld":
      return {
        say: `firewalld rejects it. Admit ${what} in firewalld's own terms (a rule added with iptables is lost at its next reload).`,
        next: input
          ? [`firewall-cmd --permanent --add-port=${port ?? "<port>"}/tcp && firewall-cmd --reload`]
          : [
              `firewall-cmd --permanent --zone=trusted --add-source=${podRange} && firewall-cmd --reload`,
            ],
      };
    case "docker":
      return {
        say: "Docker's rules drop it (Docker sets FORWARD's policy to DROP when it starts). Docker keeps DOCKER-USER for your own rules: accept the pod range there.",
        next: [
          `${ipt} -I DOCKER-USER -s ${podRange} -j ACCEPT   # on the node, or run dockerd with --iptables=false on a Kubernetes node`,
        ],
      };
    case "kube-proxy":
      return {
        say: "kube-proxy writes this rule from the Service objects and rewrites it on every sync: change the Service (its endpoints, loadBalancerSourceRanges), not the rule.",
        next: ["kubectl get services,endpointslices -A -o wide"],
      };
    case "kubelet":
      return {
        say: "The kubelet's KUBE-FIREWALL drops packets to 127.0.0.0/8 that come from elsewhere (route_localnet): use a reachable address, not a loopback one.",
        next: ["sysctl net.ipv4.conf.all.route_localnet   # on the node"],
      };
    case "calico":
    case "cilium":
    case "flannel":
      return {
        say: `The CNI (${a.owner}) drops it: a network policy it enforces. Change the policy, not the rule.`,
        next: [
          "kubectl get networkpolicy -A",
          ...(a.owner === "calico" ? ["calicoctl get globalnetworkpolicy -o yaml"] : []),
        ],
      };
    default:
      return {
        say: `podpath cannot tell who wrote it (${a.reason}); find the script or unit that adds it before changing it.`,
        next: [
          "grep -rn REJECT /etc/sysconfig/iptables /etc/iptables* /etc/systemd 2>/dev/null   # on the node",
        ],
      };
  }
}

/** The hop a verdict step makes in the diagram. */
function verdictHop(node: string, v: Verdict, owner?: Attribution): PathHop {
  const how = v.verdict === "REJECT" ? `REJECT (${v.rejectWith})` : v.verdict;
  const by = owner && owner.owner !== "unknown" ? `, ${owner.owner}'s` : "";
  return {
    at: `node/${node}`,
    label: `${v.table} ${v.chain}${v.ruleIndex > 0 ? ` rule ${v.ruleIndex}` : " policy"}: ${how}${by}`,
    state: v.verdict === "ACCEPT" ? "ok" : "stops",
    evidence: v.source,
  };
}

/** Reads the path result of one flow into hops and findings. */
export function readPath(
  result: PathResult,
  node: NodeEvidence,
  src: Source,
  facts: ClusterFacts,
): PathReading {
  const outs = result.outcomes;
  const family = result.packet.dst.family;
  const dump = nodeDump(node, family);
  const chainsOf = (table: string) => [
    ...(dump?.tables.get(table as "filter")?.chains.keys() ?? []),
  ];
  const view = facts.nodes.find((n) => n.name === node.name);
  const range = view?.podCIDRs.find((c) => c.cidr.family === family) ?? view?.podCIDRs[0];
  const podRange = range ? formatCidr(range.cidr) : "<pod CIDR>";
  const p = result.packet;
  const flowText = `${formatIp(p.src)} → ${dstText(p.dst, p.dport)}`;
  const subject = `flow/${formatIp(p.src)}->${dstText(p.dst, p.dport)}`;
  const hops: PathHop[] = [];
  const findings: Finding[] = [];
  const seen = new Set<string>();
  const share = (n: number) => (n === outs.length ? "" : ` (on ${n} of its ${outs.length} ways)`);

  // DNAT: one hop per endpoint (a Service's statistic branches are every endpoint)
  const dnats = outs.flatMap((o) => o.steps.filter((s): s is Dnat => s.kind === "dnat"));
  const byEndpoint = new Map<string, Dnat>();
  for (const d of dnats) byEndpoint.set(dstText(d.to, d.port), d);
  for (const [to, d] of byEndpoint) {
    hops.push({
      at: `node/${node.name}`,
      label: `nat ${d.chain}: DNAT to ${to}${byEndpoint.size > 1 ? " (one endpoint of several, chosen at random)" : ""}`,
      state: "ok",
      evidence: d.source,
    });
  }

  // policy routing another way than the main table
  for (const o of outs) {
    for (const s of o.steps) {
      if (s.kind !== "route" || !s.mainTable) continue;
      const key = `route:${at(s.source)}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const main = s.mainTable;
      hops.push({
        at: `node/${node.name}`,
        label: `ip rule → table ${s.table}: ${s.dev ? `dev ${s.dev}` : ""}${s.via ? ` via ${formatIp(s.via)}` : ""} (main table: ${main.dev ? `dev ${main.dev}` : "no route"})`,
        state: "ok",
        evidence: s.rule ?? s.source,
      });
      findings.push({
        id: "masq/policy-route-elsewhere",
        severity: "warning",
        title: `Policy routing sends ${flowText} through table ${s.table} (dev ${s.dev ?? "?"}), not the main table's ${main.dev ? `dev ${main.dev}` : "route"}`,
        subject,
        explanation: `The node's ip rule ${s.rule ? `(${at(s.rule)}) ` : ""}chooses table ${s.table} for this packet; its route there (${at(s.source)}) leaves by ${s.dev ?? "?"}${s.via ? ` via ${formatIp(s.via)}` : ""}, while the main table${main.source ? ` (${at(main.source)})` : ""} says ${main.dev ? `dev ${main.dev}${main.via ? ` via ${formatIp(main.via)}` : ""}` : "nothing"}. Every -o match of nat POSTROUTING and filter FORWARD is decided on ${s.dev ?? "that interface"}; the main table alone would mislead${share(1)}.`,
        evidence: [
          ...(s.rule ? [refToEvidence(s.rule)] : []),
          refToEvidence(s.source),
          ...(main.source ? [refToEvidence(main.source)] : []),
        ],
        next: [
          p.inIface
            ? sh`ip rule; ip route show table ${String(s.table)}; ip route get ${formatIp(s.dst)} from ${formatIp(p.src)} iif ${p.inIface}   # on the node`
            : sh`ip rule; ip route show table ${String(s.table)}; ip route get ${formatIp(s.dst)} from ${formatIp(p.src)}   # on the node`,
        ],
      });
    }
  }

  // verdicts that stop the packet
  const stopping = outs.filter(
    (o) => o.verdict.kind === "rejected" || o.verdict.kind === "dropped",
  );
  const groups = new Map<string, PathOutcome[]>();
  for (const o of stopping) {
    const v = o.verdict as Extract<PathOutcome["verdict"], { kind: "rejected" | "dropped" }>;
    const k = at(v.by);
    groups.set(k, [...(groups.get(k) ?? []), o]);
  }
  for (const group of groups.values()) {
    const o = group[0]!;
    const v = o.verdict as Extract<PathOutcome["verdict"], { kind: "rejected" | "dropped" }>;
    const step = [...o.steps].reverse().find((s): s is Verdict => s.kind === "verdict");
    const rule = dump ? ruleAtLine(dump.tables, v.by.file, v.by.line) : undefined;
    const owner = rule
      ? attributeBlockingRule(rule, chainsOf(v.table))
      : policyOwner(v.table, chainsOf(v.table));
    if (step) hops.push(verdictHop(node.name, step, owner));
    const how =
      v.kind === "rejected"
        ? `rejects it with ${v.with} (the sender sees "${REJECT_SEEN_AS[v.with]}")`
        : "drops it silently (the sender times out)";
    const where = `${v.table} ${v.chain}${step && step.ruleIndex > 0 ? ` rule ${step.ruleIndex}` : "'s policy"}`;
    const dnat = o.steps.find((s): s is Dnat => s.kind === "dnat");
    const comment = commentOf(rule);
    const ev = [...(dnat ? [refToEvidence(dnat.source)] : []), refToEvidence(v.by)];
    if (comment && /has no endpoints/.test(comment)) {
      const svc = comment.replace(/ has no endpoints$/, "");
      const [ns, rest] = svc.split("/");
      const name = (rest ?? "").split(":")[0] ?? "";
      findings.push({
        id: "masq/service-no-endpoints",
        severity: "error",
        title: `Service ${svc} has no endpoints: kube-proxy rejects ${flowText}${share(group.length)}`,
        subject: `service/${ns}/${name}`,
        explanation: `kube-proxy writes this REJECT (${at(v.by)}, in ${v.table} ${v.chain}) for a Service with no ready endpoint: ${dstText(p.dst, p.dport)} ${how}. No rule is wrong here; the Service selects no ready pod (a selector that matches nothing, pods not Ready, a targetPort no pod exposes).`,
        evidence: ev,
        next: [
          sh`kubectl -n ${ns ?? ""} get endpointslices -l ${`kubernetes.io/service-name=${name}`} -o wide`,
          sh`kubectl -n ${ns ?? ""} describe service ${name}`,
        ],
      });
      continue;
    }
    const fix = fixOf(owner, v.chain, podRange, o.dportOut, family);
    if (o.kind === "local" && dnat) {
      findings.push({
        id: "masq/service-node-rejects",
        severity: "error",
        title: `${flowText} is DNATed to the node itself (${dstText(dnat.to, dnat.port)}), and ${where} ${v.kind === "rejected" ? "rejects" : "drops"} it: ${owner.owner}'s rule${share(group.length)}`,
        subject,
        explanation: `nat ${dnat.chain} (${at(dnat.source)}) sends the Service to ${dstText(dnat.to, dnat.port)}, an address of the node: the packet is delivered locally (filter INPUT, never nat POSTROUTING), and ${where} (${at(v.by)}) ${how}. Who wrote it: ${owner.reason}. ${fix.say}`,
        evidence: ev,
        next: fix.next,
      });
      continue;
    }
    findings.push({
      id: "masq/filter-blocks",
      severity: "error",
      title: `${where} ${v.kind === "rejected" ? `rejects (${v.kind === "rejected" ? v.with : ""})` : "drops"} ${flowText}: ${owner.owner}'s rule${share(group.length)}`,
      subject,
      explanation: `On ${node.name} the ${src.kind === "pod" ? "pod's" : "node's"} packet${dnat ? ` (DNATed to ${dstText(dnat.to, dnat.port)} at ${at(dnat.source)})` : ""} reaches ${where} (${at(v.by)}), which ${how}, before any rule that would accept it. Who wrote it: ${owner.reason}. ${fix.say}`,
      evidence: ev,
      next: fix.next,
    });
  }

  const local = outs.length > 0 && outs.every((o) => o.kind === "local");
  const stopsAll =
    outs.length > 0 &&
    outs.every((o) => ["rejected", "dropped", "unroutable"].includes(o.verdict.kind));
  const rewritten = outs.length > 0 && outs.every((o) => o.steps.some((s) => s.kind === "dnat"));
  let stops: string | undefined;
  if (stopsAll) {
    const v = outs[0]!.verdict;
    stops =
      v.kind === "rejected"
        ? `${node.name} rejects ${flowText} (${v.table} ${v.chain}, ${v.with}: "${REJECT_SEEN_AS[v.with]}")`
        : v.kind === "dropped"
          ? `${node.name} drops ${flowText} (${v.table} ${v.chain}): the sender times out`
          : `${node.name} has no way to send ${flowText} (${v.kind === "unroutable" ? v.how : "?"})`;
  }
  // the ways the rules leave open: what decides them, one entry per file and command
  const undecided = outs.filter((o) => o.verdict.kind === "undecided");
  const deciders = new Map<string, { file: string; command: string; facts: string[] }>();
  for (const o of undecided) {
    if (o.verdict.kind !== "undecided") continue;
    for (const u of o.verdict.unknowns) {
      const file = u.decide.file ?? u.rule.file;
      const k = `${file}\n${u.decide.command}`;
      const d = deciders.get(k) ?? { file, command: u.decide.command, facts: [] };
      deciders.set(k, d);
      if (!d.facts.includes(u.fact)) d.facts.push(u.fact);
    }
  }
  const missing: Missing[] = [...deciders.values()].map((d) => ({
    file: d.file,
    would_decide: `whether ${d.facts.slice(0, 2).join("; ")}${d.facts.length > 2 ? `; and ${d.facts.length - 2} more of the same file` : ""}: how ${flowText} ends on ${node.name}${share(undecided.length)}`,
    command: d.command,
  }));
  return {
    hops,
    findings,
    local,
    missing,
    ...(stops ? { stops } : {}),
    ...(rewritten ? { rewrittenTo: [...new Set(outs.map((o) => o.dstOut))] } : {}),
  };
}

/** Who set a chain's DROP policy: Docker when its chains are there (it sets FORWARD to DROP). */
function policyOwner(table: string, chains: readonly string[]): Attribution {
  if (table === "filter" && chains.some((c) => /^DOCKER(-|$)/.test(c))) {
    return {
      owner: "docker",
      by: "chain",
      reason:
        "Docker sets FORWARD's policy to DROP when it starts (its DOCKER-* chains are in the table)",
    };
  }
  return {
    owner: "unknown",
    by: "none",
    reason: "a chain policy of DROP, set by whoever manages the node's firewall",
  };
}

/**
 * The whole path of one traced flow through its node's rules (the family's iptables dump, or the
 * nftables listing), read into hops and findings; undefined when neither is there. An IPv6 flow
 * is read from ip6tables-save and the node's IPv6 routes and rules; what of them is missing, the
 * path names as undecided.
 */
export function wholePath(
  node: NodeEvidence,
  view: NodeView | undefined,
  src: Source,
  target: TracedDestination,
  facts: ClusterFacts,
  addressFacts: readonly AddressFact[],
): PathReading | undefined {
  const family = target.ip.family;
  if (src.ip.family !== family) return undefined;
  // a node read from its nftables listing answers for either family; otherwise the family's own
  // dump: iptables-save for IPv4, ip6tables-save for IPv6 (with the IPv6 routes and rules)
  if (!nftPathRuleset(node) && nodeDump(node, family) === undefined) return undefined;
  const ev = nodePathEvaluator(node, view, addressFacts);
  if (!ev) return undefined;
  const result = ev.evaluate({
    src: src.ip,
    dst: target.ip,
    proto: target.protocol,
    ...(target.port ? { dport: target.port } : {}),
    origin: src.kind === "pod" ? "pod" : "host",
  });
  return readPath(result, node, src, facts);
}
