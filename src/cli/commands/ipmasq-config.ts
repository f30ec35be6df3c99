/**
 * @module cli/commands/ipmasq-config — `podpath ipmasq config [FILE] [agent flags]`: the config
 * the agent would run with, under its own key names, or its exact error text (exit 2).
 */

import type { MasqConfig } from "../../agents/ip-masq-agent/config.ts";
import { goJsonString, renderMasqConfigJson } from "../../agents/ip-masq-agent/config.ts";
import { formatGoDuration } from "../../agents/ip-masq-agent/go-duration.ts";
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
  const json = opts["output"] === "json";
  if (view.flags.fatal !== undefined || !view.outcome) {
    const text = view.flags.fatal ?? "the agent does not start";
    io.out(json ? `{"error": ${goJsonString(text)}}\n` : `${text}\n`);
    return EXIT.usage;
  }
  const { outcome } = view;
  if (outcome.error) {
    explainRejected(view, io);
    const src = outcome.error.source;
    io.out(
      json
        ? `{"error": ${goJsonString(outcome.error.message)}${src ? `, "file": ${JSON.stringify(src.file)}, "line": ${src.line}` : ""}}\n`
        : `${outcome.error.message}\n`,
    );
    return EXIT.usage;
  }
  io.out(
    json
      ? `${renderMasqConfigJson(outcome.config, 2)}\n`
      : renderText(outcome.config, outcome.usedDefaults),
  );
  return EXIT.ok;
}
