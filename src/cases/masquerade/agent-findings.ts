/**
 * @module cases/masquerade/agent-findings — findings about ip-masq-agent itself: a config it
 * refuses (`masq/config-invalid`), rules on a node that differ from what it would write
 * (`masq/intent-rules-drift`), and an eBPF dataplane that makes iptables only part of the truth
 * (`masq/ebpf-dataplane`).
 */

import { readCiliumConfig } from "../../agents/cilium/config.ts";
import { readCiliumStatus } from "../../agents/cilium/status.ts";
import { compareAgentChain } from "../../agents/ip-masq-agent/drift.ts";
import { expectedAgentChain } from "../../agents/ip-masq-agent/rules.ts";
import type { KubeObject } from "../../evidence/kube-objects.ts";
import type { IptablesDump } from "../../iptables/dump.ts";
import { factsOfRule } from "../../iptables/owners.ts";
import { type Evidence, type Finding, refToEvidence, type SourceRef } from "../../model/types.ts";
import { ereLiteral, quoted, sh } from "../../report/shell-quote.ts";
import { type NodeEvidence, ownerTexts } from "../../snapshot/load.ts";
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
        sh`kubectl -n kube-system get daemonset ${intent.daemonSet.name} -o yaml`,
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
          sh`iptables-save -t nat | grep -E ${quoted(`${ereLiteral(intent.flags.masqChain)}|POSTROUTING`)}   # on ${node.name}`,
        ],
      });
    }
  }
  return out;
}

const EBPF_DAEMONSETS = /^(anetd|cilium)$/;

/** How Cilium masquerades, as the nodes' status lines, cilium-config or its rules say. */
function ciliumMasqMode(
  objects: readonly KubeObject[],
  nodes: readonly NodeEvidence[],
): { mode: "BPF" | "IPTables" | "Disabled"; source: SourceRef } | undefined {
  for (const n of nodes) {
    const t = ownerTexts(n, "cilium-status")[0];
    const st = t ? readCiliumStatus(t.text, t.file).value : undefined;
    if (st) return { mode: st.mode, source: st.source };
  }
  const cfg = readCiliumConfig(objects).value;
  if (cfg) {
    const s = cfg.settings;
    const key = !s.ipv4Masquerade ? "enable-ipv4-masquerade" : "enable-bpf-masquerade";
    const source = cfg.entries.get(key)?.source ?? cfg.configMap.source;
    return { mode: !s.ipv4Masquerade ? "Disabled" : s.bpfMasquerade ? "BPF" : "IPTables", source };
  }
  for (const n of nodes) {
    const chain = n.iptables?.tables.get("nat")?.chains.get("CILIUM_POST_nat");
    const r = chain?.rules.find((x) => factsOfRule(x).comment === "cilium masquerade non-cluster");
    if (r) return { mode: "IPTables", source: r.source };
  }
  return undefined;
}

/**
 * `masq/ebpf-dataplane`: Dataplane V2 / Cilium runs. When its masquerade mode is known, the
 * finding says who decides the pods' source (Cilium's datapath, or its iptables rules); when not,
 * that iptables shows only part of the decision.
 */
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
  const mode = ciliumMasqMode(objects, nodes);
  if (evidence.length === 0 && !mode) return [];
  const names = ds.map((d) => d.name);
  const agent = names.includes("anetd") ? "anetd" : "cilium";
  const next = [
    `kubectl -n kube-system exec ds/${agent} -- cilium-dbg status --verbose | grep -i masquerading`,
    `kubectl -n kube-system exec ds/${agent} -- cilium-dbg bpf ipmasq list`,
    "kubectl -n kube-system get configmap cilium-config -o yaml",
  ];
  if (mode) evidence.unshift(refToEvidence(mode.source));
  const known = {
    BPF: {
      title: "Cilium masquerades in eBPF: its datapath, not iptables, decides the pods' source",
      explanation:
        "Cilium's BPF masquerade rewrites pod packets on the node's devices before iptables' nat rules would: podpath decides the source from Cilium's own state (the SNAT exclusion CIDR, the ip-masq-agent map, the cluster's nodes) and cites it on the path. Cilium can also drop by policy without a trace in iptables: confirm with a capture.",
    },
    IPTables: {
      title: "Cilium masquerades with iptables: its CILIUM_POST_nat rules decide the pods' source",
      explanation:
        'Cilium runs with iptables masquerade ("cilium masquerade non-cluster" in CILIUM_POST_nat, everything outside its native-routing CIDR): the node\'s iptables rules decide the source, and podpath evaluates them. Cilium can still drop by policy in eBPF without a trace in iptables: confirm with a capture.',
    },
    Disabled: {
      title:
        "Cilium does not masquerade: pod packets keep their addresses unless another rule rewrites them",
      explanation:
        "Cilium's masquerading is off on this cluster: nothing in Cilium rewrites the pods' source; the node's other iptables rules (if any) decide. Cilium can still drop by policy in eBPF without a trace in iptables.",
    },
  } as const;
  return [
    {
      id: "masq/ebpf-dataplane",
      severity: mode ? "info" : "warning",
      title: mode
        ? known[mode.mode].title
        : "An eBPF dataplane (GKE Dataplane V2 / Cilium) runs: iptables is not the whole truth",
      subject: "cluster",
      explanation: mode
        ? known[mode.mode].explanation
        : "Cilium can masquerade in eBPF (its own ip-masq-agent mode reads the same nonMasqueradeCIDRs) before or instead of the iptables rules, and it can drop by policy without a trace in iptables. " +
          "The snapshot does not say how it masquerades (no cilium-dbg status, no cilium-config): the iptables evaluation below is only part of the decision. Confirm the source address with a capture, and read Cilium's state.",
      evidence: evidence.slice(0, 6),
      next,
    },
  ];
}
