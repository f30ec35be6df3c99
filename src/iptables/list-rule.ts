/**
 * @module iptables/list-rule — reads one rule line of an `iptables -L` listing: the columns
 * (`num`, `pkts bytes`, target, prot, opt, `in out`, source, destination) and the match and target
 * text after them, into the parts of a {@link Rule}. What the line does not show is returned as
 * hidden parts, never as absent: interfaces without `-v`, host names without `-n`, match text no
 * reader knows.
 */
import type { Family } from "../net/cidr.ts";
import type {
  AddrMatch,
  Counters,
  HiddenPart,
  IfaceMatch,
  Match,
  ProtoMatch,
  Target,
} from "./dump.ts";
import { readMatchAt } from "./list-match-text.ts";
import { isProtocolText, protocolName } from "./list-names.ts";
import { isReadableTarget, readTargetText } from "./list-target-text.ts";
import { type Word, wordsOf } from "./list-words.ts";
import { parseIface, protoMatch } from "./rule-args.ts";
import { interpretTarget, KNOWN_TARGETS } from "./target-spec.ts";
import { parseAddr } from "./values.ts";

/** Which columns the listing has (from its column header line, or guessed from a rule line). */
export interface ListLayout {
  /** `--line-numbers`: a `num` column first. */
  readonly lineNumbers: boolean;
  /** `-v`: `pkts bytes` columns, and `in out` columns after `opt`. */
  readonly verbose: boolean;
}

/** What the listing says about how it was printed. */
export interface ListMode extends ListLayout {
  /** `-n`: addresses, ports and interfaces printed as numbers (`*` for any interface). */
  readonly numeric: boolean;
}

export interface ListedRule {
  readonly num?: number;
  readonly counters?: Counters;
  readonly protocol?: ProtoMatch;
  readonly src?: AddrMatch;
  readonly dst?: AddrMatch;
  readonly inIface?: IfaceMatch;
  readonly outIface?: IfaceMatch;
  readonly fragment?: { readonly negated: boolean };
  readonly matches: readonly Match[];
  readonly target?: Target;
  readonly hidden: readonly HiddenPart[];
}

const OPT = new Set(["--", "-f", "!f"]);

/** Is this line the column header (`num pkts bytes target prot opt in out source destination`)? */
export function readHeaderLine(line: string): ListLayout | undefined {
  const m =
    /^\s*(num\s+)?(pkts\s+bytes\s+)?target\s+prot\s+(?:opt\s+)?(in\s+out\s+)?source\s+destination\s*$/.exec(
      line,
    );
  if (!m) return undefined;
  return { lineNumbers: m[1] !== undefined, verbose: m[2] !== undefined || m[3] !== undefined };
}

/** A counter column: exact digits, or undefined when `-x` was not given and it is rounded (`12K`). */
function counter(text: string): bigint | "rounded" | undefined {
  if (/^[0-9]+$/.test(text)) return BigInt(text);
  if (/^[0-9]+[KMGTPE]$/.test(text)) return "rounded";
  return undefined;
}

const hide = (part: HiddenPart["part"], why: string): HiddenPart => ({ part, why });

const NAMED_ADDRESS =
  "printed as a name without -n; iptables -L -n or iptables-save shows the address";

/** `anywhere`, `0.0.0.0/0`, `10.0.0.0/8`, `!10.1.2.3`, a host or network name. */
function readAddress(
  text: string,
  family: Family,
): { addr?: AddrMatch; named?: boolean } | { error: string } {
  const [neg, body] = text.startsWith("!") ? [true, text.slice(1)] : [false, text];
  const any = family === 4 ? "0.0.0.0/0" : "::/0";
  const value = body === "anywhere" ? any : body;
  const r = parseAddr(value, family);
  if (r.ok) {
    // matches every address: iptables stores no test (as the save reading does)
    if (r.value.prefix === 0 && !neg) return {};
    return { addr: { cidr: r.value, negated: neg } };
  }
  // a name: a host (`localhost`), or a network from /etc/networks (`link-local/16`)
  if (/^[A-Za-z0-9_][A-Za-z0-9_.-]*(?:\/[0-9]{1,3})?$/.test(body)) return { named: true };
  return { error: `${JSON.stringify(text)} is neither an address nor a host name` };
}

type Words = ReturnType<typeof wordsOf>;

/** The `num` and `pkts bytes` columns the layout has, and where the next column starts. */
function leadColumns(
  w: Words,
  layout: ListLayout,
): { num?: number; counters?: Counters; next: number } | { error: string } {
  let k = 0;
  let num: number | undefined;
  if (layout.lineNumbers) {
    const t = w[k]?.text ?? "";
    if (!/^[0-9]{1,9}$/.test(t))
      return { error: `rule number ${JSON.stringify(t)} is not a number` };
    num = Number(t);
    k++;
  }
  let counters: Counters | undefined;
  if (layout.verbose) {
    const p = counter(w[k]?.text ?? "");
    const b = counter(w[k + 1]?.text ?? "");
    if (p === undefined || b === undefined) {
      return { error: "expected the packet and byte counters (pkts bytes) first" };
    }
    if (typeof p === "bigint" && typeof b === "bigint") counters = { packets: p, bytes: b };
    k += 2;
  }
  return {
    ...(num !== undefined ? { num } : {}),
    ...(counters ? { counters } : {}),
    next: k,
  };
}

/**
 * The target column at `w[k]` ("" for a rule without -j): the column is blank then, told by the
 * opt column (`--`, `-f`, `!f`) or, where there is none (older ip6tables), by the blank 9-wide
 * column.
 */
function targetColumn(
  w: Words,
  k: number,
): { targetName: string; next: number } | { error: string } {
  const first = w[k];
  if (first === undefined) return { error: "expected a target, prot, source and destination" };
  const gapBefore = first.start - (k === 0 ? 0 : w[k - 1]!.end);
  const protAt = (j: number) => w[j] !== undefined && isProtocolText(w[j]!.text.replace(/^!/, ""));
  if (OPT.has(w[k + 1]?.text ?? "") && protAt(k) && !OPT.has(w[k + 2]?.text ?? "")) {
    // `prot opt`: no target
    return { targetName: "", next: k };
  }
  if (OPT.has(w[k + 2]?.text ?? "")) return { targetName: first.text, next: k + 1 };
  // no target and no opt column
  if (gapBefore >= 9 && protAt(k)) return { targetName: "", next: k };
  return { targetName: first.text, next: k + 1 };
}

/** The `in` and `out` interface columns of `-v` output at `w[k]`. */
function ifaceColumns(
  w: Words,
  k: number,
  mode: { readonly numeric: boolean },
  problems: string[],
): { inIface?: IfaceMatch; outIface?: IfaceMatch; next: number } | { error: string } {
  let inIface: IfaceMatch | undefined;
  let outIface: IfaceMatch | undefined;
  let j = k;
  for (const dir of ["in", "out"] as const) {
    const t = w[j++]?.text;
    if (t === undefined) return { error: `expected the ${dir} interface column` };
    // -n prints `*` for no interface; without -n it prints `any`
    if (t === "*" || (t === "any" && !mode.numeric)) continue;
    const [neg, name] = t.startsWith("!") ? [true, t.slice(1)] : [false, t];
    const r = parseIface(name, neg);
    if (typeof r === "string") problems.push(`${dir}: ${r}`);
    else if (dir === "in") inIface = r;
    else outIface = r;
  }
  return { ...(inIface ? { inIface } : {}), ...(outIface ? { outIface } : {}), next: j };
}

/**
 * Reads a rule line. `chainHooks` tells which interfaces the chain's rules can have (`-i` is
 * refused in OUTPUT and POSTROUTING, `-o` in PREROUTING and INPUT); a listing without `-v` hides
 * only those.
 */
export function readRuleLine(
  line: string,
  layout: ListLayout,
  mode: { readonly numeric: boolean },
  family: Family,
  chainHooks: { readonly inIface: boolean; readonly outIface: boolean },
): { rule: ListedRule; problems: string[] } | { error: string } {
  const w = wordsOf(line);
  const problems: string[] = [];
  const hidden: HiddenPart[] = [];
  const lead = leadColumns(w, layout);
  if ("error" in lead) return lead;
  const { num, counters } = lead;
  const t = targetColumn(w, lead.next);
  if ("error" in t) return t;
  const { targetName } = t;
  let k = t.next;
  const protWord = w[k++]?.text;
  if (protWord === undefined || !isProtocolText(protWord.replace(/^!/, ""))) {
    return { error: `protocol ${JSON.stringify(protWord ?? "")} is not a protocol name or number` };
  }
  let protocol: ProtoMatch | undefined;
  {
    const neg = protWord.startsWith("!");
    const name = protocolName(neg ? protWord.slice(1) : protWord);
    if (name !== undefined) protocol = protoMatch(name, neg);
  }
  let fragment: { readonly negated: boolean } | undefined;
  if (OPT.has(w[k]?.text ?? "")) {
    const o = w[k]!.text;
    if (o !== "--") {
      if (family === 6) problems.push(`"${o}": fragments are an IPv4 option`);
      fragment = { negated: o === "!f" };
    }
    k++;
  }
  let inIface: IfaceMatch | undefined;
  let outIface: IfaceMatch | undefined;
  if (layout.verbose) {
    const ifs = ifaceColumns(w, k, mode, problems);
    if ("error" in ifs) return ifs;
    ({ inIface, outIface } = ifs);
    k = ifs.next;
  } else {
    const why = "iptables -L without -v does not print interfaces; iptables-save shows them";
    if (chainHooks.inIface) hidden.push(hide("in-interface", why));
    if (chainHooks.outIface) hidden.push(hide("out-interface", why));
  }
  let src: AddrMatch | undefined;
  let dst: AddrMatch | undefined;
  for (const dir of ["source", "destination"] as const) {
    const t = w[k++]?.text;
    if (t === undefined) return { error: `expected the ${dir} column` };
    const r = readAddress(t, family);
    if ("error" in r) return { error: `${dir}: ${r.error}` };
    if (r.named) hidden.push(hide(dir, NAMED_ADDRESS));
    if (r.addr && dir === "source") src = r.addr;
    else if (r.addr) dst = r.addr;
  }
  const rest = readRest(line, w, k, targetName, family, hidden);
  problems.push(...rest.problems);
  const rule: ListedRule = {
    ...(num !== undefined ? { num } : {}),
    ...(counters ? { counters } : {}),
    ...(protocol ? { protocol } : {}),
    ...(src ? { src } : {}),
    ...(dst ? { dst } : {}),
    ...(inIface ? { inIface } : {}),
    ...(outIface ? { outIface } : {}),
    ...(fragment ? { fragment } : {}),
    matches: rest.matches,
    ...(rest.target ? { target: rest.target } : {}),
    hidden,
  };
  return { rule, problems };
}

interface Rest {
  matches: Match[];
  target?: Target;
  problems: string[];
  /** Every word was read by a known printer. */
  complete: boolean;
}

/** At most this many places tried for the end of one comment that holds `*\/` itself. */
const MAX_COMMENT_ENDS = 4;

/** The text after the destination column: `[goto]`, the matches, the target's own print. */
function readRest(
  line: string,
  w: readonly Word[],
  from: number,
  targetName: string,
  family: Family,
  hidden: HiddenPart[],
): Rest {
  let k = from;
  let isGoto = false;
  if (w[k]?.text === "[goto]") {
    isGoto = true;
    k++;
  }
  const isChain = targetName !== "" && (isGoto || !KNOWN_TARGETS.has(targetName));
  const hiddenHere: HiddenPart[] = [];
  const r = readItems(line, w, k, targetName, isChain, isGoto, family, hiddenHere, 0);
  hidden.push(...hiddenHere);
  return r;
}

function readItems(
  line: string,
  w: readonly Word[],
  start: number,
  targetName: string,
  isChain: boolean,
  isGoto: boolean,
  family: Family,
  hidden: HiddenPart[],
  depth: number,
): Rest {
  const matches: Match[] = [];
  const problems: string[] = [];
  let k = start;
  const finish = (options: ReturnType<typeof readTargetText>, complete: boolean): Rest => {
    if (targetName === "") return { matches, problems, complete };
    const t = interpretTarget(targetName, isGoto, options ?? [], family);
    if (options !== undefined) problems.push(...t.problems);
    return { matches, target: t.target, problems, complete };
  };
  while (k <= w.length) {
    const opts =
      targetName === ""
        ? k === w.length
          ? []
          : undefined
        : readTargetText(targetName, isChain, line, w, k);
    if (opts !== undefined) return finish(opts, true);
    if (k === w.length) break;
    if (w[k]!.text === "/*") {
      // libxt_comment prints ` /* TEXT */` as is: TEXT may hold `*/`, so try each end in turn
      // and keep the first after which the rest of the line reads
      const ends: number[] = [];
      for (let j = k + 1; j < w.length && ends.length < MAX_COMMENT_ENDS; j++)
        if (w[j]!.text === "*/") ends.push(j);
      if (ends.length === 0) break;
      if (ends.length === 1 || depth > 2) {
        matches.push(commentMatch(line.slice(w[k]!.end + 1, w[ends[0]!]!.start - 1)));
        k = ends[0]! + 1;
        continue;
      }
      let chosen: Rest | undefined;
      let chosenHidden: HiddenPart[] = [];
      let chosenComment = "";
      for (const end of ends) {
        const comment = line.slice(w[k]!.end + 1, w[end]!.start - 1);
        const h: HiddenPart[] = [];
        const after = readItems(
          line,
          w,
          end + 1,
          targetName,
          isChain,
          isGoto,
          family,
          h,
          depth + 1,
        );
        if (chosen === undefined || (after.complete && !chosen.complete)) {
          chosen = after;
          chosenHidden = h;
          chosenComment = comment;
        }
        if (after.complete) break;
      }
      const c = commentMatch(chosenComment);
      hidden.push(...chosenHidden);
      return {
        matches: [...matches, c, ...chosen!.matches],
        ...(chosen!.target ? { target: chosen!.target } : {}),
        problems: [...problems, ...chosen!.problems],
        complete: chosen!.complete,
      };
    }
    const m = readMatchAt(w, k, family);
    if (m !== undefined) {
      matches.push(...m.matches);
      k = m.next;
      continue;
    }
    break;
  }
  return unreadFrom(line, w, k, targetName, isChain, isGoto, family, matches, problems, hidden);
}

/**
 * Words `k..` were not read by any known printer: an extension podpath does not read, then the
 * target's print. The unread stretch becomes one opaque match plus a hidden part; the target's
 * print is looked for after it (most extensions print their own name first: `TCPMSS clamp to PMTU`).
 */
function unreadFrom(
  line: string,
  w: readonly Word[],
  k: number,
  targetName: string,
  isChain: boolean,
  isGoto: boolean,
  family: Family,
  matches: Match[],
  problems: string[],
  hidden: HiddenPart[],
): Rest {
  const n = w.length;
  const printsNothing = targetName === "" || isChain || isReadableTarget(targetName, false);
  let p = n;
  let options: ReturnType<typeof readTargetText> = [];
  if (targetName !== "" && !isChain && isReadableTarget(targetName, false)) {
    options = undefined;
    for (let j = k + 1; j <= n && options === undefined; j++) {
      options = readTargetText(targetName, false, line, w, j);
      if (options !== undefined) p = j;
    }
  } else if (!printsNothing) {
    const at = w.findIndex((x, j) => j >= k && x.text === targetName);
    p = at < 0 ? n : at;
    options = undefined;
  }
  const text = (a: number, b: number) => (a >= b ? "" : line.slice(w[a]!.start, w[b - 1]!.end));
  if (p > k) {
    matches.push({ kind: "opaque", module: "unread", options: [] });
    hidden.push(
      hide(
        "match",
        `iptables -L printed ${JSON.stringify(cut(text(k, p)))}, which podpath does not read back; iptables-save shows the match`,
      ),
    );
  }
  if (options === undefined && (p < n || !isReadableTarget(targetName, false))) {
    hidden.push(
      hide(
        "target",
        `iptables -L printed ${JSON.stringify(cut(text(p, n)))} for target ${targetName}, which podpath does not read back; iptables-save shows its options`,
      ),
    );
  }
  if (targetName === "") return { matches, problems, complete: false };
  const t = interpretTarget(targetName, isGoto, options ?? [], family);
  if (options !== undefined) problems.push(...t.problems);
  return { matches, target: t.target, problems, complete: false };
}

const cut = (s: string) => (s.length > 120 ? `${s.slice(0, 117)}...` : s);

function commentMatch(comment: string): Match {
  return {
    kind: "comment",
    module: "comment",
    comment,
    options: [{ name: "--comment", negated: false, values: [comment] }],
  };
}
