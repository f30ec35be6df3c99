/**
 * @module cli/commands/ipmasq-rules — `podpath ipmasq rules [FILE] [agent flags]`: the exact
 * iptables-restore input the agent writes (load it with `iptables-restore --noflush`), for IPv4
 * or, with `--family 6`, for IPv6; `-o json` adds the POSTROUTING jump and the lines a real
 * iptables-save prints afterwards (the shape `ipmasq config -o json` keeps: no envelope); md and
 * html show the input as a code block.
 */
import {
  agentChain,
  agentRestoreInput,
  agentSavedLines,
} from "../../agents/ip-masq-agent/rules.ts";
import { codeBlock } from "../../report/document.ts";
import { isFormat, renderReport } from "../../report/render.ts";
import { EXIT, type Io, UsageError } from "../io.ts";
import { explainRejected, loadAgentView } from "./ipmasq-common.ts";

/** HasRandomFully: the agent's iptables is 1.6.2 or later (RandomFullyMinVersion). */
export function hasRandomFully(version: unknown): boolean {
  if (version === undefined) return true;
  const m = /^v?(\d+)\.(\d+)(?:\.(\d+))?/.exec(String(version));
  if (!m)
    throw new UsageError(
      `--iptables-version: expected a version like 1.8.9, not ${JSON.stringify(version)}`,
    );
  const [a, b, c] = [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)];
  return a > 1 || (a === 1 && (b > 6 || (b === 6 && c >= 2)));
}

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const familyOpt = String(opts["family"] ?? "4");
  if (familyOpt !== "4" && familyOpt !== "6") {
    throw new UsageError(`--family must be 4 or 6, not ${JSON.stringify(familyOpt)}`);
  }
  const family = familyOpt === "6" ? 6 : 4;
  const view = await loadAgentView(args, opts, io);
  if (view.flags.fatal !== undefined || !view.outcome) {
    io.err(`error: the agent exits at startup: ${view.flags.fatal}\n`);
    return EXIT.usage;
  }
  if (view.outcome.error) {
    explainRejected(view, io);
    io.err("  no rules are written for a rejected config\n");
    return EXIT.usage;
  }
  const options = {
    flags: view.flags.flags,
    toPorts: view.flags.toPorts,
    hasRandomFully: hasRandomFully(opts["iptablesVersion"]),
  };
  const config = view.outcome.config;
  if (opts["output"] === "json") {
    const out: Record<string, unknown> = {};
    for (const f of [4, 6] as const) {
      const chain = agentChain(config, f, options);
      if (!chain) continue;
      out[f === 4 ? "iptables" : "ip6tables"] = {
        restoreInput: agentRestoreInput(config, f, options),
        postroutingJump: chain.jump.written,
        savedLines: agentSavedLines(chain),
      };
    }
    io.out(`${JSON.stringify(out, null, 2)}\n`);
    return EXIT.ok;
  }
  const text = agentRestoreInput(config, family, options);
  if (text === undefined) {
    io.err(
      "error: the agent writes no IPv6 rules without --enable-ipv6 (it never touches ip6tables)\n",
    );
    return EXIT.usage;
  }
  const chain = agentChain(config, family, options)!;
  io.err(
    `note: the agent also ensures the POSTROUTING jump (appended when missing, not part of this input):\n  ${family === 4 ? "iptables" : "ip6tables"} -t nat ${chain.jump.written.replace(/--comment (.*?) -m addrtype/, '--comment "$1" -m addrtype')}\n`,
  );
  const format = isFormat(opts["output"]) ? opts["output"] : "text";
  io.out(
    format === "text"
      ? text
      : renderReport(
          {
            json: undefined,
            document: {
              question: "ipmasq rules",
              title: `podpath ipmasq rules: the ${family === 4 ? "iptables" : "ip6tables"}-restore input`,
              blocks: [codeBlock(text)],
            },
          },
          format,
        ),
  );
  // the real iptables-restore refuses part of it (already explained on stderr)
  return view.diagnostics.some((d) => d.code === "IPMASQ_RESTORE_REFUSED")
    ? EXIT.findings
    : EXIT.ok;
}
