/**
 * @module agents/ip-masq-agent/daemonset-args — the agent's arguments as written in its DaemonSet
 * (`command` after the program, then `args`), from objects as kubectl prints them.
 */
import { type KubeObject, readKubeObjects } from "../../evidence/kube-objects.ts";
import type { Diagnostic, Parsed, SourceRef } from "../../model/types.ts";

export interface AgentContainerArgs {
  /** The arguments Go's flag package sees (without the program name). */
  readonly args: readonly string[];
  readonly daemonSet: string;
  readonly container: string;
  /** Where the `args` list (or `command`) is written. */
  readonly source: SourceRef;
  /** The DaemonSet read, and the agent container's index in it (for its volumes). */
  readonly object?: KubeObject;
  readonly containerIndex?: number;
}

function isAgentContainer(c: Record<string, unknown>): boolean {
  const image = typeof c["image"] === "string" ? c["image"] : "";
  const name = typeof c["name"] === "string" ? c["name"] : "";
  return /ip-masq-agent/.test(image) || name === "ip-masq-agent";
}

function strings(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((x) => typeof x === "string") ? (v as string[]) : undefined;
}

/**
 * Finds the agent's container in a DaemonSet (the one running the ip-masq-agent image, else
 * the only container) and returns its arguments. A `command` replaces the image's entrypoint:
 * its first element is the program, the rest are arguments before `args`.
 */
export function agentArgsFromDaemonSet(
  text: string,
  file: string,
): Parsed<AgentContainerArgs | undefined> {
  const read = readKubeObjects(text, file);
  const diagnostics: Diagnostic[] = [...read.diagnostics];
  const sets = read.value.filter((o) => o.kind === "DaemonSet");
  const ds: KubeObject | undefined =
    sets.find((o) => o.name === "ip-masq-agent") ??
    sets.find((o) => o.name === "azure-ip-masq-agent") ??
    sets.find((o) => containersOf(o).some(isAgentContainer)) ??
    (sets.length === 1 ? sets[0] : undefined);
  if (!ds) {
    diagnostics.push({
      code: "IPMASQ_NO_DAEMONSET",
      severity: "error",
      message: `${file} holds no ip-masq-agent DaemonSet (expected kind: DaemonSet with a container running the ip-masq-agent image)`,
      source: { file, line: 1 },
    });
    return { value: undefined, diagnostics };
  }
  const containers = containersOf(ds);
  let index = containers.findIndex(isAgentContainer);
  if (index < 0 && containers.length === 1) index = 0;
  const c = containers[index];
  if (!c) {
    diagnostics.push({
      code: "IPMASQ_NO_CONTAINER",
      severity: "error",
      message: `DaemonSet ${ds.name} has no container running the ip-masq-agent image`,
      source: ds.source,
    });
    return { value: undefined, diagnostics };
  }
  const base = ["spec", "template", "spec", "containers", index] as const;
  const command = strings(c["command"]) ?? [];
  const args = strings(c["args"]) ?? [];
  const argv = [...command.slice(1), ...args];
  const source =
    ds.locate([...base, "args"]) ??
    ds.locate([...base, "command"]) ??
    ds.locate([...base]) ??
    ds.source;
  if (command.length > 0 && /(^|\/)(sh|bash|ash|dash)$/.test(command[0]!)) {
    diagnostics.push({
      code: "IPMASQ_SHELL_COMMAND",
      severity: "warning",
      message: `the container runs a shell (${command[0]}); the agent's flags inside the shell command line are not read`,
      source,
    });
  }
  if (argv.some((a) => /\$\([A-Za-z_][A-Za-z0-9_]*\)/.test(a))) {
    diagnostics.push({
      code: "IPMASQ_ARG_VARIABLE",
      severity: "info",
      message:
        "an argument uses $(VAR): Kubernetes expands it from the container's env; it is read here as written",
      source,
    });
  }
  const container = typeof c["name"] === "string" ? c["name"] : `#${index}`;
  return {
    value: { args: argv, daemonSet: ds.name, container, source, object: ds, containerIndex: index },
    diagnostics,
  };
}

function containersOf(o: KubeObject): Record<string, unknown>[] {
  const spec = o.raw["spec"] as Record<string, unknown> | undefined;
  const template = spec?.["template"] as Record<string, unknown> | undefined;
  const podSpec = template?.["spec"] as Record<string, unknown> | undefined;
  const list = podSpec?.["containers"];
  return Array.isArray(list)
    ? list.filter((x): x is Record<string, unknown> => typeof x === "object" && x !== null)
    : [];
}
