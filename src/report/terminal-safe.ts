/**
 * @module report/terminal-safe — text from input made safe to print into a terminal: control
 * characters (C0, DEL, C1 with ESC among them) and bidirectional overrides are shown visibly
 * (`\x1b`, `\u202e`) instead of being sent, so a comment, a name or a file name can neither move
 * the cursor, clear the screen, set the window title nor reorder what a person reads. Where:
 * terminalSafeDeep, at the door of every text, Markdown and HTML renderer, shows every control
 * character in one-line fields (names, subjects, files, commands) and, in prose and code, every
 * control character but the layout's own tab and newline, plus any name from input repeated in
 * the prose whole (its newline too); JSON is left exact. Written by hand: no library in the
 * registry does this one job, and it is a single regular expression.
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
 * Keys whose strings name something from input (a node, a pod, a namespace, a file) besides the
 * one-line keys: the names prose repeats (`{ text, code: true }` spans of a document count too).
 */
const NAME_KEYS: ReadonlySet<string> = new Set([
  "name",
  "namespace",
  "node",
  "pod",
  "chain",
  "path",
]);

/**
 * The names from input in `value` that hold a character terminalSafe shows visibly: every
 * one-line or name string with such a character, and each of its `/`-separated parts that holds
 * one (so `nodes/<node>/iptables-save.txt` gives `<node>` too), longest first.
 */
export function unsafeNamesIn(value: unknown): string[] {
  const found = new Set<string>();
  const add = (s: string) => {
    if (!hasUnsafeChar(s)) return;
    found.add(s);
    for (const part of s.split("/")) if (part !== "" && hasUnsafeChar(part)) found.add(part);
  };
  const walk = (v: unknown, isName: boolean): void => {
    if (typeof v === "string") {
      if (isName) add(v);
      return;
    }
    if (Array.isArray(v)) {
      for (const x of v) walk(x, isName);
      return;
    }
    if (v === null || typeof v !== "object") return;
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return;
    const o = v as Record<string, unknown>;
    const codeSpan = o["code"] === true;
    for (const [k, x] of Object.entries(o)) {
      walk(x, ONE_LINE_KEYS.has(k) || NAME_KEYS.has(k) || (codeSpan && k === "text"));
    }
  };
  walk(value, false);
  return [...found].sort((a, b) => b.length - a.length);
}

/**
 * `s` with every one of `names` shown visibly (terminalSafe) where it occurs: a name repeated in
 * prose keeps its newline from starting a line of its own, while the prose's own line breaks stay.
 */
export function showNames(s: string, names: readonly string[]): string {
  let out = s;
  for (const n of names) if (out.includes(n)) out = out.split(n).join(terminalSafe(n));
  return out;
}

/**
 * A copy of `value` (an answer, a document) with every string made terminal-safe: strings under
 * a one-line key lose their newlines too; prose and code keep their own line breaks, but a name
 * from input they repeat (unsafeNamesIn: any subject, file, node, pod, namespace, chain or code
 * span of `value` holding a control character) is shown visibly wherever it occurs, so a node
 * named `a\nnext: rm -rf ~` cannot start a fake `next:` line inside an explanation either. A
 * suggested command (`next`, `command`, `nextStep`, or any string starting `$ `) first goes
 * through `opts.command` (report/shell-quote guardCommand). The text, Markdown and HTML renderers
 * call it once at their door, so whatever a finding carries is safe by construction; JSON keeps
 * every value exact (JSON escaping holds it).
 */
export function terminalSafeDeep<T>(
  value: T,
  opts: { readonly command?: (cmd: string) => string } = {},
): T {
  return deep(value, false, false, opts.command, unsafeNamesIn(value)) as T;
}

function deep(
  v: unknown,
  oneLine: boolean,
  isCommand: boolean,
  command: ((cmd: string) => string) | undefined,
  names: readonly string[],
): unknown {
  if (typeof v === "string") {
    let s = isCommand && command ? command(v) : v;
    // a document's `$ command` line (a plan's step) is a command too
    if (!isCommand && command && v.startsWith("$ ")) {
      const guarded = command(v.slice(2));
      s = guarded === v.slice(2) ? v : guarded;
    }
    return terminalSafe(oneLine ? s : showNames(s, names), { keepLayout: !oneLine });
  }
  if (Array.isArray(v)) return v.map((x) => deep(x, oneLine, isCommand, command, names));
  if (v === null || typeof v !== "object") return v;
  // only plain data: a Map, a Set or a class instance passes as it is
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    out[k] = deep(x, ONE_LINE_KEYS.has(k), COMMAND_KEYS.has(k), command, names);
  }
  return out;
}
