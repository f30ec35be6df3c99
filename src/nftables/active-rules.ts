/**
 * @module nftables/active-rules — when a node shows both `iptables-save` and `nft list ruleset`,
 * which rules the kernel runs and which reading answers the nat question: iptables-nft's rules
 * are tables of the nftables ruleset (the listing holds them too), iptables-legacy's run beside
 * it in their own hooks; kube-proxy's nftables mode writes only `table ip kube-proxy`.
 */

import type { IptablesDump } from "../iptables/dump.ts";
import { ruleCount } from "../iptables/saved-chain.ts";
import type { Diagnostic } from "../model/types.ts";
import type { NftRuleset, NftTable } from "./model.ts";

export interface ActiveRules {
  /** Which reading the nat question is answered from. */
  readonly nat: "iptables" | "nftables" | "none";
  /** What the kernel runs, in words, with the evidence for it. */
  readonly diagnostic: Diagnostic;
}

const IPTABLES_TABLES = new Set(["nat", "filter", "mangle", "raw", "security"]);

/** Tables of the listing that iptables-nft wrote (nft's warning, or its table and chain names). */
export function isIptablesNftTable(t: NftTable): boolean {
  if (t.iptablesNft) return true;
  if (!IPTABLES_TABLES.has(t.name) || (t.family !== "ip" && t.family !== "ip6")) return false;
  // iptables-nft's base chains carry the built-in chains' upper-case names
  return [...t.chains.values()].every((c) => !c.base || c.name === c.name.toUpperCase());
}

/** nat rules (in base chains or chains they reach) in the tables that are not iptables-nft's. */
function nftNatTables(rs: NftRuleset): NftTable[] {
  return rs.tables.filter(
    (t) =>
      !isIptablesNftTable(t) &&
      [...t.chains.values()].some((c) => c.base?.type === "nat") &&
      [...t.chains.values()].some((c) => c.rules.length > 0),
  );
}

function natRules(dump: IptablesDump): number {
  const nat = dump.tables.get("nat");
  if (!nat) return 0;
  let n = 0;
  for (const c of nat.chains.values()) n += ruleCount(c);
  return n;
}

/**
 * Says which rules the kernel runs for a node showing `iptablesFile` and/or `nftFile`, and which
 * reading the nat question uses: the nftables listing whenever it holds nat rules the iptables
 * dump cannot show (kube-proxy's nftables table, another program's) and the dump adds nothing
 * beyond it (no dump, an empty nat table, or iptables-nft's own tables, which the listing holds).
 */
export function activeRules(
  iptables: IptablesDump | undefined,
  nft: NftRuleset | undefined,
  iptablesFile: string,
  nftFile: string,
): ActiveRules {
  const info = (
    message: string,
    file: string,
    severity: "info" | "warning" = "info",
  ): Diagnostic => ({
    code: "NFT_ACTIVE_RULES",
    severity,
    message,
    source: { file, line: 1 },
  });
  if (!nft) {
    return {
      nat: iptables ? "iptables" : "none",
      diagnostic: info(
        `${iptablesFile}: the node's rules as iptables shows them; no nftables listing`,
        iptablesFile,
      ),
    };
  }
  const own = nftNatTables(nft);
  const names = own.map((t) => `${t.family} ${t.name}`).join(", ");
  const kubeProxy = own.some((t) => t.name === "kube-proxy");
  const ownWords =
    own.length === 0
      ? "no nat rules outside iptables-nft's tables"
      : `nat rules in table ${names}${kubeProxy ? " (kube-proxy's nftables mode)" : ""}`;
  if (!iptables) {
    return {
      nat: "nftables",
      diagnostic: info(
        `${nftFile} shows ${ownWords}; no iptables-save: the nat question is answered from the nftables listing`,
        nftFile,
      ),
    };
  }
  const ipNat = natRules(iptables);
  const backend = iptables.backend;
  // iptables-nft's tables are part of the listing; iptables-legacy's run beside it in their own
  // hooks (both apply to the packet) and the listing does not show them
  const listingHoldsThem =
    ipNat === 0 ||
    backend === "nf_tables" ||
    nft.tables.some(
      (t) =>
        t.name === "nat" &&
        isIptablesNftTable(t) &&
        [...t.chains.values()].some((c) => c.rules.length > 0),
    );
  const which =
    backend === "nf_tables"
      ? "iptables-nft's"
      : backend === "legacy"
        ? "iptables-legacy's"
        : "iptables'";
  const legacyToo = iptables.legacyTablesPresent
    ? ` (its header warns that iptables-legacy tables are present too: \`iptables-legacy-save\` shows them)`
    : "";
  if (own.length > 0 && listingHoldsThem) {
    return {
      nat: "nftables",
      diagnostic: info(
        `${nftFile} shows ${ownWords}; ${iptablesFile} is ${which}${ipNat === 0 ? " with no nat rules" : ", and its tables are in the listing too"}${legacyToo}: the nat question is answered from the nftables listing`,
        nftFile,
        iptables.legacyTablesPresent ? "warning" : "info",
      ),
    };
  }
  if (own.length > 0) {
    return {
      nat: "iptables",
      diagnostic: info(
        `${iptablesFile} is ${which} (${ipNat} nat rules) and ${nftFile} shows ${ownWords}: the kernel runs both, and the nat answer here reads only ${iptablesFile}`,
        iptablesFile,
        "warning",
      ),
    };
  }
  return {
    nat: "iptables",
    diagnostic: info(
      `${nftFile} shows no nat rules beyond iptables' own tables: the nat question is answered from ${iptablesFile}`,
      iptablesFile,
    ),
  };
}
