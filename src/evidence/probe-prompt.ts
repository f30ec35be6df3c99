/**
 * @module evidence/probe-prompt — where a command starts in a transcript as people paste it: the
 * prompts of common shells (sh/ash/BusyBox, bash, zsh, root `# `, PowerShell, cmd.exe), probe
 * commands typed at the start of a line with no prompt, and the wrappers around a probe (`sudo`,
 * `timeout`, `ip netns exec`, `kubectl exec … --`, `sh -c`), with the pod a `kubectl exec` ran in.
 */

import type { ProbeTool } from "./probes.ts";

/** The pod a command ran in, from its `kubectl exec` prefix. */
export interface PodExec {
  /** As typed: `openvpn-0`, `pod/openvpn-0`, `deploy/openvpn`. */
  readonly pod: string;
  /** From `-n`/`--namespace`; absent when the line does not say (kubectl's context decides). */
  readonly namespace?: string;
  readonly container?: string;
}

/** A line of a transcript, as the transcript reader sees it. */
export type TranscriptLine =
  /** A command: the prompt before it (empty for a bare command) and the command as typed. */
  | { readonly kind: "command"; readonly prompt: string; readonly command: string }
  /** Looks like a prompt, but what follows is not a command (a `# comment`, output). */
  | { readonly kind: "skipped"; readonly prompt: string; readonly rest: string }
  | { readonly kind: "text" };

/** Programs whose output podpath reads, by the name people type. */
const PROBE_PROGRAMS: ReadonlyMap<string, ProbeTool> = new Map<string, ProbeTool>([
  ["ping", "ping"],
  ["ping6", "ping"],
  ["dig", "dig"],
  ["nslookup", "nslookup"],
  ["host", "host"],
  ["curl", "curl"],
  ["wget", "wget"],
  ["nc", "nc"],
  ["ncat", "nc"],
  ["netcat", "nc"],
  ["telnet", "telnet"],
  ["traceroute", "traceroute"],
  ["traceroute6", "traceroute"],
  ["tracert", "traceroute"],
  ["tracepath", "tracepath"],
  ["tracepath6", "tracepath"],
  ["mtr", "mtr"],
  ["tcp-connect", "tcp-connect"],
  ["resolve", "resolve"],
]);

/** Wrappers a probe may be typed behind. */
const WRAPPERS = new Set(["sudo", "timeout", "time", "env", "kubectl", "oc", "busybox", "ip"]);

/**
 * Common commands besides the probes: after a bare root prompt (`# `) only these (and the
 * probes) make a command; anything else there is a comment.
 */
const KNOWN_COMMANDS = new Set([
  "apk",
  "apt",
  "apt-get",
  "arp",
  "bash",
  "cat",
  "cd",
  "conntrack",
  "curl",
  "dnf",
  "echo",
  "env",
  "exit",
  "export",
  "getent",
  "grep",
  "hostname",
  "id",
  "ifconfig",
  "ip",
  "ip6tables",
  "ip6tables-save",
  "iptables",
  "iptables-save",
  "kubectl",
  "ls",
  "netstat",
  "nft",
  "nsenter",
  "openvpn",
  "printf",
  "resolvectl",
  "route",
  "sh",
  "ss",
  "sudo",
  "sysctl",
  "tcpdump",
  "uname",
  "wg",
  "which",
  "whoami",
  "yum",
]);

type Strength = "any" | "known";

/** Prompts, most specific first. `any`: a plausible command word follows; `known`: a known one. */
const PROMPTS: readonly { readonly re: RegExp; readonly strength: Strength }[] = [
  // PowerShell `PS C:\Users\x> `, pwsh on Linux `PS /home/x> `
  { re: /^PS (?:[A-Za-z]:\\[^>]*|[/~][^>]*)> ?/, strength: "any" },
  // cmd.exe `C:\Users\x>`
  { re: /^[A-Za-z]:\\[^>]*> ?/, strength: "any" },
  // RHEL/Fedora bash `[user@host dir]$ `
  { re: /^\[[\w.-]+@[\w.-]+(?: [^\]]*)?\][$#] /, strength: "any" },
  // bash/sh without a PS1 `bash-5.1$ `, `sh-5.2# `
  { re: /^(?:ba|z|k|da|a)?sh-\d+(?:\.\d+)*[$#] /, strength: "any" },
  // Debian bash `user@host:~/dir$ `, `root@pod:/# `
  { re: /^[\w.-]+@[\w.-]+:[^\s$#]*[$#] /, strength: "any" },
  // Alpine ash `pod-7f9c:/# `, `pod:~$ `
  { re: /^[\w.-]+:[^\s$#]*[$#] /, strength: "any" },
  // macOS bash `MacBook-Pro:~ alice$ `
  { re: /^[\w.-]+:\S* [\w.-]+[$#] /, strength: "any" },
  // zsh `alice@host ~ % `, `root@host /tmp # `
  { re: /^[\w.-]+@[\w.-]+ \S+ [%#] /, strength: "any" },
  // oh-my-zsh `➜  dir git:(main) ✗ `, pure/starship `❯ `
  { re: /^➜ +\S+ +(?:git:\([^)]*\) +)?(?:✗ +)?/, strength: "any" },
  { re: /^❯ /, strength: "any" },
  // BusyBox/ash `/ # `, `~ $ `, `/app $ `
  { re: /^[/~]\S* [$#] /, strength: "any" },
  // `host$ `, `user@host$ `
  { re: /^[\w.@-]+\$ /, strength: "any" },
  { re: /^\$ /, strength: "any" },
  // zsh `host% `, bare `% `, and the bare root prompt `# ` (which is also how comments start)
  { re: /^[\w.-]+% /, strength: "known" },
  { re: /^% /, strength: "known" },
  { re: /^# /, strength: "known" },
];

/** Output lines that begin with a probe's name: `traceroute to 10.0.0.1 (10.0.0.1), 30 hops max`. */
const OUTPUT_LOOKALIKE = /^(?:traceroute6?|tracepath6?|mtr) to /;

const PLAUSIBLE_WORD = /^(?:[A-Za-z_][\w.+-]*|[./~][\w./~+-]*|[A-Za-z]:\\\S*)$/;
const ASSIGNMENT = /^[A-Za-z_]\w*=/;

/** Removes a trailing shell comment (` # …` outside quotes). */
export function stripComment(text: string): string {
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"') i++;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "\\") i++;
    else if (c === "#" && (i === 0 || text[i - 1] === " " || text[i - 1] === "\t")) {
      return text.slice(0, i).trimEnd();
    }
  }
  return text;
}

/** Splits a command line into words: single and double quotes, backslash escapes; no expansion. */
export function splitWords(text: string): string[] {
  const words: string[] = [];
  let cur = "";
  let has = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < text.length) cur += text[++i];
      else cur += c;
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      has = true;
    } else if (c === "\\" && i + 1 < text.length) {
      cur += text[++i];
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

const OPERATORS = new Set(["|", "||", "&&", ";", "&", "|&"]);
const REDIRECT = /^\d*(?:>>?|<<?|>&|<&|&>)/;

/**
 * The first simple command of a shell line: words up to a pipe, `;`, `&&` or `||`, without
 * redirections (`2>&1`, `</dev/null`, `> out.txt`).
 */
export function firstCommand(words: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (OPERATORS.has(w)) break;
    if (REDIRECT.test(w)) {
      // `>` alone takes the next word as its file; `>out`, `2>&1`, `</dev/null` do not
      if (/^\d*(?:>>?|<<?|&>)$/.test(w)) i++;
      continue;
    }
    if (w.endsWith(";") && w.length > 1) {
      out.push(w.slice(0, -1));
      break;
    }
    out.push(w);
  }
  return out;
}

const KUBECTL_GLOBAL_WITH_VALUE = new Set([
  "--context",
  "--kubeconfig",
  "--cluster",
  "--user",
  "-s",
  "--server",
  "--request-timeout",
  "--token",
  "--as",
  "-v",
]);
const EXEC_WITH_VALUE = new Set(["-c", "--container", "-f", "--filename", "--pod-running-timeout"]);

/** `kubectl [globals] exec [flags] POD [flags] [--] CMD…`: the pod and the command words. */
function kubectlExec(words: readonly string[]): { exec: PodExec; rest: string[] } | undefined {
  let namespace: string | undefined;
  let container: string | undefined;
  let pod: string | undefined;
  let i = 1;
  let sawExec = false;
  for (; i < words.length; i++) {
    const w = words[i]!;
    if (w === "--") {
      i++;
      break;
    }
    const eq = /^(--?[\w-]+)=(.*)$/.exec(w);
    const name = eq ? eq[1]! : w;
    const value = (): string | undefined => (eq ? eq[2] : words[++i]);
    if (name === "-n" || name === "--namespace") namespace = value();
    else if (/^-n\S/.test(w) && !eq) namespace = w.slice(2);
    else if (name === "-c" || name === "--container") container = value();
    else if (KUBECTL_GLOBAL_WITH_VALUE.has(name) || EXEC_WITH_VALUE.has(name)) value();
    else if (w.startsWith("-")) continue;
    else if (!sawExec) {
      if (w !== "exec") return undefined;
      sawExec = true;
    } else if (pod === undefined) pod = w;
    else break; // the deprecated form without `--`: the command starts here
  }
  if (!sawExec || pod === undefined) return undefined;
  const exec: PodExec = {
    pod: pod.replace(/^pods?\//, ""),
    ...(namespace ? { namespace } : {}),
    ...(container ? { container } : {}),
  };
  return { exec, rest: words.slice(i) };
}

export interface Invocation {
  readonly tool: ProbeTool;
  /** The program as typed (without path or `.exe`). */
  readonly program: string;
  /** Words after the program name. */
  readonly args: string[];
  readonly ranIn?: PodExec;
}

/**
 * The program a command line runs: looks through `sudo`, `timeout N`, `time`, `env A=b`,
 * `ip netns exec NAME`, `busybox APPLET`, `kubectl exec POD -- …` and `sh -c '…'`.
 * @example toolOf(["kubectl", "exec", "-n", "vpn", "openvpn-0", "--", "ping", "10.8.0.1"])
 *   // → { tool: "ping", program: "ping", args: ["10.8.0.1"], ranIn: { pod: "openvpn-0", namespace: "vpn" } }
 */
export function toolOf(input: readonly string[], depth = 0): Invocation {
  let words = firstCommand(input);
  let ranIn: PodExec | undefined;
  let i = 0;
  for (;;) {
    const w = words[i];
    if (w === undefined) break;
    if (w === "sudo") {
      i++;
      while (words[i]?.startsWith("-")) i += /^-[ugCDhprT]$/.test(words[i]!) ? 2 : 1;
    } else if (w === "timeout") {
      i++;
      while (words[i]?.startsWith("-")) i += /^-[sk]$/.test(words[i]!) ? 2 : 1;
      i++; // the duration
    } else if (w === "time" || w === "busybox") i++;
    else if (w === "env") {
      i++;
      while (words[i] !== undefined && (ASSIGNMENT.test(words[i]!) || words[i]!.startsWith("-")))
        i++;
    } else if (ASSIGNMENT.test(w)) i++;
    else if (w === "ip" && words[i + 1] === "netns" && words[i + 2] === "exec") i += 4;
    else if ((w === "kubectl" || w === "oc") && ranIn === undefined) {
      const k = kubectlExec(words.slice(i));
      if (!k) break;
      ranIn = k.exec;
      words = firstCommand(k.rest);
      i = 0;
    } else break;
  }
  const prog = (words[i] ?? "").replace(/^.*[\\/]/, "").replace(/\.exe$/i, "");
  const args = words.slice(i + 1);
  const withPod = (inv: Omit<Invocation, "ranIn">): Invocation => (ranIn ? { ...inv, ranIn } : inv);
  // `sh -c 'ping …'`, `bash -lc "…"`
  if (/^(?:ba|da|a|z)?sh$/.test(prog) && depth < 3) {
    const c = args.findIndex((a) => /^-[a-z]*c[a-z]*$/.test(a));
    const script = c >= 0 ? args[c + 1] : undefined;
    if (script !== undefined) {
      const inner = toolOf(splitWords(stripComment(script)), depth + 1);
      return inner.ranIn || !ranIn ? inner : { ...inner, ranIn };
    }
  }
  if (prog === "ip" && /^r(o(u(te?)?)?)?$/.test(args[0] ?? "")) {
    return withPod({ tool: "ip-route", program: prog, args: args.slice(1) });
  }
  if (prog === "ip" && (args[0] === "-4" || args[0] === "-6") && /^r/.test(args[1] ?? "")) {
    // the family flag goes last, so `get` and its address keep their places
    return withPod({ tool: "ip-route", program: prog, args: [...args.slice(2), args[0]] });
  }
  const tool = PROBE_PROGRAMS.get(prog.toLowerCase()) ?? "unknown";
  return withPod({ tool, program: prog, args });
}

/** The first word that is not an environment assignment. */
function firstWord(words: readonly string[]): string | undefined {
  return words.find((w) => !ASSIGNMENT.test(w));
}

/** An argument a person would probe: an address, a name with a dot, a URL, localhost. */
function isTargetLike(w: string): boolean {
  return (
    (/^@?\[?[0-9a-fA-F:.]+\]?(?::\d+)?$/.test(w) && /[.:]/.test(w)) ||
    /^[a-z][a-z0-9+.-]*:\/\//i.test(w) ||
    /^@?[\w-]+(?:\.[\w-]+)+\.?(?::\d+)?(?:\/\S*)?$/.test(w) ||
    /^@?localhost(?::\d+)?$/.test(w)
  );
}

/**
 * Is a line without a prompt a probe command? Only when it starts with a probe (or a wrapper of
 * one), names something to probe, and is not one of the tools' own output lines.
 */
function isBareCommand(text: string): boolean {
  if (OUTPUT_LOOKALIKE.test(text)) return false;
  const words = splitWords(stripComment(text));
  const first = words[0];
  if (first === undefined || (!PROBE_PROGRAMS.has(first) && !WRAPPERS.has(first))) return false;
  const inv = toolOf(words);
  if (inv.tool === "unknown") return false;
  if (first === "ip" && inv.tool !== "ip-route") return false;
  if (inv.tool === "ip-route") {
    return inv.args.length === 0 || /^(?:s(how)?|l(ist)?)$/.test(inv.args[0] ?? "")
      ? inv.args.length <= 1
      : /^g(et)?$/.test(inv.args[0] ?? "") && isTargetLike(inv.args[1] ?? "");
  }
  return inv.args.some(isTargetLike);
}

/** Does the text after a prompt make a command? */
function isCommandAfterPrompt(rest: string, strength: Strength): boolean {
  const words = splitWords(stripComment(rest));
  const first = firstWord(words);
  if (first === undefined || !PLAUSIBLE_WORD.test(first)) return false;
  if (strength === "any") return true;
  return toolOf(words).tool !== "unknown" || KNOWN_COMMANDS.has(first);
}

/**
 * What a transcript line is: a command (after a prompt, or a bare probe command), a line that
 * looks like a prompt but is not followed by a command, or text (output, comments).
 * @example classifyLine("root@vpn-0:/# ping -c 1 10.8.0.1") // → command "ping -c 1 10.8.0.1"
 * @example classifyLine("# the laptop, on the VPN")          // → skipped
 */
export function classifyLine(raw: string): TranscriptLine {
  for (const p of PROMPTS) {
    const m = p.re.exec(raw);
    if (!m) continue;
    const rest = raw.slice(m[0].length);
    if (rest.trim() === "") return { kind: "text" };
    if (isCommandAfterPrompt(rest, p.strength)) {
      return { kind: "command", prompt: m[0], command: rest };
    }
    return { kind: "skipped", prompt: m[0], rest };
  }
  if (isBareCommand(raw)) return { kind: "command", prompt: "", command: raw };
  return { kind: "text" };
}
