/**
 * @module cases/masquerade/owners/nat-chains — the nat chains of a node's dump whose names match a
 * pattern, worked out once per dump and pattern: a kube-proxy node has tens of thousands of nat
 * chains, and every owner asks whether its own are among them. The names are searched as one
 * text, a line each (one pass of the regular expression engine, not one call per name); every
 * line found is tested again alone, so the answer is the one testing each name would give.
 */
import type { IptablesDump } from "../../../iptables/dump.ts";
import type { Snapshot } from "../../../snapshot/load.ts";

const NONE: readonly string[] = Object.freeze([]);

/** A nat table's chain names, one a line, and the answers found so far (for that many chains). */
interface Names {
  readonly size: number;
  readonly text: string;
  /** Per pattern (`flags/source`): the matching names, in the dump's order. */
  readonly matched: Map<string, readonly string[]>;
}

const memo = new WeakMap<object, Names>();

/**
 * A pattern whose answer on a line of the text can differ from its answer on the name alone:
 * lookarounds (they could see the lines beside) and sticky patterns. These test name by name.
 */
const namewise = (test: RegExp) => test.sticky || test.source.includes("(?");

/** The names of a dump's nat chains that `test` matches, in the dump's order (never mutate). */
export function natChainsMatching(dump: IptablesDump | undefined, test: RegExp): readonly string[] {
  const chains = dump?.tables.get("nat")?.chains;
  if (!chains || chains.size === 0) return NONE;
  let names = memo.get(chains);
  // a chain added since (a test building a dump by hand) makes the answers stale: the count shows it
  if (!names || names.size !== chains.size) {
    names = { size: chains.size, text: [...chains.keys()].join("\n"), matched: new Map() };
    memo.set(chains, names);
  }
  const key = `${test.flags}/${test.source}`;
  const known = names.matched.get(key);
  if (known) return known;
  const found = namewise(test) ? eachName(chains.keys(), test) : byLine(names.text, test);
  names.matched.set(key, found);
  return found;
}

function eachName(keys: Iterable<string>, test: RegExp): string[] {
  const found: string[] = [];
  for (const c of keys) {
    test.lastIndex = 0;
    if (test.test(c)) found.push(c);
  }
  return found;
}

/**
 * The lines of `text` that `test` matches alone. A match found in the text names the line it
 * starts in (verified alone); the search goes on from the next line, so no line is passed over.
 */
function byLine(text: string, test: RegExp): string[] {
  const found: string[] = [];
  const flags = test.flags.replace(/[gm]/g, "");
  const search = new RegExp(test.source, `${flags}gm`);
  const alone = new RegExp(test.source, flags);
  for (let m = search.exec(text); m !== null; m = search.exec(text)) {
    const start = text.lastIndexOf("\n", m.index - 1) + 1;
    const nl = text.indexOf("\n", m.index);
    const end = nl < 0 ? text.length : nl;
    const line = text.slice(start, end);
    if (alone.test(line)) found.push(line);
    if (nl < 0) break;
    search.lastIndex = nl + 1;
  }
  return found;
}

/** Some node of the snapshot has a nat chain whose name `test` matches. */
export function anyNodeHasNatChain(snap: Snapshot, test: RegExp): boolean {
  for (const n of snap.nodes.values())
    if (natChainsMatching(n.iptables, test).length > 0) return true;
  return false;
}
