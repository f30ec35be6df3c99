/**
 * @module iptables/tokenize — splits one iptables-save / iptables-restore line into arguments the
 * way iptables-restore does, and quotes arguments back the way iptables-save prints them.
 *
 * Hand-written because no shell-quoting library has these rules: iptables-restore knows only
 * double quotes with backslash escapes inside them (no single quotes, no `$` or glob expansion),
 * and a closing quote ends the argument.
 */

/** The arguments of one line, and which of them were written in double quotes. */
export interface Tokens {
  readonly tokens: string[];
  /** Indexes into `tokens` of arguments that were quoted (a quoted `-x` is a value, not an option). */
  readonly quoted: readonly number[];
  /** Set when a quote is not closed: the 0-based column of the opening quote. */
  readonly unterminatedQuoteAt?: number;
}

const SPACE = 32;
const TAB = 9;
const QUOTE = 34;
const BACKSLASH = 92;
const CR = 13;
const LF = 10;

/**
 * Splits `line` (from `start`) into arguments, as iptables-restore's `add_param_to_argv` does:
 * spaces and tabs separate; inside double quotes a backslash takes the next character literally
 * (`\"`, `\\`, `\'`); the closing quote ends the argument (so `""` is an empty argument); outside
 * quotes a backslash is an ordinary character. Runs in one pass without regular expressions.
 *
 * @example tokenize('-A X -m comment --comment "a \\"b\\"" -j RETURN').tokens
 *   // ["-A", "X", "-m", "comment", "--comment", 'a "b"', "-j", "RETURN"]
 */
export function tokenize(line: string, start = 0): Tokens {
  const tokens: string[] = [];
  const quoted: number[] = [];
  const n = line.length;
  let i = start;
  while (i < n) {
    let c = line.charCodeAt(i);
    if (c === SPACE || c === TAB || c === CR || c === LF) {
      i++;
      continue;
    }
    // an unquoted run: copy by slicing until a separator or an opening quote
    const runStart = i;
    while (i < n) {
      c = line.charCodeAt(i);
      if (c === SPACE || c === TAB || c === CR || c === LF || c === QUOTE) break;
      i++;
    }
    if (i >= n || c !== QUOTE) {
      tokens.push(line.slice(runStart, i));
      continue;
    }
    // a quote opens inside or at the start of this argument
    const quoteAt = i;
    let text = line.slice(runStart, i);
    i++;
    let closed = false;
    let segStart = i;
    while (i < n) {
      c = line.charCodeAt(i);
      if (c === BACKSLASH) {
        text += line.slice(segStart, i);
        if (i + 1 < n) text += line[i + 1];
        i += 2;
        segStart = i;
        continue;
      }
      if (c === QUOTE) {
        text += line.slice(segStart, i);
        i++;
        closed = true;
        break;
      }
      i++;
    }
    if (!closed) {
      text += line.slice(segStart, Math.min(i, n));
      quoted.push(tokens.length);
      tokens.push(text);
      return { tokens, quoted, unterminatedQuoteAt: quoteAt };
    }
    quoted.push(tokens.length);
    tokens.push(text);
  }
  return { tokens, quoted };
}

function isPlainChar(c: number): boolean {
  // xtables_save_string: [A-Za-z0-9_-] print bare, anything else puts the whole value in quotes
  return (
    (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 45
  );
}

/**
 * Quotes a string value as iptables-save prints strings (`xtables_save_string`, used for
 * `--comment`, `--log-prefix`, ...): bare when it is non-empty and only `[A-Za-z0-9_-]`,
 * otherwise in double quotes with `"`, `\` and `'` escaped by a backslash.
 */
export function quoteSaveString(value: string): string {
  let plain = value.length > 0;
  for (let i = 0; plain && i < value.length; i++) plain = isPlainChar(value.charCodeAt(i));
  if (plain) return value;
  let out = '"';
  for (const ch of value) {
    if (ch === '"' || ch === "\\" || ch === "'") out += "\\";
    out += ch;
  }
  return `${out}"`;
}

/**
 * Quotes an argument only when iptables-restore would otherwise split or misread it (empty,
 * whitespace, quotes, backslashes). Used for values iptables-save prints with `%s`.
 */
export function quoteArg(value: string): string {
  if (value.length === 0) return '""';
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === SPACE || c === TAB || c === QUOTE || c === BACKSLASH || c === CR || c === LF) {
      return quoteSaveString(value);
    }
  }
  return value;
}
