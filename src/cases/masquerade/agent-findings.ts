/**
 * @module cases/masquerade/agent-findings — findings about ip-masq-agent itself: a config it
 * refuses (`masq/config-invalid`), rules on a node that differ from what it would write
 * (`masq/intent-rules-drift`), and an eBPF dataplane that makes iptables only part of the truth
 * (`masq/ebpf-dataplane`).
 */
import { compareAgentChain } from "../../agents/ip-masq-agent/drift.ts";
import { expectedAgentChain } from "../../agents/ip-masq-agent/rules.ts";
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { IptablesDump } from "../../iptables/dump.ts";
import { type Evidence, type Finding, refToEvidence } from "../../model/types.ts";
import type { NodeEvidence } from "../../snapshot/load.ts";
import type { AgentIntent } from "./intent.ts";

const CM_CMD = "kubectl -n kube-system get configmap ip-masq-agent -o yaml";
const LOG_CMD =
  "kubectl -n kube-system logs -l k8s-app=ip-masq-agent --tail=50 | grep -i 'error syncing'";

function entryEvidence(intent: AgentIntent): Evidence[] {
  return (intent.config.nonMasqueradeCIDRs ?? [])
    .flatMap((e) => (e.source ? [refToEvidence(e.source)] : []))
    .slice(0, 8);
}

/** `masq/config-invalid`: the agent refuses the ConfigMap and keeps what it ran with before. */
export function configInvalidFindings(intent: AgentIntent): Finding[] {
  const out: Finding[] = [];
  if (intent.error && intent.configMap) {
    const ev =
      intent.error.source ?? intent.configMap.locate(["data", "config"]) ?? intent.configMap.source;
    const kept = (intent.config.nonMasqueradeCIDRs ?? []).map((e) => e.text).join(", ");
    out.push({
      id: "masq/config-invalid",
      severity: "error",
      title: "ip-masq-agent refuses its ConfigMap and keeps running with its previous config",
      subject: "configmap/kube-system/ip-masq-agent",
      explanation:
        `The agent logs "Error syncing configuration: ${intent.error.message}" and does not apply this config. ` +
        `It keeps the rules of the config it ran with before; if it started with this ConfigMap, that is its defaults (nonMasqueradeCIDRs: ${kept || "none"}). ` +
        "Editing anything else in the list has no effect until this error is fixed." +
        (intent.error.exact
          ? ""
          : " (The wording of this YAML error may differ slightly from the agent's library.)"),
      evidence: [refToEvidence(ev)],
      next: [CM_CMD, LOG_CMD],
    });
  }
  if (intent.flagsFatal && intent.daemonSet) {
    out.push({
      id: "masq/config-invalid",
      severity: "error",
      title: "ip-masq-agent cannot start with the arguments in its DaemonSet",
      subject: `daemonset/kube-system/${intent.daemonSet.name}`,
      explanation: `The agent exits at startup: ${intent.flagsFatal}. Its pods crash-loop, and nodes keep whatever rules were written before.`,
      evidence: [refToEvidence(intent.flagsSource ?? intent.daemonSet.source)],
      next: [
        `kubectl -n kube-system get daemonset ${intent.daemonSet.name} -o yaml`,
        "kubectl -n kube-system get pods -l k8s-app=ip-masq-agent",
      ],
    });
  }
  return out;
}

/**
 * `masq/intent-rules-drift`: the node's installed agent chain is not what the agent writes for the
 * ConfigMap. Only for nodes where the agent is expected to run (elsewhere `masq/agent-missing`
 * explains it).
 */
export function driftFindings(
  intent: AgentIntent,
  nodes: readonly NodeEvidence[],
  agentExpected: (node: string) => boolean,
): Finding[] {
  if (!intent.configMap && !intent.daemonSet) return [];
  const out: Finding[] = [];
  const families: { dump: (n: NodeEvidence) => IptablesDump | undefined; family: 4 | 6 }[] = [
    { dump: (n) => n.iptables, family: 4 },
    { dump: (n) => n.ip6tables, family: 6 },
  ];
  for (const node of nodes) {
    if (!agentExpected(node.name)) continue;
    for (const { dump: get, family } of families) {
      const dump = get(node);
      const nat = dump?.tables.get("nat");
      if (!dump || !nat) continue;
      // a dump cut off inside the nat table (no COMMIT) lacks its last rules: missing or mangled
      // rules there are the cut, not drift (the reading problem is reported on its own)
      if (dump.format === "save" && !nat.committed) continue;
      const expected = expectedAgentChain(intent.config, intent.flags, {
        family,
        toPorts: intent.toPorts,
      });
      if (!expected) continue;
      const cmp = compareAgentChain(expected, dump);
      if (cmp.inSync) continue;
      const evidence: Evidence[] = [];
      for (const d of cmp.drift) if ("source" in d) evidence.push(refToEvidence(d.source));
      const natRef = dump.tables.get("nat")?.source;
      if (evidence.length === 0 && natRef) evidence.push(refToEvidence(natRef));
      evidence.push(...entryEvidence(intent));
      out.push({
        id: "masq/intent-rules-drift",
        severity: "error",
        title: `The masquerade rules on ${node.name} are not what ip-masq-agent writes for its ConfigMap`,
        subject: `node/${node.name}`,
        explanation:
          `${cmp.drift.map((d) => d.message).join("; ")}. ` +
          (intent.usedDefaults && intent.defaultsReason
            ? `(The intent compared is the agent's defaults: ${intent.defaultsReason}.) `
            : "") +
          "When intent and installed rules disagree, the agent is the suspect, not the network: it is not running on this node, not reading this ConfigMap, or failing to sync.",
        evidence: evidence.slice(0, 12),
        next: [
          "kubectl -n kube-system get pods -l k8s-app=ip-masq-agent -o wide",
          LOG_CMD,
          `iptables-save -t nat | grep -E '${intent.flags.masqChain}|POSTROUTING'   # on ${node.name}`,
        ],
      });
    }
  }
  return out;
}

const EBPF_DAEMONSETS = /^(anetd|cilium)$/;

/** `masq/ebpf-dataplane`: Dataplane V2 / Cilium runs; iptables shows only part of the decision. */
export function ebpfFindings(
  objects: readonly KubeObject[],
  nodes: readonly NodeEvidence[],
): Finding[] {
  const evidence: Evidence[] = [];
  const ds = objects.filter(
    (o) => o.kind === "DaemonSet" && o.namespace === "kube-system" && EBPF_DAEMONSETS.test(o.name),
  );
  for (const d of ds) evidence.push(refToEvidence(d.source));
  for (const n of nodes) {
    const nat = n.iptables?.tables.get("nat");
    if (!nat) continue;
    for (const c of nat.chains.values()) {
      if (c.name.startsWith("CILIUM_")) {
        const ref = c.declared ?? c.rules[0]?.source;
        if (ref) evidence.push(refToEvidence(ref));
        break;
      }
    }
  }
  if (evidence.length === 0) return [];
  const names = ds.map((d) => d.name);
  const agent = names.includes("anetd") ? "anetd" : "cilium";
  return [
    {
      id: "masq/ebpf-dataplane",
      severity: "warning",
      title: "An eBPF dataplane (GKE Dataplane V2 / Cilium) runs: iptables is not the whole truth",
      subject: "cluster",
      explanation:
        "Cilium can masquerade in eBPF (its own ip-masq-agent mode reads the same nonMasqueradeCIDRs) before or instead of the iptables rules, and it can drop by policy without a trace in iptables. " +
        "The iptables evaluation below is only part of the decision: confirm the source address with a capture, and read the eBPF state.",
      evidence: evidence.slice(0, 6),
      next: [
        `kubectl -n kube-system exec ds/${agent} -- cilium bpf ipmasq list`,
        `kubectl -n kube-system exec ds/${agent} -- cilium bpf nat list | head`,
        `kubectl -n kube-system exec ds/${agent} -- cilium status --verbose | grep -i masq`,
      ],
    },
  ];
}
