/**
 * @module cli/commands/capture-flows — `podpath capture flows FILE [--host IP] [-o text|json|md|html]`:
 * conversations and their verdicts. With `--talkers` (needs `--host`): which addresses sent to
 * HOST and whether each got replies, counted straight from the capture's bytes (fast path).
 * A `NAME.yaml` beside the capture (point, phase) is read and shown.
 */
import { existsSync } from "node:fs";
import { basename, dirname, extname, join } from "node:path";
import type { CapturePlacement } from "../../capture/capture-meta.ts";
import { envelope } from "../../model/envelope.ts";
import { formatIp, type Ip, tryParseIp } from "../../net/cidr.ts";
import {
  codeBlock,
  type Document,
  fields,
  list,
  paragraph,
  section,
  toned,
} from "../../report/document.ts";
import { isFormat, renderReport } from "../../report/render.ts";
import { readRegularText } from "../../snapshot/input-file.ts";
import { EXIT, type Io, UsageError } from "../io.ts";
import { progressStream, withProgress } from "../progress.ts";
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
  const parsed = parseCaptureMeta(readRegularText(yamlPath, file), file);
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
  const format = isFormat(opts["output"]) ? opts["output"] : "text";
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
    const t = await withProgress(progressStream(io), `scanning ${file}`, () =>
      hostTalkers(path, host, { file }),
    );
    for (const d of t.diagnostics) printDiagnostic(io, d);
    const hostText = formatIp(host);
    const json = envelope("capture talkers", {
      file,
      host: hostText,
      records: t.records,
      rows: t.rows.map((r) => ({ count: r.packets, src: formatIp(r.src), dst: formatIp(r.dst) })),
      senders: t.senders.map((s) => ({
        address: formatIp(s.peer),
        sent: s.sent,
        replies: s.received,
        replied: s.received > 0,
      })),
    });
    const document: Document = {
      question: "capture talkers",
      blocks: [
        codeBlock(
          t.rows
            .map((r) => `${String(r.packets).padStart(7)} ${formatIp(r.src)} ${formatIp(r.dst)}`)
            .join("\n"),
        ),
        section(`senders to ${hostText} (${t.records} records read):`, [
          fields(
            t.senders.map((s) => [
              formatIp(s.peer),
              s.received > 0
                ? `sent ${s.sent}, replies ${s.received}`
                : [`sent ${s.sent}, `, toned("bad", "NO REPLY")],
            ]),
          ),
        ]),
      ],
    };
    io.out(renderReport({ json, document }, format, io.colors));
    return t.diagnostics.some((d) => d.severity === "error") ? EXIT.usage : EXIT.ok;
  }
  const meta = await metaBeside(path, io);
  const { conversations } = await import("../../capture/conversations.ts");
  const { readCapture } = await import("../../capture/read-capture.ts");
  const { conversationBlock, conversationJson } = await import("../../capture/render.ts");
  const cap = readCapture(path, { file, onDiagnostic: (d) => printDiagnostic(io, d) });
  const summary = await withProgress(progressStream(io), `reading ${file}`, () =>
    conversations(cap, { file, ...(host === undefined ? {} : { host }) }),
  );
  const assumptions = [...summary.assumptions];
  if (meta?.meta.point === undefined)
    assumptions.unshift(
      `where the capture was taken is not stated (no ${basename(path, extname(path))}.yaml with point and phase beside it): addresses are read as seen at one unknown point`,
    );
  const json = envelope("capture flows", {
    file,
    format: cap.format,
    ...(meta?.meta.pointText === undefined ? {} : { point: meta.meta.pointText }),
    ...(meta?.meta.phase === undefined ? {} : { phase: meta.meta.phase }),
    packets: summary.packets,
    conversations: summary.conversations.map(conversationJson),
    assumptions,
    diagnostics: cap.diagnostics,
  });
  const head = `${file}: ${summary.packets} packets, ${summary.conversations.length} conversations${
    meta?.meta.pointText === undefined ? "" : `, taken at ${meta.meta.pointText}`
  }${meta?.meta.phase === undefined ? "" : ` (${meta.meta.phase})`}`;
  const document: Document = {
    question: "capture flows",
    blocks: [
      paragraph(head),
      ...summary.conversations.map(conversationBlock),
      ...(assumptions.length === 0 ? [] : [section("assumed:", [list(assumptions)])]),
    ],
  };
  io.out(renderReport({ json, document }, format, io.colors));
  return cap.diagnostics.some((d) => d.severity === "error") ? EXIT.usage : EXIT.ok;
}
