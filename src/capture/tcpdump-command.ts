/**
 * @module capture/tcpdump-command — shell prompts pasted with tcpdump's output (`$ sudo tcpdump
 * -ni any host 10.20.30.40`, `root@node:~# tcpdump -netvv -r x.pcap`, `[root@n ~]# …`, `/ # …`)
 * and, when the prompt holds a tcpdump command, what its flags say about the text that follows:
 * names or numbers (`-n`), the time column (`-t`…`-ttttt`), link headers (`-e`), payload printed
 * as ASCII (`-A`), the interface, the file read and the filter.
 */

/** What a pasted tcpdump command line says about the output after it. */
export interface TcpdumpCommand {
  /** The command as pasted, from `tcpdump` on. */
  readonly text: string;
  /** How many `-n`: 0 means hosts and ports may be printed as names. */
  readonly numeric: number;
  /** How many `-t`: 1 none, 2 epoch, 3 delta, 4 date, 5 since the first packet; 0 clock. */
  readonly timeFlags: number;
  readonly linkHeaders: boolean;
  readonly verbose: number;
  /** `-A`: each packet is followed by its bytes as text, lines that can start with anything. */
  readonly ascii: boolean;
  readonly quiet: boolean;
  readonly iface?: string;
  readonly file?: string;
  /** The capture filter (`host 10.20.30.40 and port 5432`), when one was given. */
  readonly filter?: string;
}

/**
 * A prompt, then the command: `$ `, `# `, `% `, `> `, `user@host:path# `, `user@host path % `,
 * `[user@host path]$ `, `host:path user$ `, `bash-5.1# `, `/ # `, `~ $ `, `PS C:\> `, after an
 * optional `(venv) `.
 */
const PROMPT =
  /^(?:\([^()\s]+\) )?(?:\[[^\]\n]*\]|[\w.-]+@[\w.-]+(?::[^\s#$%>]*| [^\s#$%>]+)?|[\w.-]+:\S* [\w.-]+|(?:ba|z|k|da)?sh-[\d.]+|[~/][^\s#$%>]*|PS [A-Za-z]:\\[^>]*)? ?[#$%>](?: (.*))?$/;

/**
 * Whether a line is a shell prompt; `command` is set when it runs tcpdump. undefined: not a prompt.
 */
export function readPrompt(line: string): { command?: TcpdumpCommand } | undefined {
  const m = PROMPT.exec(line);
  if (!m) return undefined;
  const command = parseCommand(m[1] ?? "");
  return command === undefined ? {} : { command };
}

/** tcpdump's options that take an argument (its getopt string, 4.99). */
const WITH_ARG = new Set("BCEFGiJjMmQrsTVWwyzZc".split(""));
const LONG_WITH_ARG = new Set([
  "--interface",
  "--time-stamp-type",
  "--time-stamp-precision",
  "--snapshot-length",
  "--direction",
  "--buffer-size",
  "--count",
  "--relinquish-privileges",
]);
const SHELL_STOP = /^(?:\||\|\||&&|;|&|\|&|\d?>>?.*|<.*)$/;

/** Reads the tcpdump command in a prompt line's text (after sudo, kubectl … --, nsenter …). */
export function parseCommand(text: string): TcpdumpCommand | undefined {
  const words = shellWords(text);
  const at = words.findIndex((w) => /(?:^|\/)tcpdump$/.test(w));
  if (at < 0) return undefined;
  let numeric = 0;
  let timeFlags = 0;
  let linkHeaders = false;
  let verbose = 0;
  let ascii = false;
  let quiet = false;
  let iface: string | undefined;
  let file: string | undefined;
  const filter: string[] = [];
  const end = words.findIndex((w, i) => i > at && SHELL_STOP.test(w));
  const args = words.slice(at + 1, end < 0 ? undefined : end);
  for (let i = 0; i < args.length; i++) {
    const w = args[i]!;
    if (w === "--") {
      filter.push(...args.slice(i + 1));
      break;
    }
    if (w.startsWith("--")) {
      const [name, value] = w.split("=", 2) as [string, string | undefined];
      const arg = value ?? (LONG_WITH_ARG.has(name) ? args[++i] : undefined);
      if (name === "--interface") iface = arg;
      else if (name === "--verbose") verbose++;
      continue;
    }
    if (!w.startsWith("-") || w === "-") {
      filter.push(w);
      continue;
    }
    for (let j = 1; j < w.length; j++) {
      const c = w[j]!;
      if (WITH_ARG.has(c)) {
        const arg = j + 1 < w.length ? w.slice(j + 1) : args[++i];
        if (c === "i") iface = arg;
        else if (c === "r") file = arg;
        break;
      }
      if (c === "n") numeric++;
      else if (c === "t") timeFlags++;
      else if (c === "e") linkHeaders = true;
      else if (c === "v") verbose++;
      else if (c === "A") ascii = true;
      else if (c === "q") quiet = true;
    }
  }
  return {
    text: words.slice(at, end < 0 ? undefined : end).join(" "),
    numeric,
    timeFlags,
    linkHeaders,
    verbose,
    ascii,
    quiet,
    ...(iface === undefined ? {} : { iface }),
    ...(file === undefined ? {} : { file }),
    ...(filter.length === 0 ? {} : { filter: filter.join(" ") }),
  };
}

/** Splits a command line as a shell would for plain words, '…' and "…" (no expansion). */
function shellWords(text: string): string[] {
  const words: string[] = [];
  let cur = "";
  let has = false;
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else cur += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      has = true;
    } else if (c === " " || c === "\t") {
      if (has) words.push(cur);
      cur = "";
      has = false;
    } else {
      cur += c;
      has = true;
    }
  }
  if (has) words.push(cur);
  return words;
}
