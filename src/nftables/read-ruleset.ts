/**
 * @module nftables/read-ruleset — the one entry for nftables evidence: `nft list ruleset`,
 * `nft list table ...` (any of -a, -n, -nn, -s) or `nft -j list ruleset`, told apart by content.
 */

import type { Parsed } from "../model/types.ts";
import type { NftRuleset } from "./model.ts";
import { parseNftJson } from "./ruleset-json.ts";
import { parseNftText } from "./ruleset-text.ts";

/**
 * Reads an nftables listing in whichever form it is.
 *
 * @example
 * const { value, diagnostics } = readNftRuleset(text, "nodes/n1/nft-ruleset.txt");
 */
export function readNftRuleset(text: string, file: string): Parsed<NftRuleset> {
  const body = text.replace(/^\uFEFF/, "").trimStart();
  return body.startsWith("{") ? parseNftJson(body, file) : parseNftText(text, file);
}
