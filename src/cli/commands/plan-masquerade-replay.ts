/**
 * @module cli/commands/plan-masquerade-replay — `plan masquerade --replay`: each node's real nat
 * table with the agent's chain replaced by the proposed rules, loaded into a sandbox on this
 * machine's kernel; the source address the kernel puts on the wire for a pod's request, next to the
 * evaluator's prediction (keep-pod-identity: the node's rules as they are, which it leaves alone).
 * Needs root; without it, says so and proves nothing.
 */

import { clusterFacts } from "../../cases/masquerade/facts.ts";
import { readAgentIntent } from "../../cases/masquerade/intent.ts";
import type { MasqueradePlan } from "../../cases/masquerade/plan.ts";
import type { ReplayLine } from "../../cases/masquerade/plan-render.ts";
import { labUnavailableReason } from "../../lab/netns.ts";
import { replayFlow } from "../../lab/replay.ts";
import { formatIp, parseIp } from "../../net/cidr.ts";
import type { Snapshot } from "../../snapshot/load.ts";
import type { Io } from "../io.ts";

/** The node's dump with the agent chain's rules swapped for `rules` (iptables-save lines). */
export function withAgentRules(dump: string, chain: string, rules: readonly string[]): string {
  const lines = dump.split("\n");
  const out: string[] = [];
  let inNat = false;
  let inserted = false;
  for (const l of lines) {
    if (l.startsWith("*")) inNat = l === "*nat";
    if (inNat && l.startsWith(`-A ${chain} `)) continue;
    if (inNat && l === "COMMIT" && !inserted) {
      out.push(...rules);
      inserted = true;
    }
    out.push(l);
  }
  return out.join("\n");
}

export async function replayPlan(
  snap: Snapshot,
  plan: MasqueradePlan,
  io: Io,
): Promise<ReplayLine[]> {
  const why = labUnavailableReason();
  if (why) {
    io.err(`podpath: --replay skipped: ${why}\n`);
    return [];
  }
  const intent = readAgentIntent(snap.objects);
  const facts = clusterFacts(snap.objects);
  const chain = intent.flags.masqChain;
  // keep-pod-identity changes nothing in the cluster: the current rules are the proposed ones
  const rules = plan.narrow?.expectedRules.filter((r) => r.startsWith(`-A ${chain} `));
  const out: ReplayLine[] = [];
  for (const node of snap.nodes.values()) {
    const pool = plan.coverage.find((c) => c.nodes.includes(node.name));
    const unreached =
      plan.narrow && pool && !pool.reached
        ? `(what-if only: the agent does not run in pool ${pool.pool}, so these rules never reach ${node.name}; it keeps its current rules)`
        : undefined;
    const file = node.files["iptables-save"];
    if (!file) continue;
    const pod = facts.pods.find(
      (p) => p.nodeName === node.name && !p.hostNetwork && p.podIPs[0]?.ip.family === 4,
    );
    const podIp = pod?.podIPs[0]?.ip;
    const nodeIp = facts.nodes.find((n) => n.name === node.name)?.internalIPs[0]?.ip;
    if (!podIp || !nodeIp) continue;
    const text = snap.source.readText(file);
    const dump = rules ? withAgentRules(text, chain, rules) : text;
    for (const d of plan.destinations) {
      const flowText = `${formatIp(podIp)}->${d.ip}${d.port ? `:${d.port}` : ""}`;
      try {
        const r = await replayFlow(
          dump,
          {
            proto: d.port ? "tcp" : "icmp",
            src: podIp,
            dst: parseIp(d.ip),
            ...(d.port ? { dport: d.port } : {}),
          },
          { nodeIp: formatIp(nodeIp), file },
        );
        out.push({
          node: node.name,
          flow: flowText,
          ...(r.kernelSource ? { kernelSource: r.kernelSource } : {}),
          predicted: r.predicted,
          ...(r.agree === undefined ? {} : { agree: r.agree }),
          ...(unreached ? { note: unreached } : {}),
        });
      } catch (e) {
        out.push({
          node: node.name,
          flow: flowText,
          predicted: "-",
          note: `replay failed: ${(e as Error).message}`,
        });
      }
    }
  }
  return out;
}
