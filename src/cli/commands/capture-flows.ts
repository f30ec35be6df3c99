/**
 * @module cli/commands/capture-flows — `podpath capture flows FILE [--host IP] [-o text|json]`:
 * conversations and their verdicts. With `--talkers` (needs `--host`): which addresses sent to
 * HOST and whether each got replies, counted straight from the capture's bytes (fast path).
 * A `NAME.yaml` beside the capture (point, phase) is read and shown.
 */
import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, extname, join } from "node:path";
import type { CapturePlacement } from "../../capture/capture-meta.ts";
import { formatIp, type Ip, tryParseIp } from "../../net/cidr.ts";
import { EXIT, type Io, UsageError } from "../io.ts";
import { captureArg, printDiagnostic } from "./capture-read.ts";

async function metaBeside(
  path: string,
  io: Io,
): Promise<{ file: string; meta: CapturePlacement } | undefined> {
  const { parseCaptureMeta } = await import("../../capture/capture-meta.ts");
  const yamlPath = join(dirname(path), `${basename(path, extname(path))}.yaml`);
  // a capture named NAME.yaml is not its own description
  if (yamlPath === path || !existsSync(yamlPath)) return undefined;
  const file = basename(yamlPath);
  const parsed = parseCaptureMeta(readFileSync(yamlPath, "utf8"), file);
  for (const d of parsed.diagnostics) printDiagnostic(io, d);
  return { file, meta: parsed.value };
}

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const path = captureArg(args, io);
  const file = args[0]!;
  const json = opts["output"] === "json";
  let host: Ip | undefined;
  if (typeof opts["host"] === "string") {
    host = tryParseIp(opts["host"]);
    if (host === undefined)
      throw new UsageError(`--host ${JSON.stringify(opts["host"])} is not an IP address`);
  }
  if (opts["talkers"] === true) {
    if (host === undefined) throw new UsageError("--talkers needs --host IP");
    // Only the fast scan is loaded here: process start-up counts on a 100 MB capture.
    const { hostTalkers } = await import("../../capture/host-talkers.ts");
    const t = await hostTalkers(path, host, { file });
    for (const d of t.diagnostics) printDiagnostic(io, d);
    if (json) {
      io.out(
        `${JSON.stringify(
          {
            schemaVersion: 1,
            tool: "podpath",
            question: "capture talkers",
            file,
            host: formatIp(host),
            records: t.records,
            rows: t.rows.map((r) => ({
              count: r.packets,
              src: formatIp(r.src),
              dst: formatIp(r.dst),
            })),
            senders: t.senders.map((s) => ({
              address: formatIp(s.peer),
              sent: s.sent,
              replies: s.received,
              replied: s.received > 0,
            })),
          },
          null,
          2,
        )}\n`,
      );
    } else {
      let out = "";
      for (const r of t.rows)
        out += `${String(r.packets).padStart(7)} ${formatIp(r.src)} ${formatIp(r.dst)}\n`;
      out += `\nsenders to ${formatIp(host)} (${t.records} records read):\n`;
      for (const s of t.senders)
        out += `  ${formatIp(s.peer).padEnd(16)} sent ${s.sent}, ${s.received > 0 ? `replies ${s.received}` : "NO REPLY"}\n`;
      io.out(out);
    }
    return t.diagnostics.some((d) => d.severity === "error") ? EXIT.usage : EXIT.ok;
  }
  const meta = await metaBeside(path, io);
  const { conversations } = await import("../../capture/conversations.ts");
  const { readCapture } = await import("../../capture/read-capture.ts");
  const { conversationJson, conversationLines } = await import("../../capture/render.ts");
  const cap = readCapture(path, { file, onDiagnostic: (d) => printDiagnostic(io, d) });
  const summary = await conversations(cap, { file, ...(host === undefined ? {} : { host }) });
  const assumptions = [...summary.assumptions];
  if (meta?.meta.point === undefined)
    assumptions.unshift(
      `where the capture was taken is not stated (no ${basename(path, extname(path))}.yaml with point and phase beside it): addresses are read as seen at one unknown point`,
    );
  if (json) {
    io.out(
      `${JSON.stringify(
        {
          schemaVersion: 1,
          tool: "podpath",
          question: "capture flows",
          file,
          format: cap.format,
          ...(meta?.meta.pointText === undefined ? {} : { point: meta.meta.pointText }),
          ...(meta?.meta.phase === undefined ? {} : { phase: meta.meta.phase }),
          packets: summary.packets,
          conversations: summary.conversations.map(conversationJson),
          assumptions,
          diagnostics: cap.diagnostics,
        },
        null,
        2,
      )}\n`,
    );
  } else {
    const head = `${file}: ${summary.packets} packets, ${summary.conversations.length} conversations${
      meta?.meta.pointText === undefined ? "" : `, taken at ${meta.meta.pointText}`
    }${meta?.meta.phase === undefined ? "" : ` (${meta.meta.phase})`}\n\n`;
    const body = summary.conversations.map((c) => conversationLines(c).join("\n")).join("\n\n");
    const tail =
      assumptions.length === 0
        ? ""
        : `\n\nassumed:\n${assumptions.map((a) => `  - ${a}`).join("\n")}`;
    io.out(`${head}${body}${tail}\n`);
  }
  return cap.diagnostics.some((d) => d.severity === "error") ? EXIT.usage : EXIT.ok;
}
