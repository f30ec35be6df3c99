/**
 * @module cli/commands/capture-read — `podpath capture read FILE [-o text|jsonl|json|md|html]`:
 * one packet per line (text, jsonl: streamed) or one document of every packet (json in the
 * envelope, md, html) from pcap, pcapng or tcpdump text. Damage is reported on stderr with its
 * byte offset or line after every packet before it has been printed.
 */
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import type { Packet } from "../../capture/packet.ts";
import type { Diagnostic } from "../../model/types.ts";
import { terminalSafe } from "../../report/terminal-safe.ts";
import { EXIT, type Io, UsageError } from "../io.ts";
import { count, progressStream, startProgress } from "../progress.ts";

/** Resolves and checks a capture path given on the command line. */
export function captureArg(args: readonly string[], io: Io): string {
  const file = args[0];
  if (file === undefined) throw new UsageError("capture: a capture file is required");
  const path = resolve(io.cwd, file);
  if (!existsSync(path)) throw new UsageError(`${file}: no such file`);
  if (!statSync(path).isFile()) throw new UsageError(`${file}: not a regular file`);
  return path;
}

export function printDiagnostic(io: Io, d: Diagnostic): void {
  // the capture readers put the file in the message; other readers leave it to `source`
  const where =
    d.source && !d.message.includes(d.source.file) ? `${d.source.file}:${d.source.line}: ` : "";
  io.err(`podpath: ${d.severity}: ${where}${d.message}\n`);
}

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const path = captureArg(args, io);
  const file = args[0]!;
  const format = opts["output"] ?? "text";
  const jsonl = format === "jsonl";
  // Loaded here, not at the top: `capture flows` shares this file's helpers without the readers.
  const { readCapture } = await import("../../capture/read-capture.ts");
  const { packetJson, packetLine, packetsDocument } = await import("../../capture/render.ts");
  const cap = readCapture(path, { file, onDiagnostic: (d) => printDiagnostic(io, d) });
  if (format === "json" || format === "md" || format === "html") {
    // one document: every packet is held (text and jsonl stream instead)
    const packets: Packet[] = [];
    const progress = startProgress(progressStream(io), `reading ${file}`);
    for await (const p of cap) {
      packets.push(p);
      progress.update(`${count(packets.length)} packets`);
      if (io.signal.aborted) break;
    }
    progress.done();
    const { envelope } = await import("../../model/envelope.ts");
    const { renderReport } = await import("../../report/render.ts");
    const json = envelope("capture read", {
      file,
      ...(cap.format === undefined ? {} : { format: cap.format }),
      packets: packets.map(packetJson),
      diagnostics: cap.diagnostics,
    });
    io.out(renderReport({ json, document: packetsDocument(file, packets, cap.format) }, format));
    return cap.diagnostics.some((d) => d.severity === "error") ? EXIT.usage : EXIT.ok;
  }
  let buffered = "";
  // the packets stream to stdout: on the same terminal they are the progress
  const progress = startProgress(
    { isTTY: io.stderrIsTTY && !io.stdoutIsTTY, write: io.errRaw ?? io.err },
    `reading ${file}`,
  );
  let n = 0;
  for await (const p of cap) {
    progress.update(`${count(++n)} packets`);
    // a tcpdump text line is printed back: its control characters shown, never sent
    buffered += `${jsonl ? JSON.stringify(packetJson(p)) : terminalSafe(packetLine(p))}\n`;
    if (buffered.length > 65536) {
      io.out(buffered);
      buffered = "";
    }
    if (io.signal.aborted) break;
  }
  progress.done();
  io.out(buffered);
  return cap.diagnostics.some((d) => d.severity === "error") ? EXIT.usage : EXIT.ok;
}
