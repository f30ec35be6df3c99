/**
 * @module cli/commands/plan-masquerade — `podpath plan masquerade <snapshot>`: the plan, and with
 * `--replay` (root) the proposed rules proven on a real kernel for every node the snapshot has;
 * `-o text|json|md|html` through report/, `-o yaml` the plan as YAML.
 */

import { mkdirSync, writeFileSync } from "node:fs";
import { parseDestination } from "../../cases/endpoints.ts";
import { type MasqueradeStrategy, PlanError, planMasquerade } from "../../cases/masquerade/plan.ts";
import {
  masqueradePlanDocument,
  type ReplayLine,
  renderMasqueradePlanYaml,
} from "../../cases/masquerade/plan-render.ts";
import { envelope } from "../../model/envelope.ts";
import { type Cidr, tryParseCidr } from "../../net/cidr.ts";
import { isFormat, renderReport } from "../../report/render.ts";
import { LAYOUT_HELP } from "../../snapshot/layout.ts";
import { isEmptySnapshot, loadSnapshot } from "../../snapshot/load.ts";
import { openSnapshot, SnapshotOpenError } from "../../snapshot/source.ts";
import { EXIT, type Io, UsageError } from "../io.ts";
import { progressStream, withProgress } from "../progress.ts";
import { replayPlan } from "./plan-masquerade-replay.ts";

/** `--write DIR`: the new ConfigMap and the previous one (or the owner's files), as the plan's commands name them. */
function writePlanFiles(
  plan: ReturnType<typeof planMasquerade>,
  dir: string,
  io: Io,
): ReturnType<typeof planMasquerade> {
  const files: [string, string][] = [];
  if (plan.narrow) files.push([plan.narrow.newConfigMapFile, plan.narrow.newConfigMap]);
  for (const f of plan.owner?.files ?? []) files.push([f.file, f.content]);
  if (plan.rollback.previousConfigMap)
    files.push([plan.rollback.file, plan.rollback.previousConfigMap]);
  try {
    mkdirSync(dir, { recursive: true });
    for (const [file, text] of files) writeFileSync(file, text);
  } catch (e) {
    throw new UsageError(
      `--write ${dir}: cannot write (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  for (const [file] of files) io.err(`wrote ${file}\n`);
  return { ...plan, filesWritten: true };
}

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const path = args[0];
  if (!path) throw new UsageError("plan masquerade: name a snapshot folder or .tar.gz");
  const dest = typeof opts["dest"] === "string" ? parseDestination(opts["dest"]) : undefined;
  if (dest && "error" in dest) throw new UsageError(dest.error);
  const strategy = (opts["strategy"] ?? "narrow") as MasqueradeStrategy;
  const podRange: Cidr[] = [];
  if (typeof opts["podRange"] === "string") {
    for (const t of opts["podRange"].split(",")) {
      const r = tryParseCidr(t.trim(), { allowBareAddress: false });
      if ("error" in r)
        throw new UsageError(
          `--pod-range ${JSON.stringify(t)}: ${r.error}; expected CIDRs like 10.4.0.0/14`,
        );
      podRange.push(r.cidr);
    }
  }
  let snap: ReturnType<typeof loadSnapshot>;
  try {
    snap = loadSnapshot(openSnapshot(path));
  } catch (e) {
    if (e instanceof SnapshotOpenError) throw new UsageError(`${e.message}\n${LAYOUT_HELP}`);
    throw e;
  }
  if (isEmptySnapshot(snap))
    throw new UsageError(`${path}: nothing in it is part of a snapshot.\n${LAYOUT_HELP}`);
  let plan: ReturnType<typeof planMasquerade>;
  try {
    plan = planMasquerade(snap, {
      strategy,
      podRange,
      ...(dest ? { dest } : {}),
      ...(typeof opts["write"] === "string" ? { fileDir: opts["write"] } : {}),
    });
  } catch (e) {
    if (e instanceof PlanError) throw new UsageError(e.message);
    throw e;
  }
  if (typeof opts["write"] === "string") plan = writePlanFiles(plan, opts["write"], io);
  let replay: ReplayLine[] = [];
  if (opts["replay"] === true) {
    replay = await withProgress(progressStream(io), "replaying the plan on a real kernel", () =>
      replayPlan(snap, plan, io),
    );
  }
  const format = opts["output"] ?? "text";
  if (format === "yaml") io.out(renderMasqueradePlanYaml(plan));
  else {
    const report = {
      json: envelope("plan masquerade", { ...plan, replay }),
      document: masqueradePlanDocument(plan, replay),
    };
    io.out(renderReport(report, isFormat(format) ? format : "text", io.colors));
  }
  if (plan.narrow?.validationError) return EXIT.findings;
  if (replay.some((r) => r.agree === false)) return EXIT.findings;
  return EXIT.ok;
}
