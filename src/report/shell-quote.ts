/**
 * @module report/shell-quote — values from input placed into the shell commands podpath suggests
 * (next steps, plan steps), quoted so each stays one literal word in any POSIX shell: single
 * quotes, `'` written as `'\''`. A value no quoting shows safely (NUL, newline, other control
 * characters, bidi overrides: a pasted line would run or read differently) is refused, and the
 * command is replaced by a sentence saying why. Written by hand: `shell-quote` (the registry's
 * usual choice) mixes quoting styles and quotes newlines and escapes rather than refusing them;
 * POSIX single quoting is a few lines.
 */
import { hasUnsafeChar, terminalSafe } from "./terminal-safe.ts";

/** A word that needs no quoting in any POSIX shell (and is not empty). */
const BARE = /^[A-Za-z0-9_@%+=:,./-]+$/;

export class UnquotableError extends Error {
  override readonly name = "UnquotableError";
  readonly code = "ERR_UNQUOTABLE";
  readonly value: string;
  constructor(value: string) {
    super(
      `${JSON.stringify(terminalSafe(value))} holds a control character or a line break, which no shell quoting shows safely`,
    );
    this.value = value;
  }
}

/**
 * `value` as one shell word: as it is when it needs no quoting, otherwise in single quotes.
 * Throws UnquotableError for a value with a control character, newline or bidi override. It
 * does not stop a word starting with `-` from being read as an option: builders put `--` or
 * `-e` before such a word.
 *
 * @example
 * shellWord("IP-MASQ-AGENT") // "IP-MASQ-AGENT"
 * shellWord("it's $(x)") // "'it'\\''s $(x)'"
 */
export function shellWord(value: string): string {
  if (hasUnsafeChar(value)) throw new UnquotableError(value);
  if (BARE.test(value)) return value;
  return `'${value.replace(/'/g, "'\\''")}'`;
}

/** A part of a command written as it is (podpath's own words, never input). */
export interface RawWord {
  readonly raw: string;
}
export const rawWord = (raw: string): RawWord => ({ raw });

/**
 * A suggested command with every interpolated value quoted as one shell word (RawWord: podpath's
 * own text, as it is). When a value cannot be quoted, the answer is a sentence instead of a
 * command, so nothing unsafe is ever offered to paste.
 *
 * @example
 * sh`iptables-save -t nat | grep -E ${"X'; rm -rf ~; '"}` // "iptables-save -t nat | grep -E 'X'\\''; rm -rf ~; '\\'''"
 */
export function sh(
  strings: TemplateStringsArray,
  ...values: readonly (string | RawWord)[]
): string {
  try {
    return strings.reduce((out, s, i) => {
      if (i === 0) return s;
      const v = values[i - 1]!;
      return out + (typeof v === "string" ? shellWord(v) : v.raw) + s;
    });
  } catch (e) {
    if (e instanceof UnquotableError) return refusedCommand(e);
    throw e;
  }
}

/** The sentence shown instead of a command whose value cannot be quoted. */
export function refusedCommand(e: UnquotableError): string {
  return `(no command shown: the value ${e.message}; look at it by hand)`;
}

/** `s` as a literal inside an extended regular expression (`grep -E`): metacharacters escaped. */
export function ereLiteral(s: string): string {
  return s.replace(/[\\^$.|?*+()[\]{}]/g, "\\$&");
}
