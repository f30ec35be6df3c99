/**
 * @module cli/commands/completion — `podpath completion bash|zsh|fish`: a shell completion
 * script generated from the CLI's own command tree (commands, their options, the values an option
 * accepts), so it never falls behind the help. Subcommands and `-`-options complete from the tree;
 * anything else completes as a file name.
 */
import type { Command } from "commander";
import { type Io, UsageError } from "../io.ts";

export const SHELLS = ["bash", "zsh", "fish"] as const;
export type Shell = (typeof SHELLS)[number];

/** One command as completion sees it. */
export interface CompletionNode {
  /** Names from the root, e.g. `["plan", "vpn"]`; `[]` for podpath itself. */
  readonly path: readonly string[];
  readonly description: string;
  readonly subcommands: readonly CompletionNode[];
  readonly options: readonly {
    readonly flags: readonly string[];
    readonly description: string;
    readonly takesValue: boolean;
    readonly choices: readonly string[];
  }[];
}

/** The tree below `cmd` (help and hidden options left out). */
export function completionTree(cmd: Command, path: readonly string[] = []): CompletionNode {
  return {
    path,
    description: cmd.description(),
    subcommands: cmd.commands.map((c) => completionTree(c, [...path, c.name()])),
    options: cmd.options
      .filter((o) => !o.hidden)
      .map((o) => ({
        flags: [o.short, o.long].filter((f): f is string => f !== undefined),
        description: o.description,
        takesValue: o.required || o.optional,
        choices: o.argChoices ?? [],
      })),
  };
}

function walk(node: CompletionNode): CompletionNode[] {
  return [node, ...node.subcommands.flatMap(walk)];
}

/** A word safe inside bash/zsh double quotes or a case pattern (our names and flags are plain). */
function plain(word: string): string {
  if (!/^[A-Za-z0-9_.,:|/+-]*$/.test(word)) throw new Error(`not a plain word: ${word}`);
  return word;
}

function bashScript(root: CompletionNode): string {
  const nodes = walk(root);
  const key = (n: CompletionNode) => n.path.map(plain).join(" ");
  const subs = nodes
    .filter((n) => n.subcommands.length > 0)
    .map(
      (n) =>
        `    "${key(n)}") echo "${n.subcommands.map((s) => plain(s.path.at(-1)!)).join(" ")}" ;;`,
    );
  const opts = nodes.map(
    (n) =>
      `    "${key(n)}") echo "${n.options.flatMap((o) => o.flags.map(plain)).join(" ")} --help" ;;`,
  );
  const choices = nodes.flatMap((n) =>
    n.options
      .filter((o) => o.choices.length > 0)
      .map(
        (o) =>
          `    ${o.flags.map((f) => `"${key(n)}|${plain(f)}"`).join("|")}) echo "${o.choices.map(plain).join(" ")}" ;;`,
      ),
  );
  return `# podpath completion for bash: source <(podpath completion bash)
_podpath_subs() {
  case "$1" in
${subs.join("\n")}
  esac
}
_podpath_opts() {
  case "$1" in
${opts.join("\n")}
  esac
}
_podpath_choices() {
  case "$1" in
${choices.join("\n")}
  esac
}
_podpath() {
  local cur prev path="" w i subs words
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  # kubectl-podpath, and kubectl podpath (kubectl hands the words after the plugin's name)
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    subs=" $(_podpath_subs "$path") "
    if [[ "$w" != -* && "$subs" == *" $w "* ]]; then path="\${path:+$path }$w"; fi
  done
  words="$(_podpath_choices "$path|$prev")"
  if [[ -n "$words" ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
    return
  fi
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_podpath_opts "$path")" -- "$cur")
    return
  fi
  words="$(_podpath_subs "$path")"
  if [[ -n "$words" ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
    return
  fi
  mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}
complete -o default -F _podpath podpath kubectl-podpath
`;
}

function zshScript(root: CompletionNode): string {
  return `#compdef podpath kubectl-podpath
# podpath completion for zsh: source <(podpath completion zsh)  (uses zsh's bash completion layer)
(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }
autoload -U +X bashcompinit && bashcompinit
${bashScript(root)}`;
}

/** A fish single-quoted string. */
function fishQuote(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

function fishScript(root: CompletionNode): string {
  const lines = ["# podpath completion for fish: podpath completion fish | source"];
  for (const bin of ["podpath", "kubectl-podpath"]) {
    for (const n of walk(root)) {
      // inside n: every name of its path seen, and none of its subcommands yet
      const seen = n.path.map((p) => `__fish_seen_subcommand_from ${plain(p)}`);
      const notYet = n.subcommands.map((s) => plain(s.path.at(-1)!));
      const here = [
        ...(n.path.length === 0 ? ["__fish_use_subcommand"] : seen),
        ...(n.path.length > 0 && notYet.length > 0
          ? [`not __fish_seen_subcommand_from ${notYet.join(" ")}`]
          : []),
      ].join("; and ");
      for (const s of n.subcommands) {
        lines.push(
          `complete -c ${bin} -f -n ${fishQuote(here)} -a ${plain(s.path.at(-1)!)} -d ${fishQuote(s.description)}`,
        );
      }
      const inside = n.path.length === 0 ? "" : `-n ${fishQuote(seen.join("; and "))} `;
      for (const o of n.options) {
        const names = o.flags
          .map((f) => (f.startsWith("--") ? `-l ${plain(f.slice(2))}` : `-s ${plain(f.slice(1))}`))
          .join(" ");
        const value =
          o.choices.length > 0
            ? ` -x -a ${fishQuote(o.choices.join(" "))}`
            : o.takesValue
              ? " -r"
              : "";
        lines.push(`complete -c ${bin} ${inside}${names}${value} -d ${fishQuote(o.description)}`);
      }
    }
  }
  return `${lines.join("\n")}\n`;
}

/** The completion script for `shell`, from the command tree under `root`. */
export function completionScript(shell: Shell, root: Command): string {
  const tree = completionTree(root);
  if (shell === "bash") return bashScript(tree);
  if (shell === "zsh") return zshScript(tree);
  return fishScript(tree);
}

export async function run(args: readonly string[], root: Command, io: Io): Promise<number> {
  const shell = args[0];
  if (!SHELLS.includes(shell as Shell)) {
    throw new UsageError(
      `completion: name a shell: ${SHELLS.join(", ")} (not ${JSON.stringify(shell ?? "")})`,
    );
  }
  io.out(completionScript(shell as Shell, root));
  return 0;
}
