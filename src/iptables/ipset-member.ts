/**
 * @module iptables/ipset-member — does an address belong to an IP set, as the kernel's `-m set
 * --match-set NAME src|dst` asks it: hash:net answers with its most specific entry (a `nomatch`
 * entry there means "not a member"), hash:ip and bitmap:ip with their addresses. Types and
 * listings podpath cannot read answer "cannot tell", with the reason.
 */
import type { Family } from "../net/cidr.ts";
import type { Ipset, IpsetDump, IpsetMember } from "./ipset-parser.ts";

export type IpsetAnswer =
  | { readonly kind: "member"; readonly set: Ipset; readonly entry: IpsetMember }
  | { readonly kind: "not-member"; readonly set: Ipset; readonly entry?: IpsetMember }
  | { readonly kind: "cannot-tell"; readonly reason: string; readonly set?: Ipset };

const ADDRESS_TYPES = new Set(["hash:net", "hash:ip", "bitmap:ip"]);

/**
 * Whether `addr` is in set `name` of the dump.
 *
 * @example
 * ipsetMembership(dump, "cali40masq-ipam-pools", 4, parseIp("10.244.1.5").value).kind; // "member"
 */
export function ipsetMembership(
  dump: IpsetDump,
  name: string,
  family: Family,
  addr: bigint,
): IpsetAnswer {
  const set = dump.sets.get(name);
  if (!set) {
    return {
      kind: "cannot-tell",
      reason: `${dump.file} has no set named ${name} (iptables refuses a rule naming a set that does not exist: the listing is of another node or time)`,
    };
  }
  if (!ADDRESS_TYPES.has(set.type)) {
    return {
      kind: "cannot-tell",
      set,
      reason: `set ${name} is of type ${set.type || "(not shown)"}, whose membership podpath does not model`,
    };
  }
  if (set.header.includes("netmask")) {
    return {
      kind: "cannot-tell",
      set,
      reason: `set ${name} stores addresses under a netmask (${set.header.join(" ")}), which podpath does not model`,
    };
  }
  if (set.family !== undefined && set.family !== family) {
    return {
      kind: "cannot-tell",
      set,
      reason: `set ${name} holds IPv${set.family} addresses and the packet is IPv${family}`,
    };
  }
  const members = set.members;
  if (members === undefined) {
    return {
      kind: "cannot-tell",
      set,
      reason: `${dump.file} lists set ${name} without its members (\`ipset list -t\`): give \`ipset save\``,
    };
  }
  let best: IpsetMember | undefined;
  for (const m of members) {
    if (m.cidr === undefined) {
      return {
        kind: "cannot-tell",
        set,
        reason: `member "${m.element}" of set ${name} (${m.source.file}:${m.source.line}) is not read as an address block`,
      };
    }
    if (m.cidr.family !== family || addr < m.cidr.start || addr > m.cidr.end) continue;
    // hash:net: the kernel tries the most specific prefix first; the first hit decides
    if (best?.cidr === undefined || m.cidr.prefix > best.cidr.prefix) best = m;
  }
  if (best === undefined) return { kind: "not-member", set };
  if (best.nomatch) return { kind: "not-member", set, entry: best };
  return { kind: "member", set, entry: best };
}
