/**
 * @module agents/bridge-cni/node — the bridge plugin on one node of a snapshot: its CNI config
 * files (`nodes/<node>/cni/*`, read by agents/bridge-cni/conflist; the runtime uses the first in
 * lexical order) and the per-pod `CNI-…` chains it wrote in the node's nat table (found by their
 * `name: "…" id: "…"` comment), with the chain that holds a pod's address.
 */
import type { Rule } from "../../iptables/dump.ts";
import { attributeRule, factsOfRule } from "../../iptables/owners.ts";
import type { Diagnostic } from "../../model/types.ts";
import { contains, type Ip } from "../../net/cidr.ts";
import { ownerTexts, type Snapshot } from "../../snapshot/load.ts";
import { activeConfig, type BridgeConf, type CniConfigFile, readCniConfig } from "./conflist.ts";
import { parseComment } from "./rules.ts";

/** One pod's chain: its POSTROUTING jump and the chain's own rules. */
export interface PodChain {
  readonly chain: string;
  readonly network: string;
  readonly containerId: string;
  readonly jump: Rule;
  readonly rules: readonly Rule[];
}

export interface BridgeNode {
  readonly node: string;
  readonly files: readonly CniConfigFile[];
  /** The config the runtime uses (first in lexical order), when any file is there. */
  readonly active?: CniConfigFile;
  /** Its bridge plugin, when it has one. */
  readonly bridge?: BridgeConf;
  readonly chains: readonly PodChain[];
  readonly hasDump: boolean;
  readonly diagnostics: readonly Diagnostic[];
}

function podChains(snap: Snapshot, node: string): PodChain[] {
  const out: PodChain[] = [];
  const ev = snap.nodes.get(node);
  for (const dump of [ev?.iptables, ev?.ip6tables]) {
    const nat = dump?.tables.get("nat");
    for (const jump of nat?.chains.get("POSTROUTING")?.rules ?? []) {
      const f = factsOfRule(jump);
      if (!f.jumpTo || attributeRule(f).owner !== "bridge-cni") continue;
      const named = parseComment(f.comment ?? "");
      out.push({
        chain: f.jumpTo,
        network: named?.network ?? "",
        containerId: named?.containerId ?? "",
        jump,
        rules: nat?.chains.get(f.jumpTo)?.rules ?? [],
      });
    }
  }
  return out;
}

export function bridgeNode(snap: Snapshot, node: string): BridgeNode {
  const diagnostics: Diagnostic[] = [];
  const files = ownerTexts(snap.nodes.get(node), "cni-config").map((t) => {
    const r = readCniConfig(t.text, t.file);
    diagnostics.push(...r.diagnostics);
    return r.value;
  });
  const active = activeConfig(files);
  const bridge = active?.bridges[0];
  return {
    node,
    files,
    ...(active ? { active } : {}),
    ...(bridge ? { bridge } : {}),
    chains: podChains(snap, node),
    hasDump: snap.nodes.get(node)?.iptables !== undefined,
    diagnostics,
  };
}

/** The bridge plugin is this node's network: its config is the active one, or its chains are there. */
export function runsBridge(n: BridgeNode): boolean {
  return n.bridge !== undefined || n.chains.length > 0;
}

/** The chain whose POSTROUTING jump takes packets from `ip`. */
export function chainOf(n: BridgeNode, ip: Ip): PodChain | undefined {
  return n.chains.find(
    (c) =>
      c.jump.src &&
      !c.jump.src.negated &&
      c.jump.src.cidr.family === ip.family &&
      contains(c.jump.src.cidr, ip),
  );
}

/** The pod address is on the bridge network (its IPAM subnets; any address when none is known). */
export function onBridgeNetwork(n: BridgeNode, ip: Ip): boolean {
  const subnets = n.bridge?.subnets ?? [];
  return subnets.length === 0 || subnets.some((s) => contains(s.cidr, ip));
}
