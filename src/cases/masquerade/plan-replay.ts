/**
 * @module cases/masquerade/plan-replay — the plan's rules proved on a real kernel: each node's real
 * nat table with the agent's chain replaced by the proposed rules, loaded into a sandbox on this
 * machine's kernel; the source address the kernel puts on the wire for a pod's request, next to the
 * evaluator's prediction (keep-pod-identity: the node's rules as they are, which it leaves alone).
 * An IPv6 destination is replayed from the node's ip6tables-save, a pod's IPv6 address and the
 * node's IPv6 address. Needs root (`labUnavailableReason` says why not); the caller checks before asking.
 */

import { replayFlow } from "../../lab/replay.ts";
import { type Family, formatIp, type Ip, parseIp, tryParseCidr } from "../../net/cidr.ts";
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

/** The built-in chains of an empty nat table, as iptables-save declares them. */
const EMPTY_NAT = ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"].map((c) => `:${c} ACCEPT [0:0]`);

/**
 * The node's dump with every rule of the chains `rules` append to swapped for `rules`; a chain
 * the nat table does not declare yet (an owner's new per-pod chain) is declared. A dump without a
 * nat table (iptables-save prints only the tables in use: nothing has loaded one) gets one.
 */
export function withChainRules(dump: string, rules: readonly string[]): string {
  const chains = new Set(rules.map((r) => r.split(" ")[1] ?? ""));
  const given = dump.split("\n");
  const lines = given.includes("*nat")
    ? given
    : [
        ...given.filter((l, i) => l !== "" || i < given.length - 1),
        "*nat",
        ...EMPTY_NAT,
        "COMMIT",
        "",
      ];
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

/** What one node replays in one family: its dump (with the proposed rules), a pod of it, its address. */
interface NodeReplay {
  readonly family: Family;
  readonly node: string;
  readonly file: string;
  readonly dump: string;
  readonly podIp: Ip;
  readonly nodeIp: Ip;
  /** Why the proposed rules never reach this node (or this family's rules), when they do not. */
  readonly unreached?: string;
  /** The node's IP sets with the plan's `add` lines (an owner that changes sets, e.g. Calico). */
  readonly ipsets?: { readonly text: string; readonly file: string; readonly extra: string[] };
}

/** A destination as a flow names it: `DST[:PORT]`, an IPv6 address with a port bracketed. */
function destText(dst: string, port: number | undefined): string {
  if (!port) return dst;
  return dst.includes(":") ? `[${dst}]:${port}` : `${dst}:${port}`;
}

/** The kernel's source address for each destination of the plan in n's family, from one node's pod. */
async function replayNode(
  n: NodeReplay,
  destinations: MasqueradePlan["destinations"],
): Promise<ReplayLine[]> {
  const out: ReplayLine[] = [];
  for (const d of destinations) {
    const text = `${formatIp(n.podIp)}->${destText(d.ip, d.port)}`;
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
        flow: text,
        ...(r.kernelSource ? { kernelSource: r.kernelSource } : {}),
        predicted: r.predicted,
        ...(r.agree === undefined ? {} : { agree: r.agree }),
        ...(n.unreached ? { note: n.unreached } : {}),
      });
    } catch (e) {
      out.push({
        node: n.node,
        flow: text,
        predicted: "-",
        note: `replay failed: ${(e as Error).message}`,
      });
    }
  }
  return out;
}

/**
 * The family the owner's expected rules are written for: that of the addresses they name
 * (`-s`/`-d` blocks, set members); rules naming none are the plan's destinations'. Undefined when
 * they mix families (then neither family's dump takes them).
 */
export function ownerRulesFamily(plan: MasqueradePlan): Family | undefined {
  const named = new Set<Family>();
  for (const line of plan.owner?.expected ?? []) {
    for (const word of line.split(/\s+/)) {
      const c = word.includes(".") || word.includes(":") ? tryParseCidr(word) : undefined;
      if (c && "cidr" in c) named.add(c.cidr.family);
    }
  }
  const families =
    named.size > 0 ? named : new Set(plan.destinations.map((d) => parseIp(d.ip).family));
  return families.size === 1 ? [...families][0] : undefined;
}

/**
 * The node's part of the replay in one family, or why there is none: without the family's dump
 * or a pod address of the family on it, undefined (nothing to say); without the node's address of
 * the family, the reason.
 */
function nodeReplay(
  snap: Snapshot,
  node: NodeEvidence,
  plan: MasqueradePlan,
  rules: readonly string[] | undefined,
  family: Family,
): NodeReplay | string | undefined {
  const { intent, facts } = masqueradeModel(snap);
  const pool = plan.coverage.find((c) => c.nodes.includes(node.name));
  const unreached =
    plan.narrow && pool && !pool.reached
      ? `(what-if only: the agent does not run in pool ${pool.pool}, so these rules never reach ${node.name}; it keeps its current rules)`
      : undefined;
  const file = node.files[family === 6 ? "ip6tables-save" : "iptables-save"];
  if (!file) return undefined;
  const podIpOf = (p: (typeof facts.pods)[number]) =>
    family === 4 ? p.podIPs[0]?.ip : p.podIPs.find((x) => x.ip.family === 6)?.ip;
  const pod = facts.pods.find(
    (p) => p.nodeName === node.name && !p.hostNetwork && podIpOf(p)?.family === family,
  );
  const podIp = pod ? podIpOf(pod) : undefined;
  if (!podIp) return undefined;
  const internal = facts.nodes.find((n) => n.name === node.name)?.internalIPs ?? [];
  const nodeIp = internal.find((a) => a.ip.family === family)?.ip;
  if (!nodeIp) {
    return family === 4
      ? undefined
      : `not replayed: ${node.name} has no IPv6 InternalIP, the address its MASQUERADE would choose`;
  }
  const text = snap.source.readText(file);
  // the owner's rules and set members are written for one family; the other family's rules stay
  // as they are (ip-masq-agent's narrowed list is IPv4: its IPv6 entries are unchanged)
  const ownerFamily = ownerRulesFamily(plan);
  const mine = ownerFamily === family;
  const asTheyAre =
    (plan.owner?.expected.length ?? 0) > 0 && !mine
      ? ownerFamily === undefined
        ? `(the plan's rules mix IPv4 and IPv6: ${node.name}'s IPv${family} rules replayed as they are)`
        : `(the plan's rules are IPv${ownerFamily} only: ${node.name}'s IPv${family} rules replayed as they are)`
      : undefined;
  const note = [unreached, asTheyAre].filter((x) => x !== undefined).join(" ");
  const owned = mine ? plan.owner?.expected.filter((r) => r.startsWith("-A ")) : undefined;
  const dump =
    owned && owned.length > 0
      ? withChainRules(text, owned)
      : rules && family === 4
        ? withAgentRules(text, intent.flags.masqChain, rules)
        : text.split("\n").includes("*nat")
          ? text
          : withChainRules(text, []);
  const sets = ownerTexts(node, "ipset")[0];
  const ipsets = sets
    ? {
        text: sets.text,
        file: sets.file,
        extra: mine ? (plan.owner?.expected ?? []).filter((r) => r.startsWith("add ")) : [],
      }
    : undefined;
  return {
    family,
    node: node.name,
    file,
    dump,
    podIp,
    nodeIp,
    ...(note ? { unreached: note } : {}),
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
    for (const family of [4, 6] as const) {
      const destinations = plan.destinations.filter((d) => parseIp(d.ip).family === family);
      if (destinations.length === 0) continue;
      const n = nodeReplay(snap, node, plan, rules, family);
      if (typeof n === "string") {
        for (const d of destinations) {
          out.push({
            node: node.name,
            flow: destText(d.ip, d.port),
            predicted: "-",
            note: n,
          });
        }
      } else if (n) out.push(...(await replayNode(n, destinations)));
    }
  }
  return out;
}
