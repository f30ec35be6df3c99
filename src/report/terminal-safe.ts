/**
 * @module report/terminal-safe — text from input made safe to print into a terminal: control
 * characters (C0, DEL, C1 with ESC among them) and bidirectional overrides are shown visibly
 * (`\x1b`, `\u202e`) instead of being sent, so a comment, a name or a file name can neither move
 * the cursor, clear the screen, set the window title nor reorder what a person reads. Written by
 * hand: no library in the registry does this one job, and it is a single regular expression.
 */

/**
 * What is never sent raw: C0 (tab and newline only where the layout owns them), DEL, C1, the
 * bidi embeddings and overrides (U+202A–202E), isolates (U+2066–2069), the marks U+200E/200F and
 * U+061C, and the line and paragraph separators U+2028/2029 (some terminals break the line there).
 */
const UNSAFE_ALL =
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_KEEP_LAYOUT =
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/** One character's visible form: `\n` `\r` `\t`, `\x1b` below U+0080, `\u202e` above. */
function visibleChar(c: string): string {
  const named = NAMED[c];
  if (named !== undefined) return named;
  const code = c.charCodeAt(0);
  return code < 0x80
    ? `\\x${code.toString(16).padStart(2, "0")}`
    : `\\u${code.toString(16).padStart(4, "0")}`;
}

/**
 * `s` with every control character and bidi override shown visibly; `keepLayout` keeps tab and
 * newline (prose and code blocks whose lines the renderer lays out).
 *
 * @example
 * terminalSafe("a\x1b]0;pwned\x07b") // "a\\x1b]0;pwned\\x07b"
 * terminalSafe("one\ntwo", { keepLayout: true }) // "one\ntwo"
 */
export function terminalSafe(s: string, opts: { keepLayout?: boolean } = {}): string {
  return s.replace(opts.keepLayout ? UNSAFE_KEEP_LAYOUT : UNSAFE_ALL, visibleChar);
}

/** Whether `s` holds a character terminalSafe would show visibly (tab and newline count). */
export function hasUnsafeChar(s: string): boolean {
  UNSAFE_ALL.lastIndex = 0;
  return UNSAFE_ALL.test(s);
}

/**
 * Keys whose strings are one line by contract: names, titles, file names, commands. A newline in
 * them is shown as `\n`, so it cannot start a line of its own (a fake "next:" step, a fake hop).
 */
const ONE_LINE_KEYS: ReadonlySet<string> = new Set([
  "at",
  "command",
  "file",
  "from",
  "id",
  "key",
  "label",
  "next",
  "nextStep",
  "snapshot",
  "source",
  "sourceOnWire",
  "subject",
  "summary",
  "title",
  "to",
  "verdict",
]);

/** Keys whose strings are suggested shell commands. */
const COMMAND_KEYS: ReadonlySet<string> = new Set(["next", "command", "nextStep"]);

/**
 * A copy of `value` (an answer, a document) with every string made terminal-safe: strings under
 * a one-line key lose their newlines too, prose and code keep theirs; a suggested command
 * (`next`, `command`, `nextStep`, or any string starting `$ `) first goes through
 * `opts.command` (report/shell-quote guardCommand). Renderers of text and Markdown call it once at their door, so whatever a
 * finding carries is safe by construction.
 */
export function terminalSafeDeep<T>(
  value: T,
  opts: { readonly command?: (cmd: string) => string } = {},
): T {
  return deep(value, false, false, opts.command) as T;
}

function deep(
  v: unknown,
  oneLine: boolean,
  isCommand: boolean,
  command: ((cmd: string) => string) | undefined,
): unknown {
  if (typeof v === "string") {
    let s = isCommand && command ? command(v) : v;
    // a document's `$ command` line (a plan's step) is a command too
    if (!isCommand && command && v.startsWith("$ ")) {
      const guarded = command(v.slice(2));
      s = guarded === v.slice(2) ? v : guarded;
    }
    return terminalSafe(s, { keepLayout: !oneLine });
  }
  if (Array.isArray(v)) return v.map((x) => deep(x, oneLine, isCommand, command));
  if (v === null || typeof v !== "object") return v;
  // only plain data: a Map, a Set or a class instance passes as it is
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    out[k] = deep(x, ONE_LINE_KEYS.has(k), COMMAND_KEYS.has(k), command);
  }
  return out;
}
