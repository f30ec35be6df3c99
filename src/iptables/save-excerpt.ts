/**
 * @module iptables/save-excerpt — tells whether an iptables-save or `iptables -S` text shows its
 * tables whole, and which chains may be missing rules when it does not: a grep of a dump (no table
 * header, no declarations, or `:CHAIN` lines without a `*table` line), a paste cut short (a table
 * without COMMIT, a last line that is not a whole rule), or a listing of some chains
 * (`iptables -t nat -S POSTROUTING`: the chains it declares are whole, the others unknown). A caller
 * that names the table of rule lines without `-P` lines, other than for a file as handed over,
 * gives rules it wrote (tests, generated rules): their chains are taken as whole.
 */
import type { Diagnostic } from "../model/types.ts";
import { BUILTIN_CHAINS, type Chain, type DumpFormat, type Table, type TableName } from "./dump.ts";
import { ruleCount } from "./saved-chain.ts";

/** The line number of the last line of `text` that holds more than blanks, or 0. */
function lastContentLine(text: string): number {
  let end = text.length;
  while (end > 0 && /\s/.test(text[end - 1]!)) end--;
  if (end === 0) return 0;
  let n = 1;
  for (let i = text.indexOf("\n"); i >= 0 && i < end; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

/** The chains of a table after the one holding the last rule read, and that one (in dump order). */
function fromLastRule(table: Table): Chain[] {
  const chains = [...table.chains.values()];
  let at = -1;
  let lastLine = -1;
  chains.forEach((c, i) => {
    if (ruleCount(c) === 0) return;
    const rules = c.rules;
    const line = rules[rules.length - 1]!.source.line;
    if (line > lastLine) {
      lastLine = line;
      at = i;
    }
  });
  return at < 0 ? chains : chains.slice(at);
}

/**
 * Marks the chains that may be missing rules `partial` and says why the text is an excerpt;
 * undefined when it shows its tables whole. Called once a dump is read.
 */
export function findExcerpt(
  text: string,
  format: DumpFormat,
  tables: ReadonlyMap<TableName, Table>,
  diagnostics: readonly Diagnostic[],
  wholeChainsGiven: boolean,
): { readonly reasons: readonly string[] } | undefined {
  const reasons: string[] = [];
  const mark = (chains: Iterable<Chain>, tail = false) => {
    for (const c of chains) {
      c.partial = true;
      // a cut keeps the chain's first rules whole; a grep may drop any of them
      if (tail && c.partialTail !== false) c.partialTail = true;
      else c.partialTail = false;
    }
  };
  if (format === "save") {
    for (const t of tables.values()) {
      if (t.committed) continue;
      const open = fromLastRule(t);
      mark(open, true);
      reasons.push(
        `table ${t.name} has no COMMIT (a paste cut short): ${
          open.length === t.chains.size
            ? "any of its chains"
            : `chain ${open[0]?.name} and the chains after it`
        } may be missing rules`,
      );
    }
    return reasons.length > 0 ? { reasons } : undefined;
  }
  for (const t of tables.values()) {
    const chains = [...t.chains.values()];
    const hasSpecDeclarations = /^-[PN] /m.test(text);
    if (!hasSpecDeclarations && !chains.some((c) => ruleCount(c) > 0)) continue;
    // rule lines without -P lines, their table named by the caller, are taken as the caller's
    // whole chains (rules written by hand or by a program)
    if (wholeChainsGiven && !/^-P /m.test(text) && !/^:/m.test(text)) continue;
    if (!hasSpecDeclarations) {
      mark(chains);
      reasons.push(
        /^:/m.test(text)
          ? `table ${t.name}: ":CHAIN" lines without a "*${t.name}" line (a grep or a cut of iptables-save output): any chain may be missing rules`
          : `table ${t.name}: no table header and no chain declarations (a grep of a dump): any chain may be missing rules`,
      );
      continue;
    }
    const undeclared = chains.filter((c) => c.declared === undefined);
    if (BUILTIN_CHAINS[t.name].some((b) => undeclared.some((c) => c.name === b))) {
      mark(undeclared);
      const shown = chains.filter((c) => c.declared !== undefined).map((c) => c.name);
      reasons.push(
        `table ${t.name}: only ${shown.length === 1 ? `chain ${shown[0]} is` : `chains ${shown.slice(0, 5).join(", ")} are`} listed (iptables -S CHAIN); the other chains are not shown`,
      );
    }
    // a last line that did not read as a whole line: the text was cut in the middle of it
    const lastLine = lastContentLine(text);
    if (diagnostics.some((d) => d.severity === "error" && d.source?.line === lastLine)) {
      const open = fromLastRule(t);
      mark(open, true);
      reasons.push(
        `table ${t.name}: the last line is not a whole rule (a paste cut short): chain ${open[0]?.name} and the chains after it may be missing rules`,
      );
    }
  }
  return reasons.length > 0 ? { reasons } : undefined;
}

/**
 * In an excerpt a chain that is jumped to but not shown, or that gets rules without its
 * declaration, is expected: its diagnostics become information, not warnings.
 */
export function relaxForExcerpt(diagnostics: Diagnostic[]): void {
  for (let i = 0; i < diagnostics.length; i++) {
    const d = diagnostics[i]!;
    if (d.code !== "IPTABLES_UNDECLARED_CHAIN" || d.severity === "info") continue;
    diagnostics[i] = {
      ...d,
      severity: "info",
      message: `${d.message} (the file shows only part of the rules: chains it does not show are unknown, not missing)`,
    };
  }
}
