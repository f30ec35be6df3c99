/**
 * @module cli/commands/ipmasq-common — what `ipmasq config` and `ipmasq rules` share: reading the
 * config file and DaemonSet, turning podpath's options into the agent's Go flag arguments, and
 * printing diagnostics. Exit 2 when the agent would not start or rejects the config.
 */
import { type AgentView, agentView } from "../../agents/ip-masq-agent/agent-view.ts";
import type { MasqConfig } from "../../agents/ip-masq-agent/config.ts";
import { renderMasqConfigJson } from "../../agents/ip-masq-agent/config.ts";
import { goParseBool } from "../../agents/ip-masq-agent/flags.ts";
import type { Diagnostic } from "../../model/types.ts";
import { InputFileError, readRegularText } from "../../snapshot/input-file.ts";
import type { Io } from "../io.ts";
import { UsageError } from "../io.ts";

async function readText(file: string, what: string): Promise<string> {
  try {
    // a FIFO or device is refused, not waited on; UTF-16 (PowerShell's >) is decoded
    return readRegularText(file, `${what} ${file}`);
  } catch (e) {
    if (e instanceof InputFileError) throw new UsageError(e.message);
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(
      `cannot read ${what} ${file}: ${code === "ENOENT" ? "no such file" : code === "EISDIR" ? "is a directory" : ((e as Error).message ?? code)}`,
    );
  }
}

const BOOL_OPTIONS = [
  ["nomasqAllReservedRanges", "nomasq-all-reserved-ranges"],
  ["enableIpv6", "enable-ipv6"],
  ["randomFully", "random-fully"],
] as const;

/**
 * The agent flags given on podpath's command line, as Go flag arguments. A boolean option's
 * optional value that is not a Go boolean was really the FILE argument (`--enable-ipv6 cm.yaml`).
 */
export function agentFlagArgs(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
): { flagArgs: string[]; file: string | undefined } {
  let file = args[0];
  const flagArgs: string[] = [];
  const masqChain = opts["masqChain"];
  if (typeof masqChain === "string") flagArgs.push(`--masq-chain=${masqChain}`);
  for (const [key, flag] of BOOL_OPTIONS) {
    const v = opts[key];
    if (v === undefined || v === false) continue;
    if (v === true) flagArgs.push(`--${flag}`);
    else if (typeof v === "string") {
      if (goParseBool(v) === undefined && file === undefined) {
        file = v;
        flagArgs.push(`--${flag}`);
      } else flagArgs.push(`--${flag}=${v}`);
    }
  }
  const toPorts = opts["toPorts"];
  if (typeof toPorts === "string") flagArgs.push(`--to-ports=${toPorts}`);
  return { flagArgs, file };
}

export function formatDiagnostic(d: Diagnostic): string {
  const where = d.source ? `${d.source.file}:${d.source.line}: ` : "";
  return `${d.severity}: ${where}${d.message}\n`;
}

/** Reads the inputs and runs the agent's view; prints diagnostics on stderr. */
export async function loadAgentView(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<AgentView> {
  const { flagArgs, file } = agentFlagArgs(args, opts);
  const dsFile = typeof opts["daemonset"] === "string" ? opts["daemonset"] : undefined;
  const prevFile = typeof opts["previous"] === "string" ? opts["previous"] : undefined;
  const daemonSet =
    dsFile === undefined
      ? {}
      : { daemonSet: { text: await readText(dsFile, "DaemonSet file"), file: dsFile } };
  // the config the agent ran with before: the previous file as the agent took it at startup
  let previous: MasqConfig | undefined;
  if (prevFile !== undefined) {
    const before = agentView({
      config: { text: await readText(prevFile, "previous config file"), file: prevFile },
      ...daemonSet,
      flagArgs,
    });
    previous = before.outcome?.config;
    if (before.outcome?.error) {
      io.err(
        `note: ${prevFile} is itself rejected (${before.outcome.error.message}); an agent that started with it runs on its defaults\n`,
      );
    }
  }
  const view = agentView({
    ...(file === undefined ? {} : { config: { text: await readText(file, "config file"), file } }),
    ...daemonSet,
    flagArgs,
    ...(previous ? { previous } : {}),
  });
  for (const d of view.diagnostics) io.err(formatDiagnostic(d));
  // A ConfigMap file that cannot be read (broken YAML, cut short) is unreadable input, not an
  // absent ConfigMap: answering with the agent's defaults would describe a file nobody has.
  const unreadable = view.diagnostics.find(
    (d) => d.severity === "error" && d.source?.file === file && view.input?.file.present === false,
  );
  const noDaemonSet = view.diagnostics.find(
    (d) => d.code === "IPMASQ_NO_DAEMONSET" || d.code === "IPMASQ_NO_CONTAINER",
  );
  if (dsFile !== undefined && noDaemonSet) {
    // the flags were asked for from this file: running on default flags would answer another question
    throw new UsageError(
      `--daemonset ${dsFile}: no agent flags could be read from it (see the errors above)`,
    );
  }
  if (file !== undefined && unreadable) {
    throw new UsageError(
      `${file}:${unreadable.source?.line ?? 0}: no ConfigMap could be read from this file (see the errors above); expected a ConfigMap as kubectl prints it, or the agent's config file`,
    );
  }
  if (file === undefined) {
    io.err(
      "note: no config file given: the agent finds no /etc/config/ip-masq-agent and uses its defaults\n",
    );
  }
  return view;
}

/** Explains a rejected config on stderr: where, and what the agent keeps doing. */
export function explainRejected(view: AgentView, io: Io): void {
  const err = view.outcome?.error;
  if (!err) return;
  const where = err.source ? `${err.source.file}:${err.source.line}: ` : "";
  io.err(
    `error: ${where}the agent rejects this config: ${err.message}\n` +
      `  it logs "Error syncing configuration: ${err.message}", keeps running with its previous config and does not touch the rules already installed\n`,
  );
  if (view.outcome?.config) {
    io.err(`  the config it keeps: ${renderMasqConfigJson(view.outcome.config)}\n`);
  }
  if (!err.exact) {
    io.err("  (the wording of this YAML error approximates the agent's YAML library)\n");
  }
}
