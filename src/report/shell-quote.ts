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

/** `value` as one shell word (shellWord), or undefined when no quoting holds it. */
export function shellWordOrUndefined(value: string): string | undefined {
  try {
    return shellWord(value);
  } catch (e) {
    if (e instanceof UnquotableError) return undefined;
    throw e;
  }
}

/** `value` always in single quotes (a `grep` pattern reads as one); refused as shellWord is. */
export function singleQuoted(value: string): string {
  if (hasUnsafeChar(value)) throw new UnquotableError(value);
  return `'${value.replace(/'/g, "'\\''")}'`;
}

/** A part of a command written as it is (podpath's own words, never input). */
export interface RawWord {
  readonly raw: string;
}
export const rawWord = (raw: string): RawWord => ({ raw });

/** A value sh writes in single quotes always. */
export interface QuotedWord {
  readonly quoted: string;
}
export const quoted = (value: string): QuotedWord => ({ quoted: value });

type Part = string | RawWord | QuotedWord;

function wordOf(v: Part): string {
  if (typeof v === "string") return shellWord(v);
  return "raw" in v ? v.raw : singleQuoted(v.quoted);
}

/**
 * A suggested command with every interpolated value quoted as one shell word (RawWord: podpath's
 * own text, as it is; QuotedWord: always in single quotes). When a value cannot be quoted, the
 * answer is a sentence instead of a command, so nothing unsafe is ever offered to paste.
 *
 * @example
 * sh`kubectl get node ${"a;b"}` // "kubectl get node 'a;b'"
 * sh`grep -E ${quoted("X")}` // "grep -E 'X'"
 */
export function sh(strings: TemplateStringsArray, ...values: readonly Part[]): string {
  try {
    return strings.reduce((out, s, i) => out + wordOf(values[i - 1]!) + s);
  } catch (e) {
    if (e instanceof UnquotableError) return refusedCommand(e);
    throw e;
  }
}

/** The sentence shown instead of a command whose value cannot be quoted: a shell comment. */
export function refusedCommand(e: UnquotableError): string {
  // a comment: pasted by mistake, it runs nothing
  return `# no command shown: the value ${e.message}; look at it by hand`;
}

/**
 * `s` as a literal inside an extended regular expression (`grep -E`): metacharacters escaped, and
 * a leading `-` written `[-]` so grep cannot read the pattern as an option.
 */
export function ereLiteral(s: string): string {
  return s.replace(/[\\^$.|?*+()[\]{}]/g, "\\$&").replace(/^-/, "[-]");
}

/**
 * What no podpath command holds and a pasted line must never run: a control character or line
 * break, command substitution (`$(`, a backtick) or parameter expansion (`${`) outside single
 * quotes. A renderer's last check on a command it did not build (report/output-safe).
 */
export function unsafeCommandPart(cmd: string): string | undefined {
  if (hasUnsafeChar(cmd.replace(/\t/g, " "))) return "a control character or a line break";
  let inSingle = false;
  for (let i = 0; i < cmd.length; i++) {
    const c = cmd[i]!;
    if (c === "'") inSingle = !inSingle;
    else if (inSingle) continue;
    else if (c === "\\") i++;
    else if (c === "#" && (i === 0 || /\s/.test(cmd[i - 1]!)))
      return undefined; // a comment
    else if (c === "`") return "a backtick, a command substitution";
    else if (c === "$" && (cmd[i + 1] === "(" || cmd[i + 1] === "{"))
      return "a dollar sign before a parenthesis or a brace, a command substitution or expansion";
  }
  return undefined;
}

/**
 * `cmd` when nothing in it can run more than it says (unsafeCommandPart), otherwise a sentence
 * saying why it is not shown: the renderers' last check on every suggested command.
 */
export function guardCommand(cmd: string): string {
  const why = unsafeCommandPart(cmd);
  return why === undefined
    ? cmd
    : `# no command shown: a suggested command holds ${why}, which may come from the input; look at it by hand`;
}

const REFUSED = "# no command shown: ";

/**
 * A command composed of parts built apart (sh`…` pieces joined by a caller): when a part was
 * refused, the refusal sentence alone, so no half of a command precedes it.
 *
 * @example
 * whole(`kubectl patch ${sh`${"a\nb"}`} -n x`) // "# no command shown: the value …"
 */
export function whole(cmd: string): string {
  const at = cmd.indexOf(REFUSED);
  return at <= 0 ? cmd : cmd.slice(at);
}
