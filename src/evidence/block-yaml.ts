/**
 * @module evidence/block-yaml — a fast reader for the plain block YAML that kubectl prints
 * (sigs.k8s.io/yaml): block mappings and sequences, single-line plain and quoted scalars, literal
 * block scalars, `{}` and `[]`. The `yaml` package reads about half a megabyte a second here, so
 * `kubectl get pods -A -o yaml` of a large cluster would take a minute; this reads the same text
 * some tens of times faster. It answers only when it is sure: anything outside that subset
 * (anchors, tags, flow collections, folded or multi-line scalars, duplicate keys, tabs, floats...)
 * returns undefined and the caller uses the full parser. Values equal the `yaml` package's
 * (YAML 1.2 core schema), positions equal `evidence/yaml-source`'s; a differential test checks both.
 */
import { lineAt } from "./text-lines.ts";
import { offsetAfterEscapedNewlines, sourceLineOf } from "./yaml-source.ts";

export type BlockPath = readonly (string | number)[];

/** Where a node is written. */
interface Pos {
  readonly off: number;
  readonly keyOff?: number;
  /** Scalars: `null` nodes are cited at their key. */
  readonly isNull?: boolean;
  readonly map?: Map<string, Pos>;
  readonly seq?: Pos[];
  /** String scalars: how it is written, for lines inside it. */
  readonly style?: "plain" | "single" | "double" | "literal";
  readonly end?: number;
}

export interface BlockDocument {
  readonly value: unknown;
  /** Offset to cite for the field at `path` (collections and nulls at their key), if present. */
  locate(path: BlockPath): number | undefined;
  /** Offset to cite for line `n` (1-based) of the string at `path`. */
  locateInString(path: BlockPath, n: number): number | undefined;
}

class Bail extends Error {}
const bail = (): never => {
  throw new Bail();
};

interface Line {
  readonly start: number;
  readonly indent: number;
  /** Text after the indentation. */
  readonly body: string;
}

// YAML 1.2.2 §10.3.2 (core schema): plain scalars that are not strings.
const NULL = /^(?:~|null|Null|NULL)$/;
const BOOL = /^(?:true|True|TRUE|false|False|FALSE)$/;
const INT = /^[-+]?[0-9]+$/;
const OTHER_NUMBER =
  /^(?:0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;

/** Reads `text` when it is within the subset; undefined otherwise. */
export function readBlockYaml(text: string): BlockDocument[] | undefined {
  // CRLF files and byte-order marks are left to the full parser.
  if (text.includes("\r") || text.charCodeAt(0) === 0xfeff) return undefined;
  try {
    return parse(text);
  } catch (e) {
    if (e instanceof Bail) return undefined;
    throw e;
  }
}

function parse(text: string): BlockDocument[] {
  const all: Line[] = [];
  for (let start = 0; start < text.length; ) {
    let nl = text.indexOf("\n", start);
    if (nl < 0) nl = text.length;
    let i = start;
    while (text.charCodeAt(i) === 32) i++;
    if (text.charCodeAt(i) === 9) bail();
    all.push({ start, indent: i - start, body: text.slice(i, nl) });
    start = nl + 1;
  }
  // Documents are separated by `---` lines.
  const docs: Line[][] = [[]];
  for (const l of all) {
    if (l.indent === 0 && l.body.startsWith("---")) {
      if (l.body.trimEnd() !== "---") bail();
      docs.push([]);
    } else if (l.indent === 0 && (l.body.startsWith("...") || l.body.startsWith("%"))) bail();
    else docs[docs.length - 1]!.push(l);
  }
  let starts: number[] | undefined;
  const lineStarts = () => {
    if (!starts) {
      starts = [0];
      for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
    }
    return starts;
  };
  const out: BlockDocument[] = [];
  for (const lines of docs) {
    const content = (l: Line) => l.body !== "" && !l.body.startsWith("#");
    // empty documents (a trailing `---`) carry nothing
    if (!lines.some(content)) continue;
    const p = new Reader(text, lines);
    const first = p.next(0);
    if (first === undefined || lines[first]!.indent !== 0) bail();
    const [value, pos, after] = p.node(first!, 0);
    if (p.next(after) !== undefined) bail();
    out.push(document(text, value, pos, lineStarts));
  }
  return out;
}

/** Deeper than any object kubectl prints (a Pod's deepest path is about 15 levels). */
const MAX_DEPTH = 128;

class Reader {
  readonly text: string;
  readonly lines: readonly Line[];
  constructor(text: string, lines: readonly Line[]) {
    this.text = text;
    this.lines = lines;
  }

  /** Index of the next line at or after `i` that is not blank or a comment. */
  next(i: number): number | undefined {
    for (let j = i; j < this.lines.length; j++) {
      const b = this.lines[j]!.body;
      if (b !== "" && !b.startsWith("#")) return j;
    }
    return undefined;
  }

  /** How deep the node being read is nested. */
  private depth = 0;

  /**
   * A block node starting on line `i` at column `indent` (a mapping, a sequence). Nesting deeper
   * than kubectl ever prints is left to the full parser (and keeps this reader off the stack's end).
   */
  node(i: number, indent: number): [unknown, Pos, number] {
    if (this.depth >= MAX_DEPTH) bail();
    this.depth++;
    try {
      const body = this.lines[i]!.body;
      if (body === "-" || body.startsWith("- ")) return this.seq(i, indent);
      return this.map(i, indent, body, this.lines[i]!.start + indent);
    } finally {
      this.depth--;
    }
  }

  seq(i: number, indent: number): [unknown[], Pos, number] {
    const values: unknown[] = [];
    const items: Pos[] = [];
    let j: number | undefined = i;
    const start = this.lines[i]!.start + indent;
    while (j !== undefined) {
      const l = this.lines[j]!;
      if (l.indent !== indent || !(l.body === "-" || l.body.startsWith("- "))) break;
      let k = 1;
      while (l.body.charCodeAt(k) === 32) k++;
      const rest = l.body.slice(k);
      const col = indent + k;
      let v: unknown;
      let pos: Pos;
      let after: number;
      if (rest === "" || rest.startsWith("#")) {
        const n = this.next(j + 1);
        // an empty item (null): the full parser places it differently; leave it to that
        if (n === undefined || this.lines[n]!.indent <= indent) return bail();
        [v, pos, after] = this.node(n, this.lines[n]!.indent);
      } else if (rest === "-" || rest.startsWith("- ") || rest.startsWith("? ")) {
        return bail();
      } else if (keyEnd(rest) !== undefined) {
        [v, pos, after] = this.map(j, col, rest, l.start + col);
      } else {
        [v, pos, after] = this.scalar(j, rest, l.start + col, indent);
      }
      values.push(v);
      items.push(pos);
      j = this.next(after);
      if (j !== undefined && this.lines[j]!.indent > indent) bail();
    }
    return [values, { off: start, seq: items }, j ?? this.lines.length];
  }

  /**
   * A mapping whose first entry is `firstBody` at offset `firstOff` on line `i` (after `- ` when
   * it opens a sequence item); further entries are lines at column `indent`.
   */
  map(
    i: number,
    indent: number,
    firstBody: string,
    firstOff: number,
  ): [Record<string, unknown>, Pos, number] {
    const value: Record<string, unknown> = {};
    const keys = new Map<string, Pos>();
    let j: number | undefined = i;
    let body = firstBody;
    let off = firstOff;
    for (;;) {
      const ke = keyEnd(body);
      if (ke === undefined) bail();
      const key = readKey(body.slice(0, ke!));
      if (keys.has(key) || key === "__proto__") bail();
      let k = ke! + 1;
      while (body.charCodeAt(k) === 32) k++;
      const rest = body.slice(k);
      const valueOff = off + k;
      let v: unknown;
      let pos: Pos;
      let after: number;
      if (rest === "" || rest.startsWith("#")) {
        const n = this.next(j! + 1);
        const nl = n === undefined ? undefined : this.lines[n]!;
        if (nl && nl.indent > indent) [v, pos, after] = this.node(n!, nl.indent);
        else if (nl && nl.indent === indent && (nl.body === "-" || nl.body.startsWith("- ")))
          [v, pos, after] = this.seq(n!, indent);
        else [v, pos, after] = [null, { off: off + ke! + 1, isNull: true }, j! + 1];
      } else {
        [v, pos, after] = this.scalar(j!, rest, valueOff, indent);
      }
      value[key] = v;
      keys.set(key, { ...pos, keyOff: off });
      j = this.next(after);
      if (j === undefined) break;
      const l = this.lines[j]!;
      // more indented: a continuation or a node without a key, which this reader leaves alone
      if (l.indent > indent) bail();
      if (l.indent < indent) break;
      // a sequence entry right after a complete entry is not valid here
      if (l.body === "-" || l.body.startsWith("- ")) bail();
      body = l.body;
      off = l.start + indent;
    }
    return [value, { off: firstOff, map: keys }, j ?? this.lines.length];
  }

  /** A scalar written after `key: ` or `- ` on line `i`; `parent` is the enclosing indentation. */
  scalar(i: number, rest: string, off: number, parent: number): [unknown, Pos, number] {
    const c = rest[0]!;
    const flow = rest.replace(/ +$/, "");
    if (flow === "{}") return [{}, { off, map: new Map() }, this.continues(i, parent)];
    if (flow === "[]") return [[], { off, seq: [] }, this.continues(i, parent)];
    if (c === "|") return this.literal(i, rest, off, parent);
    if (c === '"') {
      const close = closingDoubleQuote(rest);
      const raw = rest.slice(1, close);
      if (close < 0 || !onlyComment(rest.slice(close + 1))) bail();
      if (/[\t\x00-\x1f]/.test(raw) || /\\[^"\\/bfnrtu]/.test(raw)) bail();
      let v: unknown;
      try {
        v = JSON.parse(`"${raw}"`);
      } catch {
        bail();
      }
      return [v, { off, style: "double", end: off + close + 1 }, this.continues(i, parent)];
    }
    if (c === "'") {
      const m = /^'((?:[^']|'')*)'/.exec(rest);
      if (!m || !onlyComment(rest.slice(m[0].length))) bail();
      const v = m![1]!.replaceAll("''", "'");
      return [v, { off, style: "single", end: off + m![0].length }, this.continues(i, parent)];
    }
    if ("[]{}#&*!>%@`?:,".includes(c) || (c === "-" && (rest[1] === undefined || rest[1] === " ")))
      bail();
    const first = rest.replace(/ +$/, "");
    const badPlain = (t: string) =>
      t.includes(" #") || t.includes(": ") || t.endsWith(":") || t.includes("\t");
    if (badPlain(first)) bail();
    // YAML 1.2 §6.5 and §7.3.3: a plain scalar continues on more indented lines; a single line
    // break folds into a space, each empty line into a newline.
    let plain = first;
    let end = off + first.length;
    let after = i + 1;
    let empties = 0;
    for (let j = i + 1; j < this.lines.length; j++) {
      const l = this.lines[j]!;
      if (l.body === "") {
        empties++;
        continue;
      }
      if (l.indent <= parent || l.body.startsWith("#")) break;
      const t = l.body.replace(/ +$/, "");
      if (badPlain(t)) bail();
      plain += empties === 0 ? ` ${t}` : "\n".repeat(empties);
      if (empties > 0) plain += t;
      empties = 0;
      end = l.start + l.indent + t.length;
      after = j + 1;
    }
    if (NULL.test(plain)) return [null, { off, isNull: true }, after];
    if (BOOL.test(plain)) return [plain[0] === "t" || plain[0] === "T", { off }, after];
    if (INT.test(plain)) {
      const n = Number(plain);
      if (!Number.isSafeInteger(n)) bail();
      return [n, { off }, after];
    }
    if (OTHER_NUMBER.test(plain)) bail();
    return [plain, { off, style: "plain", end }, after];
  }

  /** The line after a single-line scalar; a more indented line there would continue it: bail. */
  continues(i: number, parent: number): number {
    const n = this.next(i + 1);
    if (n !== undefined && this.lines[n]!.indent > parent) bail();
    return i + 1;
  }

  /** `|`, `|-`, `|+` (YAML 1.2 §8.1.2), content more indented than `parent`. */
  literal(i: number, header: string, off: number, parent: number): [string, Pos, number] {
    const m = /^\|([-+]?)( +#.*)?$/.exec(header.replace(/ +$/, ""));
    if (!m) bail();
    const chomp = m![1];
    const content: string[] = [];
    let indent = -1;
    let j = i + 1;
    let maxEmpty = 0;
    for (; j < this.lines.length; j++) {
      const l = this.lines[j]!;
      const raw = this.text.slice(l.start, l.start + l.indent + l.body.length);
      if (l.body === "") {
        if (indent >= 0 && l.indent > indent) content.push(raw.slice(indent));
        else content.push("");
        if (indent < 0) maxEmpty = Math.max(maxEmpty, l.indent);
        continue;
      }
      if (indent < 0) {
        if (l.indent <= parent) break;
        indent = l.indent;
        if (maxEmpty > indent) bail();
      }
      if (l.indent < indent) break;
      content.push(raw.slice(indent));
    }
    let end = content.length;
    while (end > 0 && content[end - 1] === "") end--;
    const trailing = content.length - end;
    const body = content.slice(0, end).join("\n");
    let value: string;
    if (chomp === "-") value = body;
    else if (chomp === "+")
      value = end === 0 ? "\n".repeat(trailing) : `${body}\n${"\n".repeat(trailing)}`;
    else value = end === 0 ? "" : `${body}\n`;
    if (indent < 0 && chomp === "+") bail();
    return [value, { off, style: "literal" }, j];
  }
}

function onlyComment(s: string): boolean {
  return /^( *| +#.*)$/.test(s);
}

function closingDoubleQuote(s: string): number {
  for (let i = 1; i < s.length; i++) {
    if (s[i] === "\\") i++;
    else if (s[i] === '"') return i;
  }
  return -1;
}

/** Index of the `:` that ends a mapping key on this line, if the line is a `key: value` entry. */
function keyEnd(body: string): number | undefined {
  const c = body[0];
  if (c === '"') {
    const close = closingDoubleQuote(body);
    return close > 0 &&
      body[close + 1] === ":" &&
      (body[close + 2] === undefined || body[close + 2] === " ")
      ? close + 1
      : undefined;
  }
  if (c === "'") {
    const m = /^'((?:[^']|'')*)'/.exec(body);
    const at = m ? m[0].length : -1;
    return m && body[at] === ":" && (body[at + 1] === undefined || body[at + 1] === " ")
      ? at
      : undefined;
  }
  for (let i = body.indexOf(":"); i >= 0; i = body.indexOf(":", i + 1)) {
    if (i + 1 === body.length || body.charCodeAt(i + 1) === 32) {
      const comment = body.indexOf(" #");
      return comment >= 0 && comment < i ? undefined : i;
    }
  }
  return undefined;
}

function readKey(raw: string): string {
  const k = raw.replace(/ +$/, "");
  if (k.startsWith('"')) {
    const inner = k.slice(1, -1);
    if (/[\t\x00-\x1f]/.test(inner) || /\\[^"\\/bfnrtu]/.test(inner)) bail();
    try {
      return JSON.parse(k) as string;
    } catch {
      return bail();
    }
  }
  if (k.startsWith("'")) return k.slice(1, -1).replaceAll("''", "'");
  // Keys that are not plain strings (numbers, booleans, null, merge keys) go to the full parser.
  if (
    k === "" ||
    "[]{}#&*!|>'\"%@`?:,-<".includes(k[0]!) ||
    NULL.test(k) ||
    BOOL.test(k) ||
    INT.test(k) ||
    OTHER_NUMBER.test(k)
  )
    bail();
  return k;
}

function document(
  text: string,
  value: unknown,
  root: Pos | undefined,
  lineStarts: () => readonly number[],
): BlockDocument {
  const find = (path: BlockPath): Pos | undefined => {
    let p = root;
    for (const seg of path) {
      if (!p) return undefined;
      p = typeof seg === "number" && p.seq ? p.seq[seg] : p.map?.get(String(seg));
    }
    return p;
  };
  const lineOf = (off: number) => lineAt(lineStarts(), off);
  const lineText = (line: number) => {
    const starts = lineStarts();
    const from = starts[line - 1]!;
    const to = line < starts.length ? starts[line]! - 1 : text.length;
    return text.slice(from, to).trimEnd();
  };
  const firstNonSpace = (at: number) => {
    let i = at;
    while (text[i] === " " || text[i] === "\t") i++;
    return text[i] === "\n" || text[i] === undefined ? at : i;
  };
  return {
    value,
    locate: (path) => {
      const p = find(path);
      if (!p) return undefined;
      const atKey = p.map !== undefined || p.seq !== undefined || p.isNull === true;
      return atKey && p.keyOff !== undefined ? p.keyOff : p.off;
    },
    locateInString: (path, n) => {
      const p = find(path);
      const v = valueAt(value, path);
      if (!p?.style || typeof v !== "string" || !Number.isInteger(n) || n < 1) return undefined;
      if (n > v.split("\n").length) return undefined;
      if (p.style === "literal") {
        // the n-th line after the header line
        let at = text.indexOf("\n", p.off);
        for (let k = 1; k < n && at >= 0; k++) at = text.indexOf("\n", at + 1);
        return at < 0 ? p.off : firstNonSpace(at + 1);
      }
      if (p.style === "double") {
        return offsetAfterEscapedNewlines(text, p.off + 1, p.end ?? text.length, n - 1) ?? p.off;
      }
      // Plain or single-quoted: find the line's text in order, as evidence/yaml-source does.
      const lines = v.split("\n");
      const line = sourceLineOf(lines, n, lineOf(p.off), lineOf(p.end ?? p.off), lineText);
      return firstNonSpace(lineStarts()[line - 1]!);
    },
  };
}

function valueAt(value: unknown, path: BlockPath): unknown {
  let v = value;
  for (const seg of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<string | number, unknown>)[seg];
  }
  return v;
}
