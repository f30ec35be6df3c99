/**
 * @module cli/commands/verify — `podpath verify <before> <after>`: the change record.
 */
import { parseDestination } from "../../cases/endpoints.ts";
import { isIntendedVerdict, verifyChange } from "../../cases/masquerade/proof.ts";
import {
  renderChangeRecordMarkdown,
  renderChangeRecordText,
} from "../../cases/masquerade/proof-render.ts";
import { LAYOUT_HELP } from "../../snapshot/layout.ts";
import { isEmptySnapshot, loadSnapshot, type Snapshot } from "../../snapshot/load.ts";
import { openSnapshot, SnapshotOpenError } from "../../snapshot/source.ts";
import { EXIT, type Io, UsageError } from "../io.ts";

function load(path: string): Snapshot {
  try {
    const snap = loadSnapshot(openSnapshot(path));
    if (isEmptySnapshot(snap))
      throw new UsageError(`${path}: nothing in it is part of a snapshot.\n${LAYOUT_HELP}`);
    return snap;
  } catch (e) {
    if (e instanceof SnapshotOpenError) throw new UsageError(`${e.message}\n${LAYOUT_HELP}`);
    throw e;
  }
}

export async function run(
  args: readonly string[],
  opts: Readonly<Record<string, unknown>>,
  io: Io,
): Promise<number> {
  const [b, a] = args;
  if (!b || !a)
    throw new UsageError("verify: name the snapshot before the change and the one after it");
  const dest = typeof opts["dest"] === "string" ? parseDestination(opts["dest"]) : undefined;
  if (dest && "error" in dest) throw new UsageError(dest.error);
  const record = await verifyChange(load(b), load(a), dest ? { dest } : {});
  const format = opts["output"] ?? "md";
  if (format === "json")
    io.out(`${JSON.stringify(record, (_k, v) => (typeof v === "bigint" ? v.toString() : v), 2)}\n`);
  else if (format === "text") io.out(renderChangeRecordText(record));
  else io.out(renderChangeRecordMarkdown(record));
  return isIntendedVerdict(record) ? EXIT.ok : EXIT.findings;
}
