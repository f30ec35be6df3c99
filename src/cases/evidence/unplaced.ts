/**
 * @module cases/evidence/unplaced — evidence podpath read but could not place on any traced path, said
 * as `evidence/unplaced` findings (info): what was read, what it could not decide, and the exact
 * command, file or flag that would place it. A node's rules with no pod address to trace through
 * them; client probes without the VPN pod's evidence; a `--dest` of another address family than
 * the snapshot's rules.
 */
import { recognizeChart } from "../../agents/openvpn/chart.ts";
import { primaryAddress } from "../../evidence/ip-addr.ts";
import { probeRole } from "../../evidence/probe-role.ts";
import type { ProbeCommand, ProbeTranscript } from "../../evidence/probes.ts";
import type { IptablesDump } from "../../iptables/dump.ts";
import {
  type ClusterFacts,
  clusterFacts,
  podAddresses,
  podRangesOf,
  serviceAddresses,
} from "../../k8s/cluster-facts.ts";
import type { PathView } from "../../model/answer.ts";
import { type Diagnostic, type Finding, refToEvidence, type SourceRef } from "../../model/types.ts";
import { formatIp } from "../../net/cidr.ts";
import { rawWord, sh } from "../../report/shell-quote.ts";
import type { NodeEvidence, Snapshot } from "../../snapshot/load.ts";
import type { DiagnoseOptions } from "../case.ts";

/** What the other questions made of the snapshot. */
export interface Placed {
  readonly findings: readonly Finding[];
  readonly paths: readonly PathView[];
}

const NODE_RULES_CMD = (node: string, save: string) =>
  sh`kubectl debug ${`node/${node}`} -q -i --image=busybox -- chroot /host ${save} > ${rawWord("SNAPSHOT/nodes/")}${node}${rawWord(`/${save}.txt`)}   # or: podpath collect --out SNAPSHOT --node-state`;

/** The line that shows what a dump is: its nat table header, else its first table's, else a rule. */
function dumpRef(dump: IptablesDump): SourceRef {
  const tables = [dump.tables.get("nat"), ...dump.tables.values()];
  for (const t of tables) if (t?.source) return t.source;
  for (const t of tables) {
    for (const c of t?.chains.values() ?? []) {
      const r = c.rules[0];
      if (r) return r.source;
      if (c.declared) return c.declared;
    }
  }
  return { file: dump.file, line: 1 };
}

function dumpsOf(n: NodeEvidence): IptablesDump[] {
  return [n.iptables, n.ip6tables].filter((d): d is IptablesDump => d !== undefined);
}

/** Does a Pod object with an address (not on the host's network) run on this node? */
function hasPodOn(facts: ClusterFacts, node: string): boolean {
  return facts.pods.some((p) => p.nodeName === node && podAddresses(p).length > 0);
}

/** Pod addresses the snapshot's `pods/<ns>/<pod>/ip-addr` files show. */
function podAddressesFromFiles(snap: Snapshot): { pod: string; ip: string }[] {
  const out: { pod: string; ip: string }[] = [];
  for (const p of snap.pods.values()) {
    for (const i of p.interfaces ?? []) {
      if (i.name === "lo") continue;
      const a = primaryAddress(i, 4) ?? primaryAddress(i, 6);
      if (a) {
        out.push({ pod: `${p.namespace}/${p.name}`, ip: formatIp(a.local) });
        break;
      }
    }
  }
  return out;
}

/** (a) A node's rules were read, but no pod address is known to trace through them. */
function nodeRulesWithoutPod(
  snap: Snapshot,
  facts: ClusterFacts,
  opts: DiagnoseOptions,
  placed: Placed,
): Finding[] {
  if (opts.from) return [];
  const out: Finding[] = [];
  const traced = new Set(placed.paths.flatMap((p) => p.hops.map((h) => h.at)));
  const fromFiles = podAddressesFromFiles(snap);
  for (const node of [...snap.nodes.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    const dumps = dumpsOf(node);
    if (dumps.length === 0 || traced.has(`node/${node.name}`) || hasPodOn(facts, node.name))
      continue;
    const masqChains = [
      ...new Set(
        dumps.flatMap((d) =>
          [...(d.tables.get("nat")?.chains.keys() ?? [])].filter((c) => /MASQ/.test(c)),
        ),
      ),
    ];
    const files = dumps.map((d) => d.file).join(" and ");
    const noDest = opts.dest === undefined && placed.paths.length === 0;
    const known = fromFiles[0];
    out.push({
      id: "evidence/unplaced",
      severity: "info",
      title: `The rules of node/${node.name} were read, but no pod address is known to trace through them`,
      subject: `node/${node.name}`,
      explanation:
        `${files} ${dumps.length === 1 ? "was" : "were"} read${masqChains.length ? ` (nat chains ${masqChains.join(", ")})` : ""}, ` +
        `but the snapshot names no pod on ${node.name}: no Pod object in cluster/*.yaml places one there and --from was not given. ` +
        `Without a pod address podpath cannot decide which source address a pod's packet leaves ${node.name} with, so no path was traced through these rules.` +
        (known
          ? ` pods/${known.pod}/ shows the address ${known.ip}; --from ${known.ip} traces it through these rules.`
          : "") +
        (noDest
          ? " Nor does the snapshot name a destination: give --dest IP[:PORT], or describe the far side in remote/<site>.yaml."
          : ""),
      evidence: dumps.map((d) => refToEvidence(dumpRef(d))),
      next: [
        "kubectl get pods -A -o yaml > SNAPSHOT/cluster/pods.yaml; kubectl get nodes -o yaml > SNAPSHOT/cluster/nodes.yaml   # then --from pod/NS/NAME names one",
        `podpath diagnose SNAPSHOT --from ${known?.ip ?? "POD_IP"}${noDest ? " --dest IP[:PORT]" : ""}   # a pod's address, traced through these rules as they are`,
      ],
    });
  }
  return out;
}

const WORKLOADS = ["Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"];

/** Does the snapshot hold anything about a VPN pod: its files, or an object naming one? */
function hasVpnPodEvidence(snap: Snapshot): boolean {
  if (snap.pods.size > 0) return true;
  return snap.objects.some(
    (o) =>
      WORKLOADS.includes(o.kind) &&
      (recognizeChart(o) !== undefined || /openvpn|wireguard|vpn/i.test(o.name)),
  );
}

/** Probes that test a hop (not `ip route`, not unknown commands). */
function isHopProbe(c: ProbeCommand): boolean {
  return c.tool !== "unknown" && c.tool !== "ip-route";
}

function describeProbe(c: ProbeCommand): string {
  return `${c.command} → ${c.result} (line ${c.source.line})`;
}

/**
 * (b) Client probes were read, but neither the outward walk (without the VPN pod's evidence it
 * knows no peer) nor a traced path nor a finding places them.
 */
function probesWithoutVpnPod(snap: Snapshot, facts: ClusterFacts, placed: Placed): Finding[] {
  if (snap.probes.length === 0 || hasVpnPodEvidence(snap)) return [];
  const cited = new Set(
    placed.findings.flatMap((f) => f.evidence.map((e) => `${e.file}:${e.line}`)),
  );
  const destinations = new Set(placed.paths.map((p) => p.to));
  // what the outward walk places without the VPN pod: role comments, Service and pod addresses
  // from cluster objects, public addresses, and name lookups
  // (the walk places every probe it finds a role for: evidence/probe-role)
  const ctx = {
    podRanges: podRangesOf(facts),
    serviceIps: serviceAddresses(snap.objects).value.map((x) => x.ip),
    pushed: [],
  };
  const isPlaced = (c: ProbeCommand) =>
    probeRole(c, ctx) !== undefined ||
    cited.has(`${c.source.file}:${c.source.line}`) ||
    cited.has(`${c.resultSource.file}:${c.resultSource.line}`) ||
    (c.targetIp !== undefined && destinations.has(formatIp(c.targetIp)));
  const out: Finding[] = [];
  for (const t of snap.probes) {
    const loose = t.commands.filter((c) => isHopProbe(c) && !isPlaced(c));
    if (loose.length === 0) continue;
    out.push(probeFinding(t, loose));
  }
  return out;
}

const MAX_LISTED = 5;

function probeFinding(t: ProbeTranscript, loose: readonly ProbeCommand[]): Finding {
  const exec = loose.find((c) => c.ranIn)?.ranIn;
  const ns = exec?.namespace ?? "NS";
  const pod = exec?.pod.replace(/^[a-z]+\//, "") ?? "VPN_POD";
  const listed = loose.slice(0, MAX_LISTED).map(describeProbe).join("; ");
  const more = loose.length > MAX_LISTED ? ` and ${loose.length - MAX_LISTED} more` : "";
  const client = t.client ? ` from ${t.client.name}` : "";
  return {
    id: "evidence/unplaced",
    severity: "info",
    title: `${loose.length} probe result${loose.length === 1 ? "" : "s"}${client} in ${t.file} read, but not placed on a path`,
    subject: t.client ? `client/${t.client.name}` : t.file,
    explanation:
      `${t.file} shows ${listed}${more}. ` +
      "The snapshot has no pods/<namespace>/<pod>/ files and no cluster object naming a VPN pod, so podpath cannot tell which hop of the walk from the client each probe tests " +
      "(the VPN server's tunnel address, a pod address, a Service address: these are private addresses it cannot place) or whether forwarding in the VPN pod is on; and no traced pod path leads to these targets." +
      (exec
        ? ` The commands ran in pod ${exec.namespace ? `${exec.namespace}/` : ""}${exec.pod} (kubectl exec).`
        : ""),
    evidence: loose.slice(0, MAX_LISTED + 1).map((c) => refToEvidence(c.source)),
    next: [
      sh`podpath collect --out SNAPSHOT --pod ${`${ns}/${pod}`}   # the VPN pod's sysctl, ip addr, ip route and iptables, and the cluster objects`,
      sh`kubectl -n ${ns} exec ${pod} -- sysctl net.ipv4.ip_forward > ${rawWord("SNAPSHOT/pods/")}${ns}/${pod}${rawWord("/sysctl.txt")}`,
      sh`kubectl -n ${ns} exec ${pod} -- ip addr > ${rawWord("SNAPSHOT/pods/")}${ns}/${pod}${rawWord("/ip-addr.txt")}`,
      "kubectl get pods,deployments,statefulsets,services -A -o yaml > SNAPSHOT/cluster/workloads.yaml",
      'or name each probe\'s hop in the transcript: "$ ping 10.8.0.1  # peer" (peer, pod-ip, service-ip, public, name)',
    ],
  };
}

/** (c) `--dest` is of an address family the snapshot's node rules do not hold. */
function destFamilyMismatch(snap: Snapshot, opts: DiagnoseOptions): Finding[] {
  const dest = opts.dest;
  if (!dest) return [];
  const nodes = [...snap.nodes.values()]
    .filter((n) => dumpsOf(n).length > 0)
    .sort((a, b) => a.name.localeCompare(b.name));
  const family = dest.ip.family;
  const without = nodes.filter((n) => (family === 6 ? !n.ip6tables : !n.iptables));
  if (without.length === 0 || without.length < nodes.length) return [];
  const ip = formatIp(dest.ip);
  const want = family === 6 ? "ip6tables-save" : "iptables-save";
  const have = family === 6 ? "IPv4" : "IPv6";
  const names = without.map((n) => n.name);
  const shown = names.slice(0, MAX_LISTED).join(", ") + (names.length > MAX_LISTED ? ", …" : "");
  return [
    {
      id: "evidence/unplaced",
      severity: "info",
      title: `--dest ${dest.text} is IPv${family}, but the snapshot holds only ${have} rules`,
      subject: without.length === 1 ? `node/${without[0]!.name}` : `flow/*->${ip}`,
      explanation:
        `IPv${family} packets are judged by ${family === 6 ? "ip6tables" : "iptables"}, and the snapshot has only ${have} rules for ${shown}: ` +
        `the rules that would rewrite (or keep) the source address of a packet to ${ip} were not collected, so its source on the wire is not decided. ` +
        `Collect ${want} from the node${without.length === 1 ? "" : "s"}, or give --dest an IPv${family === 6 ? 4 : 6} address of the same host.`,
      evidence: without
        .slice(0, MAX_LISTED)
        .flatMap((n) => dumpsOf(n).map((d) => refToEvidence(dumpRef(d)))),
      next: without.slice(0, MAX_LISTED).map((n) => NODE_RULES_CMD(n.name, want)),
    },
  ];
}

/**
 * The `evidence/unplaced` findings for what the snapshot holds and the other questions could not
 * place. `placed` is what they answered (their findings and traced paths).
 */
export function unplacedFindings(
  snap: Snapshot,
  opts: DiagnoseOptions,
  placed: Placed,
): { findings: Finding[]; diagnostics: Diagnostic[] } {
  // the Nodes' and Pods' reading problems are reported by the questions that read them first
  const facts = clusterFacts(snap.objects);
  return {
    findings: [
      ...destFamilyMismatch(snap, opts),
      ...nodeRulesWithoutPod(snap, facts, opts, placed),
      ...probesWithoutVpnPod(snap, facts, placed),
    ],
    diagnostics: [],
  };
}
