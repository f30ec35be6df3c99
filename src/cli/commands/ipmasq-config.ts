/**
 * @module cli/commands/ipmasq-config — `podpath ipmasq config [FILE] [agent flags]`: the config
 * the agent would run with, under its own key names, or its exact error text (exit 2). `-o json`
 * (the default) is the agent's own JSON; text, md and html show the config with where each value
 * comes from.
 */

import type { MasqConfig } from "../../agents/ip-masq-agent/config.ts";
import { goJsonString, renderMasqConfigJson } from "../../agents/ip-masq-agent/config.ts";
import { formatGoDuration } from "../../agents/ip-masq-agent/go-duration.ts";
import { codeBlock } from "../../report/document.ts";
import { isFormat, renderReport } from "../../report/render.ts";
import { EXIT, type Io } from "../io.ts";
import { explainRejected, loadAgentView } from "./ipmasq-common.ts";

function renderText(config: MasqConfig, usedDefaults: boolean): string {
  const lines: string[] = [];
  const at = (key: keyof MasqConfig["sources"]) => {
    const s = config.sources[key];
    return s
      ? `  (${s.file}:${s.line})`
      : usedDefaults
        ? "  (default: no config file)"
        : "  (default)";
  };
  if (config.nonMasqueradeCIDRs === null) {
    lines.push(
      `nonMasqueradeCIDRs: null — no RETURN rule besides link-local: every other non-local destination is masqueraded${at("nonMasqueradeCIDRs")}`,
    );
  } else {
    lines.push(`nonMasqueradeCIDRs:${at("nonMasqueradeCIDRs")}`);
    for (const e of config.nonMasqueradeCIDRs) {
      lines.push(`  - ${e.text}${e.source ? `  (${e.source.file}:${e.source.line})` : ""}`);
    }
  }
  lines.push(`cidrLimit: ${config.cidrLimit}${at("cidrLimit")}`);
  lines.push(`masqLinkLocal: ${config.masqLinkLocal}${at("masqLinkLocal")}`);
  lines.push(`masqLinkLocalIPv6: ${config.masqLinkLocalIPv6}${at("masqLinkLocalIPv6")}`);
  lines.push(`resyncInterval: ${formatGoDuration(config.resyncIntervalNs)}${at("resyncInterval")}`);
  return `${lines.join("\n")}\n`;
}

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const view = await loadAgentView(args, opts, io);
  const format = isFormat(opts["output"]) ? opts["output"] : "json";
  // JSON is the agent's own (json.Marshal of its config, or the error it stops with), not an
  // envelope: it is compared with what the agent logs. The other formats render a document.
  const answer = (json: string, text: string, lang?: string) =>
    format === "json"
      ? json
      : format === "text"
        ? text
        : renderReport(
            {
              json: undefined,
              document: {
                question: "ipmasq config",
                title: "podpath ipmasq config",
                blocks: [codeBlock(text, lang)],
              },
            },
            format,
          );
  if (view.flags.fatal !== undefined || !view.outcome) {
    const text = view.flags.fatal ?? "the agent does not start";
    io.out(answer(`{"error": ${goJsonString(text)}}\n`, `${text}\n`));
    return EXIT.usage;
  }
  const { outcome } = view;
  if (outcome.error) {
    explainRejected(view, io);
    const src = outcome.error.source;
    io.out(
      answer(
        `{"error": ${goJsonString(outcome.error.message)}${src ? `, "file": ${JSON.stringify(src.file)}, "line": ${src.line}` : ""}}\n`,
        `${outcome.error.message}\n`,
      ),
    );
    return EXIT.usage;
  }
  io.out(
    answer(
      `${renderMasqConfigJson(outcome.config, 2)}\n`,
      renderText(outcome.config, outcome.usedDefaults),
      "yaml",
    ),
  );
  return EXIT.ok;
}
