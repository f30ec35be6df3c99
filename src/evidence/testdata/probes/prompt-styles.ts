/**
 * @module evidence/testdata/probes/prompt-styles — the prompts people paste transcripts with, as
 * functions that put a command line behind one, and the projection the prompt tests compare
 * (everything the reader returns except what the prompt itself changes).
 */
import type { PodExec, ProbeCommand, ProbeTranscript } from "../../probes.ts";

export interface PromptStyle {
  readonly name: string;
  readonly wrap: (command: string) => string;
  /** The command text changes (a wrapper such as sudo or kubectl exec is part of it). */
  readonly wrapsCommand?: boolean;
  /** The pod the wrapper says the command ran in. */
  readonly ranIn?: PodExec;
  /** Only for commands without single quotes (the wrapper quotes them itself). */
  readonly singleQuotes?: false;
}

export const PROMPT_STYLES: readonly PromptStyle[] = [
  { name: "root #", wrap: (c) => `# ${c}` },
  { name: "BusyBox / #", wrap: (c) => `/ # ${c}` },
  { name: "BusyBox ~ $", wrap: (c) => `~ $ ${c}` },
  { name: "BusyBox /app $", wrap: (c) => `/app $ ${c}` },
  { name: "bash user@host:path$", wrap: (c) => `alice@laptop:~/work$ ${c}` },
  { name: "bash root@pod:/#", wrap: (c) => `root@openvpn-0:/# ${c}` },
  { name: "Alpine host:/#", wrap: (c) => `openvpn-0:/# ${c}` },
  { name: "RHEL [user@host dir]$", wrap: (c) => `[alice@bastion ~]$ ${c}` },
  { name: "RHEL [root@host dir]#", wrap: (c) => `[root@bastion tmp]# ${c}` },
  { name: "bash-5.1$", wrap: (c) => `bash-5.1$ ${c}` },
  { name: "bash-5.1#", wrap: (c) => `bash-5.1# ${c}` },
  { name: "sh-5.2$", wrap: (c) => `sh-5.2$ ${c}` },
  { name: "macOS host:dir user$", wrap: (c) => `MacBook-Pro:~ alice$ ${c}` },
  { name: "zsh host%", wrap: (c) => `laptop% ${c}` },
  { name: "zsh user@host dir %", wrap: (c) => `alice@laptop ~ % ${c}` },
  { name: "oh-my-zsh ➜  dir", wrap: (c) => `➜  ~ ${c}` },
  { name: "oh-my-zsh ➜  dir git", wrap: (c) => `➜  podpath git:(main) ✗ ${c}` },
  { name: "starship ❯", wrap: (c) => `❯ ${c}` },
  { name: "PowerShell", wrap: (c) => `PS C:\\Users\\alice> ${c}` },
  { name: "cmd.exe", wrap: (c) => `C:\\Users\\alice>${c}` },
  { name: "bare command", wrap: (c) => c },
  { name: "sudo", wrap: (c) => `$ sudo ${c}`, wrapsCommand: true },
  {
    name: "kubectl exec -it POD -n NS --",
    wrap: (c) => `$ kubectl exec -it openvpn-0 -n vpn -- ${c}`,
    wrapsCommand: true,
    ranIn: { pod: "openvpn-0", namespace: "vpn" },
  },
  {
    name: "bare kubectl -n NS exec POD -c C --",
    wrap: (c) => `kubectl -n vpn exec openvpn-0 -c openvpn -- ${c}`,
    wrapsCommand: true,
    ranIn: { pod: "openvpn-0", namespace: "vpn", container: "openvpn" },
  },
  {
    name: "kubectl exec POD -- sh -c '…'",
    wrap: (c) => `root@bastion:~# kubectl exec pod/openvpn-0 -- sh -c '${c}'`,
    wrapsCommand: true,
    ranIn: { pod: "openvpn-0" },
    singleQuotes: false,
  },
];

/** Puts every command of a canonical `$ ` transcript behind `style`, output unchanged. */
export function restyle(canonical: string, style: PromptStyle): string {
  return canonical
    .split("\n")
    .map((l) => (l.startsWith("$ ") ? style.wrap(l.slice(2)) : l))
    .join("\n");
}

/**
 * The transcript without the commands `style` cannot wrap (a command holding a `'` behind a
 * wrapper that quotes with `'`), each dropped with its output.
 */
export function fitting(canonical: string, style: PromptStyle): string {
  if (style.singleQuotes !== false) return canonical;
  const out: string[] = [];
  let keep = true;
  for (const l of canonical.split("\n")) {
    if (l.startsWith("$ ")) keep = !l.includes("'");
    if (keep) out.push(l);
  }
  return out.join("\n");
}

/** Whether a transcript's commands can go behind `style`. */
export function fits(canonical: string, style: PromptStyle): boolean {
  return (
    style.singleQuotes !== false ||
    !canonical.split("\n").some((l) => l.startsWith("$ ") && l.includes("'"))
  );
}

const plain = (v: unknown): unknown =>
  JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? x.toString() : x)));

/**
 * What the reader made of a command, without what a prompt changes: the command line's text as
 * pasted, and (for wrappers) the command as typed and the pod it ran in.
 */
export function projectCommand(c: ProbeCommand, wrapsCommand: boolean): unknown {
  const { source, command, ranIn, resultSource, ...rest } = c;
  // a result decided by the command line itself cites it as typed, prompt and wrapper aside
  const onCommandLine = resultSource.line === source.line;
  return plain({
    ...rest,
    source: { file: source.file, line: source.line },
    resultSource: onCommandLine && wrapsCommand ? { ...resultSource, text: "" } : resultSource,
    ...(wrapsCommand ? {} : { command, ranIn }),
  });
}

/** The transcript's commands, projected. */
export function projectAll(t: ProbeTranscript, wrapsCommand: boolean): unknown[] {
  return t.commands.map((c) => projectCommand(c, wrapsCommand));
}
