/**
 * @module iptables/ipset-parser — reads the node's IP sets as the real `ipset` tool prints them:
 * `ipset save` (`create NAME TYPE …` / `add NAME ELEMENT …`) and `ipset list` (`Name:`, `Type:`,
 * `Header:`, `Members:` blocks; `ipset list -t` shows no members, which is kept as "not shown").
 * Every set and member keeps its line; bad lines become Diagnostics and the rest is kept.
 */
import type { Diagnostic, Parsed, SourceRef } from "../model/types.ts";
import { type Cidr, type Family, tryParseCidr } from "../net/cidr.ts";

/** One member as listed: the element, and its address block when it is one address or CIDR. */
export interface IpsetMember {
  /** The element as written (`10.244.0.0/16`, `10.0.0.0/8,eth0`). */
  readonly element: string;
  /** The block for a one-dimensional address element; undefined for other element kinds. */
  readonly cidr?: Cidr;
  /** `nomatch`: a hash:net entry that makes its addresses NOT match (the kernel's exception). */
  readonly nomatch: boolean;
  readonly source: SourceRef;
}

/** One IP set. */
export interface Ipset {
  readonly name: string;
  /** `hash:net`, `hash:ip`, `bitmap:ip`, `list:set`, … */
  readonly type: string;
  /** From `family inet|inet6`; bitmap:ip is IPv4. Undefined when the header does not say. */
  readonly family?: Family;
  /** The header options after the type, as written. */
  readonly header: readonly string[];
  /** Undefined when the listing does not show members (`ipset list -t`). */
  readonly members: IpsetMember[] | undefined;
  readonly source: SourceRef;
}

export interface IpsetDump {
  readonly file: string;
  readonly form: "save" | "list" | "empty";
  readonly sets: ReadonlyMap<string, Ipset>;
}

type MutableSet = Omit<Ipset, "members" | "type"> & {
  type: string;
  members: IpsetMember[] | undefined;
};

const LIST_KEYS = new Set([
  "Type",
  "Revision",
  "Header",
  "Size in memory",
  "References",
  "Number of entries",
  "Members",
]);

/** Splits on blanks, keeping a double-quoted word (a `comment "…"`) whole. */
function words(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (let m = re.exec(line); m !== null; m = re.exec(line)) out.push(m[1] ?? m[2] ?? "");
  return out;
}

function familyOf(type: string, header: readonly string[]): Family | undefined {
  const i = header.indexOf("family");
  const f = i >= 0 ? header[i + 1] : undefined;
  if (f === "inet") return 4;
  if (f === "inet6") return 6;
  if (type.startsWith("bitmap:")) return 4;
  return undefined;
}

function memberOf(
  set: MutableSet,
  rest: readonly string[],
  source: SourceRef,
  diagnostics: Diagnostic[],
): IpsetMember | undefined {
  const element = rest[0];
  if (element === undefined) {
    diagnostics.push({
      code: "IPSET_SYNTAX",
      severity: "warning",
      message: `a member of set ${set.name} without an element: expected an address, CIDR or "a,b" element`,
      source,
    });
    return undefined;
  }
  const nomatch = rest.slice(1).includes("nomatch");
  const oneDim = !element.includes(",");
  const parsed = oneDim ? tryParseCidr(element) : undefined;
  const cidr = parsed && "cidr" in parsed ? parsed.cidr : undefined;
  if (oneDim && !cidr && /^(hash:(ip|net)|bitmap:ip)$/.test(set.type)) {
    diagnostics.push({
      code: "IPSET_SYNTAX",
      severity: "warning",
      message: `member "${element}" of ${set.type} set ${set.name} is not an address or CIDR; it is kept unread, so membership tests of this set cannot be decided`,
      source,
    });
  }
  return { element, ...(cidr ? { cidr } : {}), nomatch, source };
}

/**
 * Reads `ipset save` or `ipset list` output (either form, a mix of sets, prompt lines `# …`).
 *
 * @example
 * const { value } = parseIpset("create s hash:net family inet\nadd s 10.244.0.0/16\n", "nodes/n1/ipset.txt");
 * value.sets.get("s")?.members?.[0]?.element; // "10.244.0.0/16"
 */
export function parseIpset(text: string, file: string): Parsed<IpsetDump> {
  const diagnostics: Diagnostic[] = [];
  const sets = new Map<string, MutableSet>();
  let form: IpsetDump["form"] = "empty";
  let listing: MutableSet | undefined;
  let inMembers = false;
  const lines = text.split(/\r?\n/);
  const warn = (line: number, raw: string, message: string) =>
    diagnostics.push({
      code: "IPSET_SYNTAX",
      severity: "warning",
      message,
      source: { file, line, text: raw },
    });
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i] ?? "";
    const line = raw.trim();
    const lineNo = i + 1;
    const source: SourceRef = { file, line: lineNo, text: raw };
    if (line === "") {
      inMembers = false;
      continue;
    }
    if (line.startsWith("#") || line.startsWith("$ ")) continue;
    const w = words(line);
    const head = w[0];
    if (head === "create" || head === "add") {
      form = form === "list" ? "list" : "save";
      inMembers = false;
      listing = undefined;
      const name = w[1];
      if (name === undefined || (head === "create" && w[2] === undefined)) {
        warn(lineNo, raw, `"${head}" needs a set name${head === "create" ? " and a type" : ""}`);
        continue;
      }
      if (head === "create") {
        const type = w[2] ?? "";
        const header = w.slice(3);
        const family = familyOf(type, header);
        sets.set(name, {
          name,
          type,
          ...(family ? { family } : {}),
          header,
          members: [],
          source,
        });
        continue;
      }
      const set = sets.get(name);
      if (!set) {
        warn(lineNo, raw, `"add ${name}" before "create ${name}": the set's type is not known`);
        continue;
      }
      const m = memberOf(set, w.slice(2), source, diagnostics);
      if (m) set.members?.push(m);
      continue;
    }
    const kv = /^([A-Za-z][A-Za-z ]*):\s*(.*)$/.exec(line);
    if (kv && (kv[1] === "Name" || (listing && LIST_KEYS.has(kv[1] ?? "")))) {
      const key = kv[1] ?? "";
      const value = (kv[2] ?? "").trim();
      if (key === "Name") {
        form = "list";
        inMembers = false;
        if (value === "") {
          warn(lineNo, raw, "Name: without a set name");
          listing = undefined;
          continue;
        }
        // members stay "not shown" until a Members: line (`ipset list -t` has none)
        listing = { name: value, type: "", header: [], members: undefined, source };
        sets.set(value, listing);
      } else if (listing && key === "Type") {
        listing.type = value;
      } else if (listing && key === "Header") {
        const header = words(value);
        const family = familyOf(listing.type, header);
        Object.assign(listing, { header, ...(family ? { family } : {}) });
      } else if (listing && key === "Members") {
        listing.members = [];
        inMembers = true;
      }
      continue;
    }
    if (inMembers && listing) {
      const m = memberOf(listing, w, source, diagnostics);
      if (m) listing.members?.push(m);
      continue;
    }
    warn(
      lineNo,
      raw,
      "not a line of `ipset save` (create/add) or `ipset list` (Name:, Type:, Header:, Members:)",
    );
  }
  for (const s of sets.values()) {
    if (s.type === "") {
      diagnostics.push({
        code: "IPSET_SYNTAX",
        severity: "warning",
        message: `set ${s.name} has no Type: line; membership tests of it cannot be decided`,
        source: s.source,
      });
    }
    if (s.family === undefined && s.type !== "" && !s.type.startsWith("list:")) {
      const fam = familyOf(s.type, s.header);
      if (fam) Object.assign(s, { family: fam });
    }
  }
  return { value: { file, form, sets }, diagnostics };
}
