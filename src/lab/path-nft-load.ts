/**
 * @module lab/path-nft-load — loads a whole-path sandbox's rules (IPv4 or IPv6) into its node as
 * nftables: the restore text rendered by the real `iptables-restore-translate` (or
 * `ip6tables-restore-translate`) and loaded with `nft -f` in place of the iptables tables (raw,
 * mangle, nat, filter); the security table, the sandbox's delivery counters, stays. An explicit
 * I/O module.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mustExec as must, type Namespace } from "./netns.ts";
import { withoutSecurity } from "./path-observers.ts";

/**
 * Replaces the node's iptables (or ip6tables) tables with the nftables translation of the same
 * rules; returns the text nft loaded. The translation's working folder is added to `dirs` (for
 * the caller to remove).
 */
export async function loadAsNft(
  node: Namespace,
  restoreWithObservers: string,
  family: 4 | 6,
  dirs: string[],
): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), family === 4 ? "podpath-nft-tr-" : "podpath-nft6-tr-"));
  dirs.push(dir);
  const file = join(dir, "rules.txt");
  // `-p udp -m udp` with no option of the udp match: iptables-translate 1.8.9 drops the protocol
  // with the empty match (nft then refuses a DNAT to a port); `-p udp` alone says the same
  const rules = withoutSecurity(restoreWithObservers).replace(/ -m (tcp|udp)(?= -j | -m |$)/gm, "");
  writeFileSync(file, rules);
  const translate = family === 4 ? "iptables-restore-translate" : "ip6tables-restore-translate";
  const tr = await node.exec([translate, "-f", file]);
  if (tr.code !== 0) throw new Error(`${translate}: ${tr.stderr}`);
  const ip = family === 4 ? "ip" : "ip6";
  const drop = ["raw", "mangle", "nat", "filter"].map((t) => `delete table ${ip} ${t}`).join("\n");
  await must(node, ["nft", "-f", "-"], `${drop}\n`);
  // iptables-translate 1.8.9 writes `tcp flags rst / rst`, which nft 1.0.6 does not parse (only
  // the observers' TCP-reset rules use it): the form nft reads, with the same meaning
  const text = tr.stdout.replace(/tcp flags (\w+) \/ (\w+)/g, "tcp flags & $2 == $1");
  const r = await node.exec(["nft", "-f", "-"], { input: text });
  if (r.code !== 0) throw new Error(`nft -f refused the translation: ${r.stderr}\n${text}`);
  return text;
}
