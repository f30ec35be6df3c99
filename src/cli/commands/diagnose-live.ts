/**
 * @module cli/commands/diagnose-live — `podpath diagnose --live`: collect into a temporary snapshot
 * (or `--keep DIR`), then diagnose it exactly as a snapshot folder. Collection failures are listed
 * on stderr and the diagnosis still runs on what was collected.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { EXIT, type Io, UsageError } from "../io.ts";
import { claimFolder, collectLive, parseLiveArgs } from "./collect.ts";
import { type DiagnoseCliOptions, diagnoseSnapshotPath } from "./diagnose.ts";

export async function diagnoseLive(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  diag: DiagnoseCliOptions,
  io: Io,
): Promise<number> {
  if (args.length > 0) {
    throw new UsageError("diagnose --live reads the cluster; do not also name a snapshot");
  }
  const live = parseLiveArgs(opts);
  const keep = typeof opts["keep"] === "string" ? resolve(io.cwd, opts["keep"]) : undefined;
  const folder = keep === undefined ? undefined : claimFolder(keep, "--keep", String(opts["keep"]));
  const dir = keep ?? (await mkdtemp(join(tmpdir(), "podpath-live-")));
  try {
    const collected = await collectLive(live, dir, io);
    // the lock goes before the snapshot is read: it is not part of the snapshot
    folder?.release();
    if (collected.report === undefined) return collected.code;
    if (collected.code === 130) return collected.code;
    const code = await diagnoseSnapshotPath(dir, diag, io);
    if (keep !== undefined) io.err(`podpath: snapshot kept in ${keep}\n`);
    return collected.code === EXIT.live && code === EXIT.ok ? EXIT.live : code;
  } finally {
    folder?.release();
    if (keep === undefined) await rm(dir, { recursive: true, force: true });
  }
}
