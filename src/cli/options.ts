/**
 * @module cli/options — one style of option checking for every command, run by main.ts before a
 * command's module: which options the user typed (never judged by value: some have defaults),
 * one value per option wherever it was typed (before or after the subcommand's name), flags
 * refused when they do nothing for the chosen input, and kubectl's pod forms with `-n`.
 */
import type { Command } from "commander";
import { parseFrom } from "../cases/endpoints.ts";
import { UsageError } from "./io.ts";

/** Whether the user typed `key` (an option's attribute name, e.g. `nodeState`) on the command line. */
export function givenByUser(cmd: Command, key: string): boolean {
  return cmd.getOptionValueSource(key) === "cli";
}

/** The flag as the user reads it in the help (`--node-state`, `-n/--namespace`). */
export function flagName(cmd: Command, key: string): string {
  const o = cmd.options.find((x) => x.attributeName() === key);
  if (!o) return key;
  return o.short && o.long ? `${o.short}/${o.long}` : (o.long ?? o.short ?? key);
}

/**
 * The options of `cmd` and of the commands above it, one value per option: a value the user
 * typed wins over a default wherever it was typed (`podpath --no-color diagnose X` and
 * `podpath diagnose X --no-color` alike); between two typed values the nearer command's wins.
 */
export function mergedOptions(cmd: Command): Record<string, unknown> {
  const chain: Command[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) chain.unshift(c);
  const out: Record<string, unknown> = {};
  const typed = new Set<string>();
  for (const c of chain) {
    for (const [key, value] of Object.entries(c.opts())) {
      const source = c.getOptionValueSource(key);
      if (source === "cli" || source === "env") {
        out[key] = value;
        typed.add(key);
      } else if (!typed.has(key)) out[key] = value;
    }
  }
  return out;
}

/**
 * Refuses the options in `keys` that the user typed, unless `allowed`: they would do nothing.
 * `because` finishes the sentence "… only work …", e.g. "with --live".
 */
export function refuseUnless(
  cmd: Command,
  keys: readonly string[],
  allowed: boolean,
  because: string,
): void {
  if (allowed) return;
  const given = keys.filter((k) => givenByUser(cmd, k)).map((k) => flagName(cmd, k));
  if (given.length === 0) return;
  throw new UsageError(
    `${commandPath(cmd)}: ${given.join(", ")} ${given.length === 1 ? "does" : "do"} nothing here: ${given.length === 1 ? "it works" : "they work"} only ${because}`,
  );
}

/** `plan masquerade`, `diagnose`: the command as typed after `podpath`. */
export function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/**
 * `--from` with kubectl's `-n`: `pod/NAME -n NS` becomes `pod/NS/NAME` (without `-n`, namespace
 * `default`, as kubectl reads it); `pod/NS/NAME` with a different `-n` is refused.
 */
export function fromWithNamespace(from: string, namespace: string | undefined): string {
  const r = parseFrom(from, namespace);
  if ("error" in r) throw new UsageError(r.error);
  return r.kind === "pod" ? `pod/${r.namespace}/${r.name}` : from;
}

/**
 * A pod named where kubectl would take one: `NS/NAME`, `pod/NS/NAME`, `pod/NAME` or `NAME`, with
 * `-n NS`. Returns `NS/NAME`, or `NAME` when no namespace is given and `defaultNamespace` is
 * undefined (the kubeconfig context's namespace decides). Refuses two different namespaces.
 */
export function podWithNamespace(
  text: string,
  namespace: string | undefined,
  flag: string,
  defaultNamespace?: string,
): string {
  const parts = (
    text.startsWith("pod/") || text.startsWith("pods/") ? text.slice(text.indexOf("/") + 1) : text
  ).split("/");
  if (parts.length > 2 || parts.some((p) => p === "")) {
    throw new UsageError(
      `${flag} ${JSON.stringify(text)}: expected NAMESPACE/NAME, pod/NAME or NAME (with -n NAMESPACE)`,
    );
  }
  const [a, b] = parts as [string, string | undefined];
  if (b !== undefined) {
    if (namespace !== undefined && namespace !== a) {
      throw new UsageError(
        `${flag} ${JSON.stringify(text)} names namespace ${JSON.stringify(a)} but -n says ${JSON.stringify(namespace)}: give one of them`,
      );
    }
    return `${a}/${b}`;
  }
  const ns = namespace ?? defaultNamespace;
  return ns === undefined ? a : `${ns}/${a}`;
}

/** A hostname where an address is expected: refused with the commands that resolve it. */
export function refuseHostname(flag: string, text: string): void {
  const host = text.replace(/:\d+$/, "");
  if (
    !/^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(
      host,
    )
  )
    return;
  if (/^[0-9.]+$/.test(host)) return;
  const port = text.slice(host.length);
  throw new UsageError(
    `${flag} ${JSON.stringify(text)}: podpath reads addresses, not names (a snapshot holds what the cluster saw, not what a resolver says now). Resolve it where the pod resolves names, e.g. \`getent hosts ${host}\` or \`dig +short ${host}\`, and give ${flag} ADDRESS${port}`,
  );
}
