/**
 * @module cli/commands/diagnose — `podpath diagnose <snapshot>`: open, read, ask, render, exit code.
 * The questions (every case, with their agents and readers) and the renderers load only once the
 * snapshot holds something to ask about: a wrong path or an empty folder is told at start-up cost.
 */

import { parseDestination, parseFrom } from "../../cases/endpoints.ts";
import { LAYOUT_HELP } from "../../snapshot/layout.ts";
import { isEmptySnapshot, loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot, SnapshotOpenError } from "../../snapshot/source.ts";
import { EXIT, type Io, UsageError } from "../io.ts";
import { progressStream, startProgress } from "../progress.ts";
import { snapshotSummary } from "../read-summary.ts";

export interface DiagnoseCliOptions {
  readonly dest?: string;
  readonly from?: string;
  readonly output?: string;
}

/** Diagnoses a snapshot folder or archive and writes the answer; shared by `diagnose --live`. */
export async function diagnoseSnapshotPath(
  path: string,
  opts: DiagnoseCliOptions,
  io: Io,
): Promise<number> {
  const dest = opts.dest === undefined ? undefined : parseDestination(opts.dest);
  if (dest && "error" in dest) throw new UsageError(dest.error);
  const from = opts.from === undefined ? undefined : parseFrom(opts.from);
  if (from && "error" in from) throw new UsageError(from.error);
  let source: ReturnType<typeof openSnapshot>;
  try {
    source = openSnapshot(path);
  } catch (e) {
    if (e instanceof SnapshotOpenError) throw new UsageError(`${e.message}\n${LAYOUT_HELP}`);
    throw e;
  }
  // a large snapshot takes seconds: said on a terminal's stderr past a second
  const progress = startProgress(progressStream(io), `diagnose ${path}`);
  const snap = loadSnapshot(source);
  io.verbose(snapshotSummary(snap));
  progress.update("read the snapshot; asking every question");
  if (isEmptySnapshot(snap)) {
    progress.done();
    throw new UsageError(`${path}: nothing in it is part of a snapshot.\n${LAYOUT_HELP}`);
  }
  const answer = await import("../../questions/diagnose.ts")
    .then(({ diagnose }) =>
      diagnose(snap, {
        ...(dest ? { dest } : {}),
        ...(from ? { from } : {}),
      }),
    )
    .finally(progress.done);
  io.verbose(
    `asked every question: ${answer.findings.length} findings, ${answer.paths.length} paths`,
  );
  const [{ exitCodeFor }, { isFormat, renderAnswer }, { textWidth }] = await Promise.all([
    import("../../model/answer.ts"),
    import("../../report/render.ts"),
    import("../../report/wrap.ts"),
  ]);
  const width = textWidth(io.stdoutIsTTY, io.stdoutColumns);
  io.out(renderAnswer(answer, isFormat(opts.output) ? opts.output : "text", io.colors, width));
  return exitCodeFor(answer);
}

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const o: DiagnoseCliOptions = {
    ...(typeof opts["dest"] === "string" ? { dest: opts["dest"] } : {}),
    ...(typeof opts["from"] === "string" ? { from: opts["from"] } : {}),
    ...(typeof opts["output"] === "string" ? { output: opts["output"] } : {}),
  };
  if (opts["live"] === true) {
    const { diagnoseLive } = await import("./diagnose-live.ts");
    return diagnoseLive(args, opts, o, io);
  }
  const path = args[0];
  if (path === undefined) {
    throw new UsageError("diagnose: name a snapshot folder or .tar.gz (or use --live)");
  }
  return diagnoseSnapshotPath(path, o, io);
}

export { EXIT };
