/**
 * @module agents/kubenet/node — kubenet on one node of a snapshot: the kubelet's flags
 * (`nodes/<node>/kubelet-flags.txt`, read by agents/kubenet/flags) and the rules kubenet wrote in
 * the node's nat table (by its comment, agents/kubenet/rules KUBENET_COMMENT), with what the two
 * say about the CIDR the node keeps pod addresses for.
 */
import type { Rule } from "../../iptables/dump.ts";
import { attributeRule, factsOfRule } from "../../iptables/owners.ts";
import type { Diagnostic } from "../../model/types.ts";
import { type Cidr, contains, type Ip } from "../../net/cidr.ts";
import { ownerTexts, type Snapshot } from "../../snapshot/load.ts";
import { type KubeletFlags, readKubeletFlags } from "./flags.ts";

export interface KubenetNode {
  readonly node: string;
  /** The kubelet's flags, when the node's kubelet-flags.txt is in the snapshot. */
  readonly flags?: KubeletFlags;
  readonly flagsFile?: string;
  /** kubenet's MASQUERADE rules in the node's nat POSTROUTING, in the dump's order. */
  readonly rules: readonly Rule[];
  /** The node's dump is in the snapshot (no rules there then means kubenet wrote none). */
  readonly hasDump: boolean;
  readonly diagnostics: readonly Diagnostic[];
}

/** kubenet's rules of a node's dump (IPv4 and IPv6), by its comment. */
function kubenetRules(snap: Snapshot, node: string): { rules: Rule[]; hasDump: boolean } {
  const ev = snap.nodes.get(node);
  const rules: Rule[] = [];
  for (const dump of [ev?.iptables, ev?.ip6tables]) {
    for (const r of dump?.tables.get("nat")?.chains.get("POSTROUTING")?.rules ?? []) {
      if (attributeRule(factsOfRule(r)).owner === "kubenet") rules.push(r);
    }
  }
  return { rules, hasDump: ev?.iptables !== undefined };
}

export function kubenetNode(snap: Snapshot, node: string): KubenetNode {
  const text = ownerTexts(snap.nodes.get(node), "kubelet-flags")[0];
  const { rules, hasDump } = kubenetRules(snap, node);
  if (!text) return { node, rules, hasDump, diagnostics: [] };
  const parsed = readKubeletFlags(text.text, text.file);
  return {
    node,
    flags: parsed.value,
    flagsFile: text.file,
    rules,
    hasDump,
    diagnostics: parsed.diagnostics,
  };
}

/** The node runs kubenet: its kubelet says `--network-plugin=kubenet`, or its rule is there. */
export function runsKubenet(n: KubenetNode): boolean {
  return n.rules.length > 0 || n.flags?.networkPlugin?.value === "kubenet";
}

/** kubenet's rule that leaves `dst` alone (`! -d CIDR` holds it), the first in the dump. */
export function ruleKeeping(n: KubenetNode, dst: Ip): Rule | undefined {
  return n.rules.find(
    (r) => r.dst?.negated && r.dst.cidr.family === dst.family && contains(r.dst.cidr, dst),
  );
}

/** kubenet's rule that masquerades `dst`, when one does (a second rule after a flag change). */
export function ruleMasquerading(n: KubenetNode, dst: Ip): Rule | undefined {
  return n.rules.find(
    (r) => r.dst?.negated && r.dst.cidr.family === dst.family && !contains(r.dst.cidr, dst),
  );
}

/** The CIDR the kubelet's flag keeps pod addresses for (the default when not given). */
export function flagCidr(n: KubenetNode): Cidr | undefined {
  return n.flags?.nonMasqueradeCidr.cidr;
}
