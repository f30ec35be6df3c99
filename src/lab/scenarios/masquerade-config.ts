/**
 * @module lab/scenarios/masquerade-config — reads an ip-masq-agent config file (`--config`) into
 * the two fields that decide the rules, as the agent does (reference ip-masq-agent.md §1.1–1.3):
 * YAML 1.1 or JSON, keys matched case-insensitively, unknown keys ignored, an absent
 * `nonMasqueradeCIDRs` means the defaults, null or `[]` means none; each CIDR must parse and be
 * aligned. Pure.
 */
import { parse } from "yaml";
import { formatCidr, tryParseCidr } from "../../net/cidr.ts";
import { AGENT_DEFAULT_NON_MASQUERADE, type MasqRuleConfig } from "../masq-rules.ts";

export function parseAgentConfigText(text: string): { config: MasqRuleConfig } | { error: string } {
  let doc: unknown;
  try {
    doc = parse(text, { version: "1.1" });
  } catch (e) {
    return { error: `not YAML or JSON: ${(e as Error).message.split("\n")[0]}` };
  }
  if (doc === null || doc === undefined) {
    return {
      config: { nonMasqueradeCIDRs: [...AGENT_DEFAULT_NON_MASQUERADE], masqLinkLocal: false },
    };
  }
  if (typeof doc !== "object" || Array.isArray(doc)) {
    return { error: "expected a mapping with nonMasqueradeCIDRs, masqLinkLocal, resyncInterval" };
  }
  const entries = Object.entries(doc as Record<string, unknown>);
  const get = (key: string) => entries.find(([k]) => k.toLowerCase() === key.toLowerCase());
  const cidrsEntry = get("nonMasqueradeCIDRs");
  let cidrs: string[];
  if (cidrsEntry === undefined) cidrs = [...AGENT_DEFAULT_NON_MASQUERADE];
  else if (cidrsEntry[1] === null) cidrs = [];
  else if (Array.isArray(cidrsEntry[1]) && cidrsEntry[1].every((c) => typeof c === "string")) {
    cidrs = cidrsEntry[1] as string[];
  } else return { error: "nonMasqueradeCIDRs must be a list of CIDR strings" };
  for (const c of cidrs) {
    const r = tryParseCidr(c, { allowBareAddress: false });
    if ("error" in r) return { error: `CIDR ${JSON.stringify(c)} could not be parsed, ${r.error}` };
    if (formatCidr(r.cidr) !== c.toLowerCase() && !c.includes(":")) {
      return { error: `CIDR ${JSON.stringify(c)} is not aligned to a CIDR block` };
    }
  }
  const ll = get("masqLinkLocal")?.[1];
  if (ll !== undefined && typeof ll !== "boolean")
    return { error: "masqLinkLocal must be a boolean" };
  return { config: { nonMasqueradeCIDRs: cidrs, masqLinkLocal: ll === true } };
}
