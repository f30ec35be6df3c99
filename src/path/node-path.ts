import type { Route } from "../evidence/ip-route.ts";
import type { AddressFact, Assumption } from "../iptables/nat-trace.ts";
import type { NodeView } from "../k8s/objects.ts";
import type { Family } from "../net/cidr.ts";
import { isIptablesNftTable } from "../nftables/active-rules.ts";
import type { NftRuleset } from "../nftables/model.ts";
import type { NodeEvidence } from "../snapshot/load.ts";
import { compilePath, type PathContext } from "./evaluate-path.ts";
import { compileNftPath } from "./nft-path.ts";
import { nodeDump, nodeNatContext } from "./node-context.ts";
import type { PathEvaluator, PathOutcome, PathPacket, PathResult } from "./path-types.ts";

const built = new WeakMap<NodeEvidence, PathEvaluator>();

/** The node's routes of one family: `ip route show table all` (either family), `ip -6 route`. */
function routesOf(node: NodeEvidence, family: Family): Route[] | undefined {
  if (family === 4) return node.routes;
  const v6 = [...(node.routes ?? []).filter((r) => r.family === 6), ...(node.routes6 ?? [])];
  return v6.length > 0 ? v6 : undefined;
}

/** The evaluator's context from the node's evidence, for packets of `family`. */
export function pathContextOf(
  node: NodeEvidence,
  view: NodeView | undefined,
  addressFacts: readonly AddressFact[] = [],
  family: Family = 4,
): PathContext {
  const routes = routesOf(node, family);
  const rules = family === 4 ? node.ipRules : node.ipRules6;
  const rulesArtifact = family === 4 ? "ip-rule" : "ip6-rule";
  return {
    ...nodeNatContext(node, view, addressFacts, family),
    routing: {
      ...(routes ? { routes } : {}),
      ...(rules ? { rules } : {}),
      rulesFile: node.files[rulesArtifact] ?? `nodes/${node.name}/${rulesArtifact}.txt`,
    },
  };
}

/**
 * The nftables listing a node's whole path is read from: when the kernel's nat rules come from it
 * (kube-proxy's nftables mode) and it holds every rule of the family's iptables dump too (none,
 * or iptables-nft's own tables, which the listing shows); undefined otherwise (a legacy dump's
 * rules run beside the listing's, and the iptables reading stays).
 */
export function nftPathRuleset(node: NodeEvidence, family: Family = 4): NftRuleset | undefined {
  const rs = node.natFrom === "nftables" ? node.nftables : undefined;
  if (!rs) return undefined;
  const dump = nodeDump(node, family);
  const nftFamily = family === 6 ? "ip6" : "ip";
  for (const [name, table] of dump?.tables ?? []) {
    const rules = [...table.chains.values()].some((c) => c.rules.length > 0);
    const listed = rs.tables.some(
      (t) => t.family === nftFamily && t.name === name && isIptablesNftTable(t),
    );
    if (rules && !listed) return undefined;
  }
  return rs;
}

/** What decides a family's packets when the snapshot lacks it. */
interface Missing {
  readonly what: string;
  readonly file: string;
  readonly command: string;
}

/** The evidence a family's packets need that the node's snapshot does not hold. */
function missingFor(node: NodeEvidence, family: Family, nft: boolean): Missing | undefined {
  const dir = `nodes/${node.name}`;
  if (family === 4) return undefined; // IPv4 keeps its reading as before
  if (!nft && !nodeDump(node, 6))
    return {
      what: "the node's ip6tables rules",
      file: node.files["ip6tables-save"] ?? `${dir}/ip6tables-save.txt`,
      command: "ip6tables-save   # on the node",
    };
  if (!routesOf(node, 6))
    return {
      what: "the node's IPv6 routes",
      file: node.files["ip6-route"] ?? `${dir}/ip6-route.txt`,
      command: "ip -6 route show table all   # on the node",
    };
  return undefined;
}

/** An evaluator that answers every packet as undecided, naming the evidence that decides it. */
function undecidedFor(m: Missing): PathEvaluator {
  return {
    evaluate: (packet: PathPacket): PathResult => {
      const at = { file: m.file, line: 0, text: `(${m.what})` };
      const outcome: PathOutcome = {
        steps: [],
        verdict: {
          kind: "undecided",
          reason: `${m.what} are not in the snapshot: an IPv${packet.dst.family} packet is judged by them alone`,
          at,
          unknowns: [
            {
              fact: `what ${m.what} do with the packet`,
              rule: at,
              reason: `${m.file} is not in the snapshot`,
              decide: { file: m.file, command: m.command },
            },
          ],
        },
        assumptions: [],
        probability: 1,
        dstOut: packet.dst,
        ...(packet.dport !== undefined ? { dportOut: packet.dport } : {}),
        kind: packet.origin === "host" ? "output" : "forward",
      };
      return { packet, outcomes: [outcome], notes: [] };
    },
  };
}

/**
 * The tables of the node's IPv4 routes (`ip route show table all`) beyond local, main and default:
 * policy routing's.
 */
export function policyTables(routes: readonly Route[] | undefined): string[] {
  const out = new Set<string>();
  for (const r of routes ?? []) {
    if (r.family !== 4) continue;
    if (r.table !== "local" && r.table !== "main" && r.table !== "default") out.add(r.table);
  }
  return [...out];
}

/**
 * An evaluator over a node without the family's `ip rule` (IPv6's always; IPv4's when the node's
 * routes show tables beyond local, main and default, which only rules lead to): the kernel's
 * default rules taken for true, and said so on every outcome with the command that decides it.
 */
function withDefaultRules(e: PathEvaluator, node: NodeEvidence, family: Family): PathEvaluator {
  const artifact = family === 4 ? "ip-rule" : "ip6-rule";
  const file = node.files[artifact] ?? `nodes/${node.name}/${artifact}.txt`;
  const command = family === 4 ? "ip rule" : "ip -6 rule";
  const a: Assumption = {
    fact:
      family === 4
        ? "the node's IPv4 policy rules are the kernel's defaults (0 lookup local, 32766 lookup main, 32767 lookup default)"
        : "the node's IPv6 policy rules are the kernel's defaults (0 lookup local, 32766 lookup main)",
    rule: { file, line: 0, text: `(${command})` },
    reason:
      family === 4
        ? `${file} is not in the snapshot, and the routes show table ${policyTables(node.routes).join(", ")}, which only a rule sends packets to`
        : `${file} is not in the snapshot`,
    decide: { file, command: `${command}   # on the node` },
    holds: true,
  };
  return {
    evaluate: (packet) => {
      const r = e.evaluate(packet);
      return {
        ...r,
        outcomes: r.outcomes.map((o) => ({ ...o, assumptions: [a, ...o.assumptions] })),
      };
    },
  };
}

/** The evaluator of one family's packets on the node (undefined: no rules of either kind). */
function familyEvaluator(
  node: NodeEvidence,
  family: Family,
  view: NodeView | undefined,
  addressFacts: readonly AddressFact[],
): PathEvaluator | undefined {
  const rs = nftPathRuleset(node, family);
  const missing = missingFor(node, family, rs !== undefined);
  if (missing) return undecidedFor(missing);
  const ctx = pathContextOf(node, view, addressFacts, family);
  const dump = nodeDump(node, family);
  const e = rs ? compileNftPath(rs, ctx) : dump ? compilePath(dump, ctx) : undefined;
  if (!e) return e;
  if (family === 4) {
    return node.ipRules || policyTables(node.routes).length === 0
      ? e
      : withDefaultRules(e, node, 4);
  }
  const ev6 = node.ipRules6 ? e : withDefaultRules(e, node, 6);
  // `icmp` toward an IPv6 address is ICMPv6 (ping to it), as `-p ipv6-icmp` rules name it
  return {
    evaluate: (p) => ev6.evaluate(p.proto === "icmp" ? { ...p, proto: "ipv6-icmp" } : p),
  };
}

/**
 * The node's evaluator, built on first use; each packet is answered by its family's: over the
 * nftables listing when that is what the kernel runs ({@link nftPathRuleset}), else over the
 * family's iptables dump (undefined when the node has neither a dump nor a listing).
 */
export function nodePathEvaluator(
  node: NodeEvidence,
  view?: NodeView,
  addressFacts: readonly AddressFact[] = [],
): PathEvaluator | undefined {
  let e = built.get(node);
  if (e) return e;
  if (!node.iptables && !node.ip6tables && !nftPathRuleset(node)) return undefined;
  const byFamily: Partial<Record<Family, PathEvaluator | null>> = {};
  const of = (f: Family) => {
    let x = byFamily[f];
    if (x === undefined) {
      x = familyEvaluator(node, f, view, addressFacts) ?? null;
      byFamily[f] = x;
    }
    return x;
  };
  e = {
    evaluate: (packet) => {
      const x = of(packet.dst.family);
      if (x) return x.evaluate(packet);
      return undecidedFor({
        what: "the node's iptables rules",
        file: node.files["iptables-save"] ?? `nodes/${node.name}/iptables-save.txt`,
        command: "iptables-save   # on the node",
      }).evaluate(packet);
    },
  };
  built.set(node, e);
  return e;
}
