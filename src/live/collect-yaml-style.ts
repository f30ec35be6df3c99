/**
 * @module live/collect-yaml-style — the choices kubectl's YAML writer (go-yaml v2, reached
 * through sigs.k8s.io/yaml) makes that the `yaml` package makes differently: the style of each
 * string scalar (plain, 'single', "double", literal block) and the order of map keys (numbers
 * inside keys compare by value, non-letters before letters). Ported from go-yaml's emitter
 * (`yaml_emitter_analyze_scalar`, `yaml_emitter_select_scalar_style`) and encoder (`stringv`,
 * `keyList.Less`), because no npm package reproduces kubectl's output byte for byte. Pure.
 */
import { Scalar } from "yaml";

type Style =
  | typeof Scalar.PLAIN
  | typeof Scalar.QUOTE_SINGLE
  | typeof Scalar.QUOTE_DOUBLE
  | typeof Scalar.BLOCK_LITERAL;

function isPrintable(cp: number): boolean {
  return (
    cp === 0x0a ||
    (cp >= 0x20 && cp <= 0x7e) ||
    cp === 0x85 ||
    (cp >= 0xa0 && cp <= 0xd7ff) ||
    (cp >= 0xe000 && cp <= 0xfffd && cp !== 0xfeff) ||
    (cp >= 0x10000 && cp <= 0x10ffff)
  );
}
const isBreak = (c: string | undefined) =>
  c === "\n" || c === "\r" || c === "\u0085" || c === "\u2028" || c === "\u2029";
const isBlankOrEnd = (c: string | undefined) =>
  c === undefined || c === " " || c === "\t" || isBreak(c);

interface Allowed {
  blockPlain: boolean;
  singleQuoted: boolean;
  block: boolean;
}

/** go-yaml's yaml_emitter_analyze_scalar, for block context (flow_level 0). */
function analyze(s: string): Allowed {
  if (s === "") return { blockPlain: true, singleQuoted: true, block: false };
  const chars = [...s];
  let blockIndicators = s.startsWith("---") || s.startsWith("...");
  let special = false;
  let lineBreaks = false;
  let leadingSpace = false;
  let leadingBreak = false;
  let trailingSpace = false;
  let trailingBreak = false;
  let breakSpace = false;
  let spaceBreak = false;
  let previousSpace = false;
  let previousBreak = false;
  let precededByWhitespace = true;
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    const followedByWhitespace = isBlankOrEnd(chars[i + 1]);
    if (i === 0) {
      if ("#,[]{}&*!|>'\"%@`".includes(c)) blockIndicators = true;
      if ((c === "?" || c === ":") && followedByWhitespace) blockIndicators = true;
      if (c === "-" && followedByWhitespace) blockIndicators = true;
    } else {
      if (c === ":" && followedByWhitespace) blockIndicators = true;
      if (c === "#" && precededByWhitespace) blockIndicators = true;
    }
    // kubectl's writer emits unicode as is; only non-printable characters force escapes
    if (!isPrintable(c.codePointAt(0)!)) special = true;
    if (isBreak(c)) lineBreaks = true;
    if (c === " ") {
      if (i === 0) leadingSpace = true;
      if (i === chars.length - 1) trailingSpace = true;
      if (previousBreak) breakSpace = true;
      previousSpace = true;
      previousBreak = false;
    } else if (isBreak(c)) {
      if (i === 0) leadingBreak = true;
      if (i === chars.length - 1) trailingBreak = true;
      if (previousSpace) spaceBreak = true;
      previousBreak = true;
      previousSpace = false;
    } else {
      previousSpace = false;
      previousBreak = false;
    }
    precededByWhitespace = isBlankOrEnd(c);
  }
  const a: Allowed = { blockPlain: true, singleQuoted: true, block: true };
  if (leadingSpace || leadingBreak || trailingSpace || trailingBreak) a.blockPlain = false;
  if (trailingSpace) a.block = false;
  if (breakSpace) {
    a.blockPlain = false;
    a.singleQuoted = false;
  }
  if (spaceBreak || special) {
    a.blockPlain = false;
    a.singleQuoted = false;
    a.block = false;
  }
  if (lineBreaks) a.blockPlain = false;
  if (blockIndicators) a.blockPlain = false;
  return a;
}

const NON_STRINGS = new Set([
  ...["", "~", "null", "Null", "NULL", "<<"],
  ...["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO"],
  ...["true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF"],
  ...[".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"],
  ...[".nan", ".NaN", ".NAN"],
]);
// strconv.ParseInt(s, 0, 64) after go-yaml removed every "_"
const GO_INT = /^[+-]?(0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+|[1-9][0-9]*|0)$/;
const YAML_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const BASE60_FLOAT = /^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$/;
// go-yaml's allowedTimestampFormats: 2006-1-2T15:4:5.999999999Z07:00 (t too), "2006-1-2 15:4:5.999999999", 2006-1-2
const TIMESTAMP =
  /^\d{4}-(0?[1-9]|1[0-2])-(0?[1-9]|[12]\d|3[01])(([Tt]\d{1,2}:\d{1,2}:\d{1,2}(\.\d+)?(Z|[+-]\d{2}:\d{2}))|( \d{1,2}:\d{1,2}:\d{1,2}(\.\d+)?))?$/;

/**
 * Whether go-yaml would read this text, written plain, as something other than a string (its
 * `resolve` table: null, bool, int, float, timestamp, merge key), or refuses it plain (base 60).
 */
function resolvesElsewhere(s: string): boolean {
  if (NON_STRINGS.has(s)) return true;
  if (!"+-0123456789.".includes(s[0] ?? "x")) return false;
  const plain = s.replaceAll("_", "");
  return (
    TIMESTAMP.test(s) ||
    GO_INT.test(plain) ||
    YAML_FLOAT.test(plain) ||
    /^-?0b[01]+$/.test(plain) ||
    BASE60_FLOAT.test(s)
  );
}

/** The style kubectl gives a string scalar; `isKey` for mapping keys (simple keys). */
export function kubectlScalarStyle(s: string, isKey: boolean): Style {
  // go-yaml's encoder asks for literal when there is a newline, plain when the text reads back
  // as a string, and double quotes otherwise; the emitter then falls back as the text requires
  let style: Style = s.includes("\n")
    ? Scalar.BLOCK_LITERAL
    : resolvesElsewhere(s)
      ? Scalar.QUOTE_DOUBLE
      : Scalar.PLAIN;
  const a = analyze(s);
  if (style === Scalar.PLAIN && (!a.blockPlain || (s === "" && isKey))) style = Scalar.QUOTE_SINGLE;
  if (style === Scalar.QUOTE_SINGLE && !a.singleQuoted) style = Scalar.QUOTE_DOUBLE;
  if (style === Scalar.BLOCK_LITERAL && (!a.block || isKey)) style = Scalar.QUOTE_DOUBLE;
  return style;
}

const isLetter = (c: string) => /\p{L}/u.test(c);
const isDigit = (c: string | undefined) => c !== undefined && c >= "0" && c <= "9";

/** go-yaml's keyList.Less for string keys, as a comparator. */
export function compareKubectlKeys(x: string, y: string): number {
  const a = [...x];
  const b = [...y];
  for (let i = 0; i < a.length && i < b.length; i++) {
    const ca = a[i]!;
    const cb = b[i]!;
    if (ca === cb) continue;
    const al = isLetter(ca);
    const bl = isLetter(cb);
    if (al && bl) return ca.codePointAt(0)! - cb.codePointAt(0)!;
    if (al || bl) return bl ? -1 : 1;
    let an = 0n;
    let bn = 0n;
    if (ca === "0" || cb === "0") {
      for (let j = i - 1; j >= 0 && isDigit(a[j]); j--) {
        if (a[j] !== "0") {
          an = 1n;
          bn = 1n;
          break;
        }
      }
    }
    let ai = i;
    let bi = i;
    for (; ai < a.length && isDigit(a[ai]); ai++) an = an * 10n + BigInt(a[ai]!.charCodeAt(0) - 48);
    for (; bi < b.length && isDigit(b[bi]); bi++) bn = bn * 10n + BigInt(b[bi]!.charCodeAt(0) - 48);
    if (an !== bn) return an < bn ? -1 : 1;
    if (ai !== bi) return ai - bi;
    return ca.codePointAt(0)! - cb.codePointAt(0)!;
  }
  return a.length - b.length;
}

const BEST_WIDTH = 80;

/**
 * Folds long one-line scalars as go-yaml's emitter does (`yaml_emitter_write_plain_scalar`,
 * `_single_quoted_`, `_double_quoted_`): at a space, once the line is past column 80 and the
 * next character is not a space, the line breaks and continues two columns right of where its
 * key (or `- `) starts. Lines inside block scalars are left alone.
 */
export function foldLikeKubectl(text: string): string {
  const out: string[] = [];
  let blockIndent = -1;
  for (const line of text.split("\n")) {
    const indent = line.length - line.trimStart().length;
    if (blockIndent >= 0) {
      if (line.trim() === "" || indent > blockIndent) {
        out.push(line);
        continue;
      }
      blockIndent = -1;
    }
    const m =
      /^(\s*(?:- )*)((?:'(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^'"\s](?:[^:]|:(?! ))*?): )?(.*)$/.exec(
        line,
      );
    if (!m) {
      out.push(line);
      continue;
    }
    const lead = m[1]!;
    const key = m[2] ?? "";
    const value = m[3]!;
    if (/^[|>][-+0-9]*$/.test(value)) {
      // a block scalar starts; its lines are deeper than the key's
      blockIndent = [...lead].length;
      out.push(line);
      continue;
    }
    const start = [...lead].length + [...key].length;
    const contIndent = " ".repeat((key ? start - [...key].length : [...lead].length - 2) + 2);
    out.push(lead + key + foldScalar(value, start, contIndent));
  }
  return out.join("\n");
}

function foldScalar(value: string, start: number, cont: string): string {
  if (start + [...value].length <= BEST_WIDTH + 1 || !value.includes(" ")) return value;
  const q = value[0];
  const chars = [...value];
  if (q === "'" || q === '"') {
    // the quoted text between the quotes; escapes and doubled quotes count as written
    return `${q}${foldWords(chars.slice(1, -1), start + 1, cont, q)}${q}`;
  }
  return foldWords(chars, start, cont, undefined);
}

/**
 * Breaks a scalar's text (between its quotes when `quote` is set) at single spaces past
 * BEST_WIDTH. Inside quotes a break never falls on the first or last character, a double-quoted
 * text keeps its escapes whole and escapes the space that follows a break.
 */
function foldWords(
  body: readonly string[],
  startCol: number,
  cont: string,
  quote: "'" | '"' | undefined,
): string {
  let col = startCol;
  let spaces = false;
  let res = "";
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (quote === '"' && c === "\\") {
      res += c + (body[i + 1] ?? "");
      col += 2;
      i++;
      spaces = false;
      continue;
    }
    if (c === " ") {
      const last = i === body.length - 1;
      const nextSpace = body[i + 1] === " ";
      const canBreak =
        !spaces &&
        col > BEST_WIDTH &&
        (quote === undefined || (i !== 0 && !last)) &&
        (quote === '"' || !nextSpace);
      if (canBreak) {
        res += `\n${cont}`;
        col = cont.length;
        if (quote === '"' && nextSpace) {
          res += "\\";
          col++;
        }
      } else {
        res += c;
        col++;
      }
      spaces = true;
      continue;
    }
    res += c;
    col++;
    spaces = false;
  }
  return res;
}
