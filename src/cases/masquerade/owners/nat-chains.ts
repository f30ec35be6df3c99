/**
 * @module cases/masquerade/owners/nat-chains — the nat chains of a node's dump whose names match a
 * pattern, worked out once per dump and pattern: a kube-proxy node has tens of thousands of nat
 * chains, and every owner asks whether its own are among them.
 */
import type { IptablesDump } from "../../../iptables/dump.ts";
import type { Snapshot } from "../../../snapshot/load.ts";

const NONE: readonly string[] = Object.freeze([]);

/** The names one pattern matched, and how many chains there were then. */
interface Matched {
  readonly size: number;
  readonly names: readonly string[];
}

/** Per nat chain map, per pattern (`source/flags`): the matching names, in the dump's order. */
const memo = new WeakMap<object, Map<string, Matched>>();

/** The names of a dump's nat chains that `test` matches, in the dump's order (never mutate). */
export function natChainsMatching(dump: IptablesDump | undefined, test: RegExp): readonly string[] {
  const chains = dump?.tables.get("nat")?.chains;
  if (!chains || chains.size === 0) return NONE;
  let byPattern = memo.get(chains);
  if (!byPattern) {
    byPattern = new Map();
    memo.set(chains, byPattern);
  }
  const key = `${test.source}/${test.flags}`;
  const known = byPattern.get(key);
  // a chain added since (a test building a dump by hand) makes the answer stale: the count shows it
  if (known && known.size === chains.size) return known.names;
  const names: string[] = [];
  for (const c of chains.keys()) {
    test.lastIndex = 0;
    if (test.test(c)) names.push(c);
  }
  byPattern.set(key, { size: chains.size, names });
  return names;
}

/** Some node of the snapshot has a nat chain whose name `test` matches. */
export function anyNodeHasNatChain(snap: Snapshot, test: RegExp): boolean {
  for (const n of snap.nodes.values())
    if (natChainsMatching(n.iptables, test).length > 0) return true;
  return false;
}
