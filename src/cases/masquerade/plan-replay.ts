/**
 * @module cases/masquerade/plan-replay — the plan's rules proved on a real kernel: each node's real
 * nat table with the agent's chain replaced by the proposed rules, loaded into a sandbox on this
 * machine's kernel; the source address the kernel puts on the wire for a pod's request, next to the
 * evaluator's prediction (keep-pod-identity: the node's rules as they are, which it leaves alone).
 * Needs root (`labUnavailableReason` says why not); the caller checks before asking.
 */

import { replayFlow } from "../../lab/replay.ts";
import { formatIp, type Ip, parseIp } from "../../net/cidr.ts";
import { type NodeEvidence, ownerTexts, type Snapshot } from "../../snapshot/load.ts";
import { masqueradeModel } from "./model.ts";
import type { MasqueradePlan } from "./plan.ts";
import type { ReplayLine } from "./plan-render.ts";

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

/**
 * The node's dump with every rule of the chains `rules` append to swapped for `rules`; a chain
 * the nat table does not declare yet (an owner's new per-pod chain) is declared.
 */
export function withChainRules(dump: string, rules: readonly string[]): string {
  const chains = new Set(rules.map((r) => r.split(" ")[1] ?? ""));
  const lines = dump.split("\n");
  const out: string[] = [];
  let inNat = false;
  let inserted = false;
  const declared = new Set(
    lines.filter((l) => l.startsWith(":")).map((l) => l.slice(1).split(" ")[0]),
  );
  for (const l of lines) {
    if (l.startsWith("*")) inNat = l === "*nat";
    if (inNat && l.startsWith("-A ") && chains.has(l.split(" ")[1] ?? "")) continue;
    if (inNat && l === "COMMIT" && !inserted) {
      out.push(...[...chains].filter((c) => !declared.has(c)).map((c) => `:${c} - [0:0]`));
      out.push(...rules);
      inserted = true;
    }
    out.push(l);
  }
  return out.join("\n");
}

/** What one node replays: its dump (with the proposed rules), a pod of it, its address. */
interface NodeReplay {
  readonly node: string;
  readonly file: string;
  readonly dump: string;
  readonly podIp: Ip;
  readonly nodeIp: Ip;
  /** Why the proposed rules never reach this node, when they do not. */
  readonly unreached?: string;
  /** The node's IP sets with the plan's `add` lines (an owner that changes sets, e.g. Calico). */
  readonly ipsets?: { readonly text: string; readonly file: string; readonly extra: string[] };
}

/** The kernel's source address for each destination of the plan, from one node's pod. */
async function replayNode(n: NodeReplay, plan: MasqueradePlan): Promise<ReplayLine[]> {
  const out: ReplayLine[] = [];
  for (const d of plan.destinations) {
    const flowText = `${formatIp(n.podIp)}->${d.ip}${d.port ? `:${d.port}` : ""}`;
    if (parseIp(d.ip).family !== 4) {
      // the sandbox (lab/nat-sandbox) is IPv4 only: said, never replayed with the wrong family
      out.push({
        node: n.node,
        flow: `${d.ip}${d.port ? `:${d.port}` : ""}`,
        predicted: "-",
        note: "not replayed: the kernel sandbox replays IPv4 flows only",
      });
      continue;
    }
    try {
      const r = await replayFlow(
        n.dump,
        {
          proto: d.port ? "tcp" : "icmp",
          src: n.podIp,
          dst: parseIp(d.ip),
          ...(d.port ? { dport: d.port } : {}),
        },
        { nodeIp: formatIp(n.nodeIp), file: n.file, ...(n.ipsets ? { ipsets: n.ipsets } : {}) },
      );
      out.push({
        node: n.node,
        flow: flowText,
        ...(r.kernelSource ? { kernelSource: r.kernelSource } : {}),
        predicted: r.predicted,
        ...(r.agree === undefined ? {} : { agree: r.agree }),
        ...(n.unreached ? { note: n.unreached } : {}),
      });
    } catch (e) {
      out.push({
        node: n.node,
        flow: flowText,
        predicted: "-",
        note: `replay failed: ${(e as Error).message}`,
      });
    }
  }
  return out;
}

/** The node's part of the replay, or undefined without its dump, a pod on it or its address. */
function nodeReplay(
  snap: Snapshot,
  node: NodeEvidence,
  plan: MasqueradePlan,
  rules: readonly string[] | undefined,
): NodeReplay | undefined {
  const { intent, facts } = masqueradeModel(snap);
  const pool = plan.coverage.find((c) => c.nodes.includes(node.name));
  const unreached =
    plan.narrow && pool && !pool.reached
      ? `(what-if only: the agent does not run in pool ${pool.pool}, so these rules never reach ${node.name}; it keeps its current rules)`
      : undefined;
  const file = node.files["iptables-save"];
  if (!file) return undefined;
  const pod = facts.pods.find(
    (p) => p.nodeName === node.name && !p.hostNetwork && p.podIPs[0]?.ip.family === 4,
  );
  const podIp = pod?.podIPs[0]?.ip;
  const nodeIp = facts.nodes.find((n) => n.name === node.name)?.internalIPs[0]?.ip;
  if (!podIp || !nodeIp) return undefined;
  const text = snap.source.readText(file);
  const owned = plan.owner?.expected.filter((r) => r.startsWith("-A "));
  const dump =
    owned && owned.length > 0
      ? withChainRules(text, owned)
      : rules
        ? withAgentRules(text, intent.flags.masqChain, rules)
        : text;
  const sets = ownerTexts(node, "ipset")[0];
  const ipsets = sets
    ? {
        text: sets.text,
        file: sets.file,
        extra: (plan.owner?.expected ?? []).filter((r) => r.startsWith("add ")),
      }
    : undefined;
  return {
    node: node.name,
    file,
    dump,
    podIp,
    nodeIp,
    ...(unreached ? { unreached } : {}),
    ...(ipsets ? { ipsets } : {}),
  };
}

/** Every node's replay of the plan's rules, node by node, in snapshot order. */
export async function replayMasqueradePlan(
  snap: Snapshot,
  plan: MasqueradePlan,
): Promise<ReplayLine[]> {
  const chain = masqueradeModel(snap).intent.flags.masqChain;
  // keep-pod-identity changes nothing in the cluster: the current rules are the proposed ones
  const rules = plan.narrow?.expectedRules.filter((r) => r.startsWith(`-A ${chain} `));
  const out: ReplayLine[] = [];
  for (const node of snap.nodes.values()) {
    const n = nodeReplay(snap, node, plan, rules);
    if (n) out.push(...(await replayNode(n, plan)));
  }
  return out;
}
